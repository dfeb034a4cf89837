"""TileLang's warp-level calls in thread-level code: ``T.shfl_sync/xor/down/up`` and
``T.warp_reduce_sum/max/min/bitand/bitor``, run thread by thread against numpy over the lanes of
each warp; NVRTC compiles; what is refused."""

import numpy as np
import pytest

import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.jit.lower import lower


@T.prim_func
def shuffles(A: T.Tensor((64,), "int32"), Out: T.Tensor((9, 64), "int32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        v = A[tx]
        Out[0, tx] = T.shfl_sync(v, 3)
        Out[1, tx] = T.shfl_xor(v, 5)
        Out[2, tx] = T.shfl_down(v, 2, width=8)
        Out[3, tx] = T.shfl_up(v, 1)
        Out[4, tx] = T.warp_reduce_sum(v)
        Out[5, tx] = T.warp_reduce_max(v)
        Out[6, tx] = T.warp_reduce_min(v)
        Out[7, tx] = T.warp_reduce_bitand(v)
        Out[8, tx] = T.warp_reduce_bitor(v)


def expected(a):
    t = np.arange(64)
    lane, base = t % 32, t - t % 32
    down = np.where(lane % 8 + 2 < 8, a[np.minimum(t + 2, 63)], a)  # within groups of 8 lanes
    up = np.where(lane >= 1, a[np.maximum(t - 1, 0)], a)
    warps = a.reshape(2, 32)
    per = lambda f: np.repeat(f(warps, axis=1), 32)  # noqa: E731
    return np.stack([a[base + 3], a[base + (lane ^ 5)], down, up, per(np.sum), per(np.max), per(np.min),
                     per(np.bitwise_and.reduce), per(np.bitwise_or.reduce)])


def test_shuffles_and_warp_reductions_at_the_thread_level():
    a = np.random.default_rng(2).integers(-1000, 1000, 64).astype(np.int32)
    out = np.zeros((9, 64), np.int32)
    run_at_thread_level(shuffles, a, out)
    assert np.array_equal(out, expected(a))


def test_they_compile_for_sm_90a():
    source = lower(shuffles, target="cuda").kernel_source
    assert source.count("__shfl_xor_sync(") >= 5 * 5 + 1
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(source, "sm_90a")


def test_what_is_refused():
    with pytest.raises(CompileError, match="width must be a power of 2 up to 32, got 6"):
        @T.prim_func
        def odd(A: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                A[tx] = T.shfl_down(A[tx], 1, width=6)
    with pytest.raises(CompileError, match="T.warp_reduce_bitor combines integers bit by bit; the value is float32"):
        @T.prim_func
        def floats(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                A[tx] = T.warp_reduce_bitor(A[tx])
