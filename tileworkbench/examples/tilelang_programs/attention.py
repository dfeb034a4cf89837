"""FlashAttention forward in TileLang's builder style: one block per ``block_M`` queries of one
head, an online softmax over ``block_N`` keys at a time, P kept in registers for P @ V
(TileLang's flash-attention examples, tensors in (batch, heads, seq, dim) order). With
``groups > 1`` it is grouped-query attention: ``groups`` query heads share one K and V head."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit(out_idx=[3], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flash_attention(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1, threads=128,
                    groups=1):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(dim), and log2(e) for exp2
    shape = [batch, heads, seq_len, dim]
    kv_shape = [batch, heads // groups, seq_len, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def main(
        Q: T.Tensor(shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, by, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal else T.ceildiv(seq_len, block_N)
            )

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, by // groups, k * block_N : (k + 1) * block_N, :], K_shared)
                # scores start at 0 where a query may see the key and at -inf where it may not
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(acc_s.dtype), 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                # the running maximum of each row, and how much the old sums shrink under it
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)

                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]

                T.copy(V[bz, by // groups, k * block_N : (k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * block_M : (bx + 1) * block_M, :])

    return main


def attention_reference(q, k, v, is_causal):
    """Softmax(Q K^T / sqrt(d)) V in float32 (K and V repeated for the query heads they serve)."""
    q, k, v = q.float(), k.float(), v.float()
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if is_causal:
        n = q.shape[-2]
        mask = scores.new_ones(n, n, dtype=bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v


def _case(batch, heads, seq_len, dim, is_causal, groups=1, **config):
    q_shape, kv_shape = (batch, heads, seq_len, dim), (batch, heads // groups, seq_len, dim)
    flops = 4 * batch * heads * seq_len * seq_len * dim // (2 if is_causal else 1)
    return dict(
        compile=lambda: flash_attention(batch, heads, seq_len, dim, is_causal, groups=groups, **config),
        inputs=lambda torch: tuple(torch.randn(s, device="cuda", dtype=torch.float16)
                                   for s in (q_shape, kv_shape, kv_shape)),
        reference=lambda q, k, v: attention_reference(q, k, v, is_causal),
        rtol=1e-2, atol=1e-2, flops=flops)


# TileLang's tuned configuration (128 x 128 tiles, 2 stages, 256 threads) and the example's own
# defaults as its main() calls it (1 stage).
CASES = {
    "attention": _case(1, 16, 4096, 128, False, block_M=128, block_N=128, num_stages=2, threads=256),
    "attention_causal": _case(1, 16, 4096, 128, True, block_M=128, block_N=128, num_stages=2, threads=256),
    "attention_1stage": _case(1, 16, 4096, 128, False, block_M=128, block_N=128, num_stages=1, threads=256),
    "attention_gqa": _case(1, 32, 4096, 128, False, groups=8, block_M=128, block_N=128, num_stages=2, threads=256),
}
