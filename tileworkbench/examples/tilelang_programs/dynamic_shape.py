"""GEMM with every size known only when it runs (TileLang's dynamic-shape example): ``T.dynamic``
names M, N and K, the kernel takes them as scalar parameters, a call reads them from the tensors'
shapes, and one compiled kernel serves every size; tiles hanging over the edges are masked."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def matmul_dynamic_mnk(A, B, block_M, block_N, block_K, trans_A, trans_B, in_dtype, out_dtype, accum_dtype,
                       num_stages, threads):
    M = T.dynamic("m")
    N = T.dynamic("n")
    K = T.dynamic("k")

    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_shared_shape = (block_K, block_M) if trans_A else (block_M, block_K)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    A: T.Tensor(A_shape, in_dtype)
    B: T.Tensor(B_shape, in_dtype)
    C = T.empty((M, N), out_dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared(A_shared_shape, in_dtype)
        B_shared = T.alloc_shared(B_shared_shape, in_dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            if trans_A:
                T.copy(A[k * block_K, by * block_M], A_shared)
            else:
                T.copy(A[by * block_M, k * block_K], A_shared)
            if trans_B:
                T.copy(B[bx * block_N, k * block_K], B_shared)
            else:
                T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local, trans_A, trans_B)
        T.copy(C_local, C[by * block_M, bx * block_N])

    return C


S = 4096
CONFIG = dict(block_M=128, block_N=128, block_K=32, trans_A=False, trans_B=False, in_dtype=T.float16,
              out_dtype=T.float16, accum_dtype=T.float32, num_stages=3, threads=128)


def _randn(torch, *shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float16)


CASES = {
    "gemm_dynamic": dict(
        compile=lambda: matmul_dynamic_mnk.compile(**CONFIG),
        inputs=lambda torch: (_randn(torch, S, S), _randn(torch, S, S)),
        reference=lambda a, b: a.float() @ b.float(),
        rtol=1e-2, atol=1e-2, flops=2 * S**3),
}
