"""Debug mode on the GPU: a kernel that hangs with the barrier check off returns a clear
KernelRuntimeError within 5 s, and the next kernel in the same process runs correctly.

Run on the H200 from the source tree: ``PYTHONPATH=. python -m pytest tests/checker -q``."""

import time

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
import tileworkbench.testing
from tileworkbench import KernelRuntimeError

pytestmark = tileworkbench.testing.gpu_marks(9, 0)

HANGS = {"tw.barrier_check": "off", "tw.debug_barrier_timeout": 2.0}


def hangs_without_arrivals():
    """Four blocks whose every thread waits for a phase nobody arrives on."""

    @T.prim_func
    def main(A: T.Tensor((512, 32), "float16"), B: T.Tensor((512, 32), "float16")):
        with T.Kernel(4, threads=128) as bx:
            A_shared = T.alloc_shared((128, 32), "float16")
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[bx * 128, 0], A_shared, barrier=mbar)
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B[bx * 128, 0])

    return main


def waits_then_reads():
    """The same kernel, correct."""

    @T.prim_func
    def main(A: T.Tensor((512, 32), "float16"), B: T.Tensor((512, 32), "float16")):
        with T.Kernel(4, threads=128) as bx:
            A_shared = T.alloc_shared((128, 32), "float16")
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[bx * 128, 0], A_shared, barrier=mbar)
            T.barrier_arrive(mbar)
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B[bx * 128, 0])

    return main


def _wait_line(func) -> int:
    src = func.attrs["source_lines"]
    first = func.source_line - next(i for i, t in enumerate(src) if t.lstrip().startswith("def "))
    (hit,) = [i for i, t in enumerate(src) if "T.barrier_wait(mbar, 0)" in t]
    return first + hit


def test_a_hang_becomes_a_runtime_error_and_the_process_goes_on():
    import cupy

    func = hangs_without_arrivals()
    kernel = tw.compile(func, out_idx=[1], pass_configs=HANGS)
    A = cupy.random.standard_normal((512, 32), dtype=cupy.float32).astype(cupy.float16)
    for _ in range(2):  # and again: the record is zeroed for every launch
        start = time.perf_counter()
        with pytest.raises(KernelRuntimeError) as info:
            kernel(A)
        assert time.perf_counter() - start < 5.0
        record = info.value.record
        assert (record["barrier"], record["slot"], record["parity"]) == ("mbar", 0, 0)
        assert record["block"][0] in range(4) and record["block"][1:] == (0, 0) and 0 <= record["thread"] < 128
        assert record["file"] == func.source_file and record["line"] == _wait_line(func)
        assert 2.0 <= record["waited_s"] < 5.0
        assert f"mbar[0] for parity 0 at {func.source_file}:{record['line']}" in str(info.value)

    # The context is fine: a correct kernel, in debug mode and not, runs right after.
    cupy.cuda.runtime.deviceSynchronize()
    for configs in ({"tw.debug_barrier_timeout": 2.0}, {}):
        ok = tw.compile(waits_then_reads(), out_idx=[1], pass_configs=configs)
        B = ok(A)
        np.testing.assert_array_equal(cupy.asnumpy(B), cupy.asnumpy(A))


@pytest.mark.parametrize("num_stages", [2, 3])
def test_the_spec_gemm_is_correct_in_debug_mode(num_stages):
    import cupy

    from tileworkbench.examples.gemm import matmul_tma_copy

    func = matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, num_stages)
    configs = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    plain = tw.compile(func, out_idx=[2], pass_configs=configs)
    debug = tw.compile(func, out_idx=[2], pass_configs={**configs, "tw.debug_barrier_timeout": 2.0})
    A = cupy.random.standard_normal((1024, 1024), dtype=cupy.float32).astype(cupy.float16)
    B = cupy.random.standard_normal((1024, 1024), dtype=cupy.float32).astype(cupy.float16)
    assert bool(cupy.array_equal(plain(A, B), debug(A, B)))
