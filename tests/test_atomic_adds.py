"""Atomic adds to 16-bit floats (``red.add.noftz.f16`` / ``.bf16``, tw/common.h) and TileLang's
``T.atomic_addx2`` / ``T.atomic_addx4`` (neighbouring elements, each added atomically): column sums
from many threads and blocks on both CPU interpreters against float64, the generated calls, NVRTC,
and what is refused."""

import ml_dtypes
import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.jit.lower import lower

NUMPY = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def column_sums(dtype, width=1):
    """Four blocks of 16 rows each add their rows into B: through a shared row first (``width`` 1),
    or straight into B ``width`` neighbours at a time."""

    @T.prim_func
    def kernel(A: T.Tensor((64, 128), dtype), B: T.Tensor((128,), dtype)):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((128,), dtype)
            T.clear(s)
            for i, j in T.Parallel(16, 128):
                T.atomic_add(s[j], A[bx * 16 + i, j])
            if width == 1:
                for j in T.Parallel(128):
                    T.atomic_add(B[j], s[j])
            elif width == 2:
                for j in T.Parallel(64):
                    T.atomic_addx2(B[j * 2:j * 2 + 2], s[j * 2:j * 2 + 2])
            else:
                for j in T.Parallel(32):
                    T.atomic_addx4(B[j * 4], s[j * 4])

    return kernel


@pytest.mark.parametrize("dtype, width", [("float16", 1), ("bfloat16", 1), ("float16", 2), ("float32", 2), ("float32", 4),
                                          ("bfloat16", 4)])
def test_column_sums_on_both_interpreters(dtype, width):
    a = np.random.default_rng(width).standard_normal((64, 128)).astype(np.float32).astype(NUMPY[dtype])
    want = a.astype(np.float64).sum(0)
    # each 16-bit add rounds: 16 + 4 roundings of sums up to about 20 in magnitude
    tol = {"float16": 0.05, "bfloat16": 0.4, "float32": 1e-4}[dtype]
    kernel = column_sums(dtype, width)
    for run in (run_at_thread_level, lambda k, *x: tw.compile(k, target="cpu")(*x)):
        out = np.zeros(128, NUMPY[dtype])
        run(kernel, a, out)
        assert np.abs(out.astype(np.float64) - want).max() < tol


def test_the_generated_adds_and_nvrtc():
    source = lower(column_sums("bfloat16", 2), target="cuda").kernel_source
    kernel_body = source[source.index('extern "C"'):]
    adds = [line.strip() for line in kernel_body.splitlines() if line.strip().startswith("atomicAdd(")]
    assert len(adds) == 3  # into the shared row, then the two neighbours
    assert "red.add.noftz.bf16" in source  # the header's overload
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    for dtype, width in (("float16", 1), ("bfloat16", 2), ("float32", 2), ("float32", 4)):
        compile_check(lower(column_sums(dtype, width), target="cuda").kernel_source, "sm_90a")


@pytest.mark.parametrize("width", [2, 4])
def test_float32_neighbours_are_one_vector_atomic(width):
    """Into a float32 tensor, ``T.atomic_addx2/x4`` whose neighbours start on a multiple of the
    vector are one 8- or 16-byte atomic (sm_90's float2/float4 ``atomicAdd``)."""
    source = lower(column_sums("float32", width), target="cuda").kernel_source
    kernel_body = source[source.index('extern "C"'):]
    assert f"tw::atomic_add_x{width}((&B[" in kernel_body
    assert sum(line.strip().startswith("atomicAdd(") for line in kernel_body.splitlines()) == 1  # the shared row's


def test_what_is_refused():
    with pytest.raises(CompileError, match=r"must be 2 neighbouring elements along the last dimension"):
        @T.prim_func
        def wide(B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((128,), "float32")
                T.atomic_addx2(B[0:4], s[0:4])
    with pytest.raises(CompileError, match="return_prev is not supported"):
        @T.prim_func
        def previous(B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((128,), "float32")
                T.atomic_addx2(B[0], s[0], return_prev=True)
