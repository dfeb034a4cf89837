"""``tilelang.carver.arch.driver``: the device queries TileLang's persistent examples size their
grids by (``get_num_sms()``) are here; the rest of TileLang's carver (its hint generator) is an
``ImportError`` saying to tune with ``autotune(configs=...)``. The answers on a GPU are
``tests/gpu/test_carver_driver_gpu.py``'s."""

from __future__ import annotations

import pytest

import tileworkbench as tilelang
from tileworkbench.carver.arch import driver
from tileworkbench.testing import cuda_compute_version


@pytest.mark.parametrize("statement", [
    "from tileworkbench.carver.template import MatmulTemplate",
    "from tileworkbench.carver.arch import CUDA",
    "from tileworkbench.carver.roller.rasterization import NoRasterization",
    "from tileworkbench.carver import Hint"])
def test_the_hint_generator_is_refused_with_what_to_use(statement):
    with pytest.raises(ImportError, match=r"is not supported: TileLang's hint generator .* tune with "
                                          r"tileworkbench.autotune\(configs=...\)"):
        exec(statement, {})


def test_the_driver_is_the_carvers_part_that_is_here():
    from tileworkbench.carver.arch.driver import get_num_sms  # noqa: F401 (TileLang's import of it)

    assert tilelang.carver.arch.driver is driver


@pytest.mark.skipif(cuda_compute_version() is not None, reason="the answers without a device")
def test_without_a_device_the_sm_count_is_an_error_and_the_rest_none():
    with pytest.raises(RuntimeError, match="get_num_sms: no CUDA device 0 to ask"):
        driver.get_num_sms()
    assert driver.get_device_name() is None and driver.get_shared_memory_per_block(format="kb") is None
    with pytest.raises(RuntimeError, match="Invalid format"):
        driver.get_max_dynamic_shared_size_bytes(format="gb")


def test_the_answers_are_the_runtimes_properties(monkeypatch):
    """(CuPy's runtime stood in: the properties it would give an H100.)"""
    import cupy

    props = {"name": b"NVIDIA H100 80GB HBM3", "multiProcessorCount": 132, "sharedMemPerBlock": 49152,
             "sharedMemPerBlockOptin": 232448}
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceProperties", lambda device: props)
    monkeypatch.setattr(cupy.cuda.runtime, "deviceGetAttribute", lambda attr, device: {12: 65536}[attr])
    assert driver.get_num_sms() == 132 and driver.get_device_name() == "NVIDIA H100 80GB HBM3"
    assert driver.get_shared_memory_per_block(format="kb") == 48
    assert driver.get_max_dynamic_shared_size_bytes() == 232448 and driver.get_registers_per_block() == 65536


@pytest.mark.skipif(cuda_compute_version() is not None, reason="the answer without a device")
def test_a_kernel_sized_by_the_sm_count_says_at_its_line_that_no_device_answers():
    """TileLang's persistent GEMM asks ``driver.get_num_sms()`` in its body: without a device that
    is the user's situation at that line, not an internal error of the compiler."""
    import tileworkbench.language as T
    from tileworkbench.errors import CompileError

    @tilelang.jit
    def persistent(A, block=64):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        B = T.empty((N,), "float32")
        sms = driver.get_num_sms()
        with T.Kernel(sms, threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i]
        return B

    with pytest.raises(CompileError, match=r"driver.get_num_sms\(...\) raised NoDeviceError: get_num_sms: no CUDA "
                                           r"device 0") as info:
        persistent.compile(N=1024)
    assert "internal error" not in str(info.value) and "sms = driver.get_num_sms()" in str(info.value)
