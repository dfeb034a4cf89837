"""GEMV, y = B x with B as (N, K): one thread per output row, and the split-K form where a 2-D
thread block's ``reduce_threads`` threads of a row add their partial sums into shared memory with
``T.atomic_add`` (TileLang's gemv examples)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def naive_gemv(A, B, BLOCK_N: int, BLOCK_K: int, dtype: T.dtype = T.float16, accum_dtype: T.dtype = T.float):
    N, K = T.const("N, K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N)) as bn:
        tn = T.get_thread_binding(0)
        A_shared = T.alloc_shared((BLOCK_K,), dtype)
        B_shared = T.alloc_shared((BLOCK_N, BLOCK_K), dtype)
        C_reg = T.alloc_local((1,), accum_dtype)
        T.clear(C_reg)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for tk in T.serial(BLOCK_K):
                A_shared[tk] = A[bk * BLOCK_K + tk]
                B_shared[tn, tk] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
            for tk in T.serial(BLOCK_K):
                C_reg[0] += A_shared[tk].astype(accum_dtype) * B_shared[tn, tk].astype(accum_dtype)
        C[bn * BLOCK_N + tn] = C_reg[0]

    return C


@tilelang.jit
def splitk_gemv(A, B, BLOCK_N: int, BLOCK_K: int, reduce_threads: int, dtype: T.dtype = T.float16,
                accum_dtype: T.dtype = T.float):
    N, K = T.const("N, K")
    TILE_K = T.ceildiv(BLOCK_K, reduce_threads)
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)

    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        A_local = T.alloc_local((TILE_K,), dtype)
        B_local = T.alloc_local((TILE_K,), dtype)
        C_shared = T.alloc_shared((BLOCK_N,), accum_dtype)
        C_accum = T.alloc_local((1,), accum_dtype)
        if tk == 0:
            C_shared[tn] = 0
        T.clear(C_accum)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for k in T.serial(TILE_K):
                A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
            for k in T.serial(TILE_K):
                C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
        T.atomic_add(C_shared[tn], C_accum[0])
        C[bn * BLOCK_N + tn] = C_shared[tn]

    return C


N, K = 8192, 8192


def _inputs(torch):
    return (torch.randn(K, device="cuda", dtype=torch.float16), torch.randn(N, K, device="cuda", dtype=torch.float16))


CASES = {
    "gemv_naive": dict(
        compile=lambda: naive_gemv.compile(N=N, K=K, BLOCK_N=128, BLOCK_K=128),
        inputs=_inputs, reference=lambda a, b: b.float() @ a.float(),
        rtol=1e-2, atol=1e-2, bytes=(N * K + K + N) * 2),
    "gemv_splitk": dict(
        compile=lambda: splitk_gemv.compile(N=N, K=K, BLOCK_N=32, BLOCK_K=32, reduce_threads=32),
        inputs=_inputs, reference=lambda a, b: b.float() @ a.float(),
        rtol=1e-2, atol=1e-2, bytes=(N * K + K + N) * 2),
}
