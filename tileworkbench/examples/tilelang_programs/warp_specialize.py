"""GEMM warp-specialised by hand, as TileLang's warp-specialisation examples write it: ``T.ws(g)``
gives warpgroup ``g`` (threads 128g .. 128g + 127) its part of the loop. One warpgroup loads the
tiles with ``T.tma_copy`` and arrives on a barrier the other waits on before its ``T.gemm``; the
gemm's warpgroup arrives on a second barrier that the loader waits on before it refills the tiles.
With ``num_stages=2`` the compiler gives the tiles and the barriers two versions, so the loader
runs one tile ahead; ``matmul_barrier_pipe`` keeps the two versions itself in a list of four
barriers. ``matmul_split_n`` has no barriers of its own: both warpgroups copy and multiply their
half of the tile, and the compiler puts the block barriers the copies need where they go.
``matmul_loops_in_scopes`` (ours, not one of TileLang's GEMM examples) writes each warpgroup's
whole loop in its own scope, the gemm's first, as TileLang's FlashMLA example writes its roles: the
loader's scope runs ahead of the one written before it."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def matmul_ws(A, B, block_M, block_N, block_K, num_stages=0, producer=0, dtype=T.float16, accum_dtype=T.float32):
    """``producer`` is the warpgroup that loads (0 or 1); the other multiplies."""
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    consumer = 1 - producer
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        data_is_ready = T.alloc_barrier(arrive_count=128)
        compute_is_done = T.alloc_barrier(arrive_count=128)

        with T.ws(consumer):
            T.clear(C_local)

        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            with T.ws(producer):
                T.barrier_wait(compute_is_done, (ko + 1) % 2)
                T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=data_is_ready)
                T.tma_copy(B[ko * block_K, bx * block_N], B_shared, barrier=data_is_ready)
                T.barrier_arrive(data_is_ready)
            with T.ws(consumer):
                T.barrier_wait(data_is_ready, ko % 2)
                T.gemm(A_shared, B_shared, C_local)
                T.barrier_arrive(compute_is_done)

        with T.ws(consumer):
            T.copy(C_local, C[by * block_M, bx * block_N])

    return C


@tilelang.jit
def matmul_barrier_pipe(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    num_stages = 2
    counts = [128, 128] * num_stages  # barriers 0, 1: tile ready; 2, 3: tile free again

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((num_stages, block_M, block_K), dtype)
        B_shared = T.alloc_shared((num_stages, block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        bars = T.alloc_barrier(counts)

        with T.ws(0):
            T.clear(C_local)

        for ko in range(T.ceildiv(K, block_K)):
            slot = ko % num_stages
            with T.ws(1):
                T.mbarrier_wait_parity(mbarrier=bars[slot + num_stages], parity=((ko // num_stages) % 2) ^ 1)
                T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                           A_shared[slot, :, :], barrier=bars[slot])
                T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                           B_shared[slot, :, :], barrier=bars[slot])
                T.mbarrier_arrive(mbarrier=bars[slot])
            with T.ws(0):
                T.mbarrier_wait_parity(mbarrier=bars[slot], parity=(ko // num_stages) % 2)
                T.gemm(A_shared[slot, :, :], B_shared[slot, :, :], C_local)
                T.mbarrier_arrive(mbarrier=bars[slot + num_stages])

        with T.ws(0):
            T.copy(C_local, C[by * block_M, bx * block_N])

    return C


@tilelang.jit
def matmul_split_n(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    half = block_N // 2
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_left = T.alloc_shared((block_K, half), dtype)
        B_right = T.alloc_shared((block_K, half), dtype)
        C_left = T.alloc_fragment((block_M, half), accum_dtype)
        C_right = T.alloc_fragment((block_M, half), accum_dtype)

        with T.ws(0):
            T.clear(C_left)
        with T.ws(1):
            T.clear(C_right)

        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
            T.copy(A[by * block_M, ko * block_K], A_shared)
            with T.ws(0):
                T.copy(B[ko * block_K, bx * block_N], B_left)
                T.gemm(A_shared, B_left, C_left)
            with T.ws(1):
                T.copy(B[ko * block_K, bx * block_N + half], B_right)
                T.gemm(A_shared, B_right, C_right)

        with T.ws(0):
            T.copy(C_left, C[by * block_M, bx * block_N])
        with T.ws(1):
            T.copy(C_right, C[by * block_M, bx * block_N + half])

    return C


@tilelang.jit
def matmul_loops_in_scopes(A, B, block_M, block_N, block_K, num_stages=2, dtype=T.float16, accum_dtype=T.float32):
    """Barriers ``0 .. num_stages - 1``: stage ``s`` loaded; ``num_stages ..``: stage ``s`` free again."""
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((num_stages, block_M, block_K), dtype)
        B_shared = T.alloc_shared((num_stages, block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        bars = T.alloc_barrier([128] * (2 * num_stages))

        with T.ws(1):
            T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, block_K)):
                T.barrier_wait(bars[ko % num_stages], (ko // num_stages) % 2)
                T.gemm(A_shared[ko % num_stages, :, :], B_shared[ko % num_stages, :, :], C_local)
                T.barrier_arrive(bars[ko % num_stages + num_stages])
        with T.ws(0):
            for ko in T.serial(T.ceildiv(K, block_K)):
                # the first round of stages is free from the start: wait for the phase "before" phase 0
                T.barrier_wait(bars[ko % num_stages + num_stages], ((ko // num_stages) % 2) ^ 1)
                T.tma_copy(A[by * block_M, ko * block_K], A_shared[ko % num_stages, :, :],
                           barrier=bars[ko % num_stages])
                T.tma_copy(B[ko * block_K, bx * block_N], B_shared[ko % num_stages, :, :],
                           barrier=bars[ko % num_stages])
                T.barrier_arrive(bars[ko % num_stages])
        with T.ws(1):
            T.copy(C_local, C[by * block_M, bx * block_N])

    return C


S = 4096


def _randn(torch, *shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float16)


def _case(compile):
    return dict(compile=compile, inputs=lambda torch: (_randn(torch, S, S), _randn(torch, S, S)),
                reference=lambda a, b: a.float() @ b.float(), rtol=1e-2, atol=1e-2, flops=2 * S**3)


CASES = {
    "ws_copy_0_gemm_1": _case(lambda: matmul_ws.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=64)),
    "ws_copy_1_gemm_0": _case(lambda: matmul_ws.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=64,
                                                         num_stages=2, producer=1)),
    "ws_barrier_pipe": _case(lambda: matmul_barrier_pipe.compile(M=S, N=S, K=S, block_M=128, block_N=128,
                                                                 block_K=64)),
    "ws_split_n": _case(lambda: matmul_split_n.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=64)),
}
