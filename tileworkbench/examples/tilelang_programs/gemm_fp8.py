"""FP8 GEMM: A (M x K) times B stored N x K, both e4m3 or e5m2, accumulated in float32 and
stored in the input type (TileLang's FP8 GEMM example). On sm_90a: wgmma's FP8 form."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def matmul(A, B, block_M, block_N, block_K, dtype, accum_dtype=T.float32, num_stages=3, threads=128):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_N, block_K), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[bx * block_N, k * block_K], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)

        T.copy(C_local, C[by * block_M, bx * block_N])

    return C


S = 4096
TORCH_TYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _inputs(torch, kind):
    fp8 = getattr(torch, TORCH_TYPES[kind])
    # unit normal values, rounded to FP8 once: the reference multiplies exactly these
    return tuple(torch.randn(*shape, device="cuda", dtype=torch.float16).to(fp8) for shape in ((S, S), (S, S)))


def _reference(a, b):
    # float32 products of the FP8 inputs, rounded to the output's FP8 type as the kernel's store does
    return (a.float() @ b.float().T).to(a.dtype)


# The tolerance is FP8's: one unit in the last place of a result near 64 is 4 (e4m3) or 16 (e5m2).
CASES = {
    "gemm_fp8_e4m3": dict(
        compile=lambda: matmul.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=128, dtype=T.float8_e4m3fn),
        inputs=lambda torch: _inputs(torch, "e4m3"), reference=_reference, rtol=0.125, atol=0.5, flops=2 * S**3),
    "gemm_fp8_e5m2": dict(
        compile=lambda: matmul.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=128, dtype=T.float8_e5m2),
        inputs=lambda torch: _inputs(torch, "e5m2"), reference=_reference, rtol=0.25, atol=1.0, flops=2 * S**3),
}
