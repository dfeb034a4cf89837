"""Block-sparse GEMM: C = A @ B over the (by, bx, k) tiles a boolean mask keeps; the pipelined loop
loads and multiplies a tile pair only where ``BlockMask[by, bx, k]`` is set (TileLang's
block-sparse GEMM example, its default tiles: 128 x 128 x 32, 2 stages, 128 threads, rasterised)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def blocksparse_matmul(A, B, BlockMask, block_M, block_N, block_K, num_stages, thread_num, enable_rasteration,
                       dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    block_mask_shape = (M // block_M, N // block_N, K // block_K)

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    BlockMask: T.Tensor(block_mask_shape, "bool")
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=thread_num) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        C_shared = T.alloc_shared((block_M, block_N), dtype)

        T.use_swizzle(panel_size=10, enable=enable_rasteration)
        T.clear(C_local)

        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            if BlockMask[by, bx, k]:
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

        T.copy(C_local, C_shared)
        T.copy(C_shared, C[by * block_M, bx * block_N])

    return C


M = N = K = 4096
BLOCK = (128, 128, 32)
MASK = (M // BLOCK[0], N // BLOCK[1], K // BLOCK[2])
KEPT = MASK[0] * MASK[1] * MASK[2] // 2  # half the tiles: the example's sparsity 0.5, exactly


def _mask(torch):
    order = torch.randperm(MASK[0] * MASK[1] * MASK[2], generator=torch.Generator().manual_seed(7))
    mask = torch.zeros(MASK[0] * MASK[1] * MASK[2], dtype=torch.bool)
    mask[order[:KEPT]] = True
    return mask.view(MASK).cuda()


def _inputs(torch):
    return (torch.randn(M, K, device="cuda", dtype=torch.float16), torch.randn(K, N, device="cuda", dtype=torch.float16),
            _mask(torch))


def reference(a, b, mask):
    """Sum over k-tiles of the kept tiles' products, in float32."""
    bm, bn, bk = BLOCK
    out = None
    for k in range(mask.shape[2]):
        keep = mask[:, :, k].repeat_interleave(bm, 0).repeat_interleave(bn, 1)
        part = a[:, k * bk:(k + 1) * bk].float() @ b[k * bk:(k + 1) * bk, :].float()
        out = part * keep if out is None else out + part * keep
    return out


CASES = {
    "blocksparse_gemm": dict(
        compile=lambda: blocksparse_matmul.compile(M=M, N=N, K=K, block_M=BLOCK[0], block_N=BLOCK[1],
                                                   block_K=BLOCK[2], num_stages=2, thread_num=128,
                                                   enable_rasteration=True),
        inputs=_inputs, reference=reference, rtol=1e-2, atol=1e-2, flops=2 * KEPT * BLOCK[0] * BLOCK[1] * BLOCK[2]),
}
