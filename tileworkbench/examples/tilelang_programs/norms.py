"""RMSNorm (a whole row in a fragment, and split along the row with a running sum of squares) and
LayerNorm forward in the builder style, returning the normalised rows, their means and inverse
standard deviations (TileLang's norm examples)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit(pass_configs={"tl.disable_tma_lower": True})
def rms_norm(A, blk_m):
    M, N = T.const("M, N")
    dtype = T.float

    A: T.Tensor((M, N), dtype)
    B = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
        A_local = T.alloc_fragment((blk_m, N), dtype)
        A_pow_local = T.alloc_fragment((blk_m, N), dtype)
        A_powsum = T.alloc_fragment((blk_m,), dtype)

        T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_local)
        for i, j in T.Parallel(blk_m, N):
            A_pow_local[i, j] = A_local[i, j] * A_local[i, j]
        T.reduce_sum(A_pow_local, A_powsum, dim=1)
        for i in T.Parallel(blk_m):
            A_powsum[i] = T.rsqrt(A_powsum[i] / N + 1e-12)
        for i, j in T.Parallel(blk_m, N):
            A_local[i, j] *= A_powsum[i]
        T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return B


@tilelang.jit(pass_configs={"tl.disable_tma_lower": True})
def rms_norm_splitk(A, blk_m, blk_k):
    M, N = T.const("M, N")
    dtype = T.float

    A: T.Tensor((M, N), dtype)
    B = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
        A_shared = T.alloc_shared((blk_m, blk_k), dtype)
        A_local = T.alloc_fragment((blk_m, blk_k), dtype)
        A_powsum = T.alloc_fragment((blk_m,), dtype)

        num_k_step = T.ceildiv(N, blk_k)
        T.clear(A_local)
        for k in T.Serial(num_k_step):
            T.copy(A[bx * blk_m, k * blk_k], A_shared)
            for i, j in T.Parallel(blk_m, blk_k):
                A_local[i, j] += A_shared[i, j] * A_shared[i, j]
        T.reduce_sum(A_local, A_powsum, dim=1)
        for i in T.Parallel(blk_m):
            A_powsum[i] = T.rsqrt(A_powsum[i] / N + 1e-12)

        for k in T.Serial(num_k_step):
            # the last block first: it is the one still in L2
            T.copy(A[bx * blk_m, (num_k_step - 1 - k) * blk_k], A_shared)
            for i, j in T.Parallel(blk_m, blk_k):
                A_shared[i, j] *= A_powsum[i]
            T.copy(A_shared, B[bx * blk_m, (num_k_step - 1 - k) * blk_k])

    return B


@tilelang.jit(out_idx=[-3, -2, -1])
def layernorm_fwd(N, D, eps=1e-5, blk_m=1, threads=256, in_dtype="bfloat16", out_dtype="bfloat16"):
    accum_dtype = "float"

    @T.prim_func
    def main(
        X: T.Tensor((N, D), in_dtype),
        gamma: T.Tensor((D,), in_dtype),
        beta: T.Tensor((D,), in_dtype),
        Y: T.Tensor((N, D), out_dtype),
        Mean: T.Tensor((N,), accum_dtype),
        Rstd: T.Tensor((N,), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, blk_m), threads=threads) as bx:
            X_smem = T.alloc_shared((blk_m, D), in_dtype)
            G_smem = T.alloc_shared((D,), in_dtype)
            B_smem = T.alloc_shared((D,), in_dtype)
            X_local = T.alloc_fragment((blk_m, D), accum_dtype)
            X_sq_local = T.alloc_fragment((blk_m, D), accum_dtype)
            sum_row = T.alloc_fragment((blk_m,), accum_dtype)
            sumsq_row = T.alloc_fragment((blk_m,), accum_dtype)
            mean_row = T.alloc_fragment((blk_m,), accum_dtype)
            rstd_row = T.alloc_fragment((blk_m,), accum_dtype)

            T.copy(X[bx * blk_m, 0], X_smem)
            T.copy(gamma, G_smem)
            T.copy(beta, B_smem)

            for i, j in T.Parallel(blk_m, D):
                X_local[i, j] = T.Cast(accum_dtype, X_smem[i, j])
            for i, j in T.Parallel(blk_m, D):
                X_sq_local[i, j] = X_local[i, j] * X_local[i, j]

            T.reduce_sum(X_local, sum_row, dim=1)
            T.reduce_sum(X_sq_local, sumsq_row, dim=1)

            inv_D = T.float32(1.0) / T.Cast(accum_dtype, D)
            for i in T.Parallel(blk_m):
                mean_row[i] = sum_row[i] * inv_D
                rstd_row[i] = T.rsqrt(sumsq_row[i] * inv_D - mean_row[i] * mean_row[i] + T.Cast(accum_dtype, eps))
                Mean[bx * blk_m + i] = mean_row[i]
                Rstd[bx * blk_m + i] = rstd_row[i]

            for i, j in T.Parallel(blk_m, D):
                norm = (X_local[i, j] - mean_row[i]) * rstd_row[i]
                X_smem[i, j] = T.Cast(out_dtype, norm * T.Cast(accum_dtype, G_smem[j]) + T.Cast(accum_dtype, B_smem[j]))

            T.copy(X_smem, Y[bx * blk_m, 0])

    return main


M, N = 8192, 8192
LN_ROWS, LN_D = 8192, 4096


def _rms(x):
    return x * (x.double().pow(2).mean(-1, keepdim=True) + 1e-12).rsqrt().float()


def _layernorm(x, gamma, beta):
    x64 = x.double()
    mean = x64.mean(-1)
    rstd = (x64.var(-1, unbiased=False) + 1e-5).rsqrt()
    y = (x64 - mean[:, None]) * rstd[:, None] * gamma.double() + beta.double()
    return y.float(), mean.float(), rstd.float()


def _ln_inputs(torch):
    return (torch.randn(LN_ROWS, LN_D, device="cuda", dtype=torch.bfloat16),
            torch.randn(LN_D, device="cuda", dtype=torch.bfloat16),
            torch.randn(LN_D, device="cuda", dtype=torch.bfloat16))


CASES = {
    "rms_norm": dict(
        compile=lambda: rms_norm.compile(M=M, N=N, blk_m=1),
        inputs=lambda torch: (torch.randn(M, N, device="cuda"),), reference=_rms,
        rtol=1e-2, atol=1e-2, bytes=2 * M * N * 4),
    "rms_norm_splitk": dict(
        compile=lambda: rms_norm_splitk.compile(M=M, N=N, blk_m=1, blk_k=512),
        inputs=lambda torch: (torch.randn(M, N, device="cuda"),), reference=_rms,
        rtol=1e-2, atol=1e-2, bytes=3 * M * N * 4),
    "layernorm": dict(
        compile=lambda: layernorm_fwd(LN_ROWS, LN_D),
        inputs=_ln_inputs, reference=_layernorm,
        rtol=2e-2, atol=2e-2, bytes=2 * LN_ROWS * LN_D * 2 + 2 * LN_ROWS * 4),
}
