"""Stream-K GEMM (TileLang's stream-K example): ``C = A @ B^T`` with the K loops of the first
``streamk_tiles`` output tiles cut into equal runs of iterations, one run per program (so every SM
has the same work whatever the tile count); a program that does not own its tile's first and last
iteration adds its part into C atomically (C starts zeroed, float32). The remaining tiles are
computed whole, ``sm_patition_factor`` per program."""

import tileworkbench as tilelang
import tileworkbench.language as T


def stream_k_plan(M, N, K, block_M, block_N, block_K, programs):
    """How the work splits: (streamk_tiles, full_iters, partial_iters, whole_tiles_per_program)."""
    tiles = tilelang.cdiv(M, block_M) * tilelang.cdiv(N, block_N)
    iters_per_tile = tilelang.cdiv(K, block_K)
    streamk_tiles = tiles % programs
    if tiles - streamk_tiles > programs:
        streamk_tiles += programs  # two stream-K waves' worth before the whole tiles
    streamk_iters = streamk_tiles * iters_per_tile
    return (streamk_tiles, streamk_iters // programs, streamk_iters % programs,
            max((tiles - streamk_tiles) // programs, 1))


@tilelang.jit
def streamk_matmul(A, B, C, streamk_tiles, full_iters, partial_iters, whole_per_program, block_M, block_N,
                   block_K, programs, num_stages, threads, dtype=T.float16, accum_dtype=T.float32):
    # The plan (stream_k_plan) comes from the caller: TileLang builds this body with the sizes
    # still symbolic, so Python cannot branch on them here.
    M, N, K = T.const("M, N, K")
    iters_per_tile = T.ceildiv(K, block_K)
    tiles_n = T.ceildiv(N, block_N)

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((N, K), dtype)
    C: T.Tensor((M, N), accum_dtype)

    with T.Kernel(programs, threads=threads) as pid:
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_N, block_K), dtype)
        A_whole = T.alloc_shared((block_M, block_K), dtype)
        B_whole = T.alloc_shared((block_N, block_K), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        start = T.alloc_fragment((1,), T.int32, "local")
        end = T.alloc_fragment((1,), T.int32, "local")

        # this program's run of stream-K iterations: [start, last), across tile boundaries
        start[0] = pid * full_iters + T.min(pid, partial_iters)
        last = (pid + 1) * full_iters + T.min(pid + 1, partial_iters)
        while start[0] < last:
            end[0] = T.min(start[0] + (iters_per_tile - start[0] % iters_per_tile), last)
            tile = start[0] // iters_per_tile
            first_k = start[0] % iters_per_tile
            tm = tile // tiles_n
            tn = tile % tiles_n
            T.clear(C_local)
            for k in T.Pipelined(end[0] - start[0], num_stages=num_stages):
                T.copy(A[tm * block_M, (k + first_k) * block_K], A_shared)
                T.copy(B[tn * block_N, (k + first_k) * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            # the whole K range of the tile in this program: store; a part of it: add atomically
            if first_k == 0 and end[0] % iters_per_tile == 0:
                T.copy(C_local, C[tm * block_M, tn * block_N])
            else:
                for i, j in T.Parallel(block_M, block_N):
                    T.atomic_add(C[tm * block_M + i, tn * block_N + j], C_local[i, j])
            start[0] = end[0]

        for p in T.serial(whole_per_program):
            tile = pid + streamk_tiles + p * programs
            tm = tile // tiles_n
            tn = tile % tiles_n
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[tm * block_M, k * block_K], A_whole)
                T.copy(B[tn * block_N, k * block_K], B_whole)
                T.gemm(A_whole, B_whole, C_local, transpose_B=True)
            T.copy(C_local, C[tm * block_M, tn * block_N])


SMS = 132  # the H200's streaming multiprocessors
SHAPE = (256, 1024, 512)


def _case(M, N, K, block_M, block_N, block_K, stages, threads):
    streamk_tiles, full_iters, partial_iters, whole = stream_k_plan(M, N, K, block_M, block_N, block_K, SMS)
    return dict(
        compile=lambda: streamk_matmul.compile(M=M, N=N, K=K, streamk_tiles=streamk_tiles, full_iters=full_iters,
                                               partial_iters=partial_iters, whole_per_program=whole,
                                               block_M=block_M, block_N=block_N, block_K=block_K,
                                               programs=SMS, num_stages=stages, threads=threads),
        inputs=lambda torch: (torch.rand(M, K, device="cuda", dtype=torch.float16) * 2 - 1,
                              torch.rand(N, K, device="cuda", dtype=torch.float16) * 2 - 1,
                              torch.zeros(M, N, device="cuda", dtype=torch.float32)),
        reference=lambda a, b, c: a.float() @ b.float().T,
        accumulates=True, rtol=1e-2, atol=1e-2, flops=2 * M * N * K)


CASES = {
    "streamk_gemm": _case(*SHAPE, 16, 128, 32, 2, 64),
}
