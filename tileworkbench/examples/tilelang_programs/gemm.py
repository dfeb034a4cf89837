"""GEMM as TileLang writes it now: sizes from T.const, the output returned; B as (K, N) and, with
``transpose_B``, as (N, K) (TileLang's gemm examples); on float32 inputs, a TF32 GEMM (as
TileLang's KDA and GDN kernels use it)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def matmul(A, B, block_M, block_N, block_K, num_stages=3, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)

        T.copy(C_local, C[by * block_M, bx * block_N])

    return C


@tilelang.jit
def matmul_nt(A, B, block_M, block_N, block_K, num_stages=3, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
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


@tilelang.jit
def matmul_persistent(A, B, block_M, block_N, block_K, threads, num_stages, sm_num, dtype=T.float16,
                      accum_dtype=T.float32):
    """One block per SM, each walking its tiles wave by wave (TileLang's persistent GEMM example;
    ``sm_num`` from the caller rather than the driver, so the file keeps to its two imports)."""
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(sm_num, threads=threads) as (block_id):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        C_shared = T.alloc_shared((block_M, block_N), dtype)

        for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[bx * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, by * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[bx * block_M, by * block_N])

    return C


S = 4096
SMS = 132  # the H200's


def _randn(torch, *shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float16)


CASES = {
    "gemm": dict(
        compile=lambda: matmul.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=32),
        inputs=lambda torch: (_randn(torch, S, S), _randn(torch, S, S)),
        reference=lambda a, b: a.float() @ b.float(),
        rtol=1e-2, atol=1e-2, flops=2 * S**3),
    "gemm_transpose_b": dict(
        compile=lambda: matmul_nt.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=32),
        inputs=lambda torch: (_randn(torch, S, S), _randn(torch, S, S)),
        reference=lambda a, b: a.float() @ b.float().T,
        rtol=1e-2, atol=1e-2, flops=2 * S**3),
    "gemm_tf32": dict(
        compile=lambda: matmul_nt.compile(M=S, N=S, K=S, block_M=128, block_N=128, block_K=32, dtype=T.float32),
        inputs=lambda torch: (torch.randn(S, S, device="cuda"), torch.randn(S, S, device="cuda")),
        reference=lambda a, b: a.double() @ b.double().T,
        # TF32 keeps 10 mantissa bits: over K = 4096 products of N(0, 1) values the error reaches about
        # 0.1 on results up to about 300 (numpy with the operands rounded alike)
        rtol=1e-2, atol=0.25, flops=2 * S**3),
    "gemm_persistent": dict(
        compile=lambda: matmul_persistent.compile(M=S, N=S, K=S, block_M=128, block_N=256, block_K=64, threads=256,
                                                  num_stages=3, sm_num=SMS),
        inputs=lambda torch: (_randn(torch, S, S), _randn(torch, S, S)),
        reference=lambda a, b: a.float() @ b.float(),
        rtol=1e-2, atol=1e-2, flops=2 * S**3),
}
