"""Elementwise add through shared tiles and a fragment (TileLang's elementwise example)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def elementwise_add(A, B, block_M, block_N, in_dtype, out_dtype, threads):
    M, N = T.const("M, N")

    A: T.Tensor((M, N), in_dtype)
    B: T.Tensor((M, N), in_dtype)
    C = T.empty((M, N), out_dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_N), in_dtype)
        B_shared = T.alloc_shared((block_M, block_N), in_dtype)
        C_local = T.alloc_fragment((block_M, block_N), out_dtype)
        C_shared = T.alloc_shared((block_M, block_N), out_dtype)

        T.copy(A[by * block_M, bx * block_N], A_shared)
        T.copy(B[by * block_M, bx * block_N], B_shared)
        for y, x in T.Parallel(block_M, block_N):
            C_local[y, x] = A_shared[y, x] + B_shared[y, x]
        T.copy(C_local, C_shared)
        T.copy(C_shared, C[by * block_M, bx * block_N])

    return C


M, N = 8192, 8192

CASES = {
    "elementwise_add": dict(
        compile=lambda: elementwise_add.compile(M=M, N=N, block_M=32, block_N=32, threads=128,
                                                in_dtype=T.float32, out_dtype=T.float32),
        inputs=lambda torch: (torch.randn(M, N, device="cuda"), torch.randn(M, N, device="cuda")),
        reference=lambda a, b: a + b,
        rtol=1e-2, atol=1e-2, bytes=3 * M * N * 4),
}
