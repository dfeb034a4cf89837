"""``T.Kernel(..., threads=(x, y[, z]))`` with a dimension of one thread: that dimension exists, its
index 0, as CUDA's is (TileLang's split-K GEMV at ``BLOCK_N=32, reduce_threads=1`` was refused:
"only threadIdx.x exists")."""

import os

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc


@pytest.mark.parametrize("dims,axis,expected", [((32, 1), 1, "0"), ((1, 32), 0, "0"), ((1, 32), 1, "tx"),
                                                ((8, 4, 1), 2, "0"), ((8, 4, 1), 1, "(tx / 8)")])
def test_a_thread_dimension_of_one_exists_with_index_zero(dims, axis, expected):
    @T.prim_func
    def main(A: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=dims):
            t = T.get_thread_binding(axis)
            A[T.get_thread_binding(0) % 64] = t

    code = tw.lower(main, target="sm_90a").device_source.split("// ---- kernel ----")[1]
    assert f"int t = {expected};" in code, code


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
@pytest.mark.parametrize("block_n,reduce_threads", [(32, 1), (1, 32)])
def test_split_k_gemv_with_one_thread_along_a_dimension_compiles(monkeypatch, block_n, reduce_threads):
    from tileworkbench.examples.tilelang_programs.gemv import splitk_gemv

    monkeypatch.setitem(os.environ, "TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = splitk_gemv.compile(N=256, K=1024, BLOCK_N=block_n, BLOCK_K=64, reduce_threads=reduce_threads)
    assert kernel.record["cubin"] is not None
