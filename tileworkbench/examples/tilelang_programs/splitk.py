"""Split-K GEMM: ``split_k`` blocks along z each multiply a slice of K and add their partial
products into the float32 output with ``T.atomic_add`` (TileLang's split-K example; the output is
an input the caller zeroes)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def matmul_splitk(A, B, C, block_M, block_N, block_K, split_k, dtype=T.float16, accum_dtype=T.float32,
                  out_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    splitK = K // split_k

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C: T.Tensor((M, N), out_dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(splitK, block_K), num_stages=0):
            T.copy(A[by * block_M, bz * splitK + ko * block_K], A_shared)
            T.copy(B[bz * splitK + ko * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)

        for i, j in T.Parallel(block_M, block_N):
            T.atomic_add(C[by * block_M + i, bx * block_N + j], C_local[i, j])


M, N, K = 4096, 4096, 4096


def _inputs(torch):
    return (torch.randn(M, K, device="cuda", dtype=torch.float16), torch.randn(K, N, device="cuda", dtype=torch.float16),
            torch.zeros(M, N, device="cuda"))


CASES = {
    "gemm_splitk": dict(
        compile=lambda: matmul_splitk.compile(M=M, N=N, K=K, block_M=128, block_N=128, block_K=32, split_k=4),
        inputs=_inputs, reference=lambda a, b, c: a.float() @ b.float(),
        rtol=1e-2, atol=1e-2, flops=2 * M * N * K, accumulates=True),
}
