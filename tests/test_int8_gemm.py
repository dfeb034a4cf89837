"""``T.gemm`` on int8 (and uint8) tiles into an int32 accumulator: Hopper's integer wgmma
(m64nNk32.s32.s8.s8, both operands K-major: B stored N x K, ``transpose_B=True``), as TileLang's
int8 GEMMs write it. The tile-level interpreter against numpy's exact integer product, the
generated instruction, NVRTC compiles (ptxas checks the instruction for sm_90a), and the refusals:
a float32 accumulator, B stored K x N."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.jit.lower import lower


def int8_gemm(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, threads=128, dtype="int8",
              accum_dtype="int32", transpose_B=True):
    B_shape, B_tile = ((N, K), (block_N, block_K)) if transpose_B else ((K, N), (block_K, block_N))

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared(B_tile, dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                if transpose_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=transpose_B)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


CASES = [dict(M=256, N=256, K=256), dict(M=200, N=136, K=96, block_K=32, num_stages=3),
         dict(M=512, N=512, K=512, block_N=256, num_stages=3, threads=256, dtype="uint8")]


@pytest.mark.parametrize("case", CASES, ids=["int8", "int8-partial-tiles", "uint8-two-warpgroups"])
def test_the_product_is_exact_on_the_interpreter(case):
    info = np.iinfo(case.get("dtype", "int8"))
    rng = np.random.default_rng(case["M"])
    a = rng.integers(info.min, info.max, (case["M"], case["K"]), endpoint=True).astype(info.dtype)
    b = rng.integers(info.min, info.max, (case["N"], case["K"]), endpoint=True).astype(info.dtype)
    c = np.zeros((case["M"], case["N"]), np.int32)
    tw.compile(int8_gemm(**case), target="cpu")(a, b, c)
    assert np.array_equal(c, a.astype(np.int64) @ b.astype(np.int64).T)


@pytest.mark.parametrize("case", CASES, ids=["int8", "int8-partial-tiles", "uint8-two-warpgroups"])
def test_it_is_an_integer_wgmma_and_compiles(case):
    source = lower(int8_gemm(**case), target="cuda").kernel_source
    ptx_type = "u8" if case.get("dtype") == "uint8" else "s8"
    assert f".s32.{ptx_type}.{ptx_type} " in source and "p;\\n" in source  # no scale immediates
    assert "int C_l[" in source
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    assert compile_check(source, "sm_90a").spills_bytes == 0


def test_what_is_refused():
    with pytest.raises(CompileError, match="T.gemm of int8 tiles accumulates in int32; C_l is float32"):
        int8_gemm(256, 256, 256, accum_dtype="float32")
    with pytest.raises(CompileError, match=r"int8 tiles .* B stored N x K \(transpose_B=True\)"):
        lower(int8_gemm(256, 256, 256, transpose_B=False), target="cuda")
