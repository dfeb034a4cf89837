"""Flash decoding: attention of a few queries over a long KV cache, the keys split into
``num_split`` ranges that different blocks take at once (a KV cache of 8192 keys and 128
queries is otherwise only a handful of blocks), then a second kernel that combines the partial
outputs by their log-sum-exps (TileLang's flash-decoding example: two ``T.Kernel`` blocks and
``T.alloc_global`` workspaces in one prim_func; tensors in (batch, heads, seq, dim) order)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit(out_idx=[3], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flash_decoding(batch, heads, seqlen_q, seqlen_kv, dim, num_split=4, block_M=64, block_N=128, num_stages=2,
                   threads=128):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(dim), and log2(e) for exp2
    shape_q = [batch, heads, seqlen_q, dim]
    shape_kv = [batch, heads, seqlen_kv, dim]
    dtype = T.float16
    accum_dtype = T.float32
    split_len = seqlen_kv // num_split  # keys per split (seqlen_kv a multiple of num_split * block_N)

    @T.prim_func
    def main(
        Q: T.Tensor(shape_q, dtype),
        K: T.Tensor(shape_kv, dtype),
        V: T.Tensor(shape_kv, dtype),
        Output: T.Tensor(shape_q, dtype),
    ):
        glse = T.alloc_global([batch, heads, num_split, seqlen_q], accum_dtype)
        Output_partial = T.alloc_global([batch, heads, num_split, seqlen_q, dim], accum_dtype)

        # each block: block_M queries of one head over one split of the keys
        with T.Kernel(T.ceildiv(seqlen_q, block_M), heads * batch, num_split, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            hid = by % heads
            bid = by // heads
            sid = bz

            T.copy(Q[bid, hid, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            for k in T.Pipelined(T.ceildiv(split_len, block_N), num_stages=num_stages):
                T.copy(K[bid, hid, split_len * sid + k * block_N : split_len * sid + (k + 1) * block_N, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

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
                T.copy(V[bid, hid, split_len * sid + k * block_N : split_len * sid + (k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale  # this split's log2-sum-exp
            T.copy(logsum, glse[bid, hid, sid, bx * block_M : (bx + 1) * block_M])
            T.copy(acc_o, Output_partial[bid, hid, sid, bx * block_M : (bx + 1) * block_M, :])

        # combine: each split's output weighted by exp2(its lse - the total lse)
        with T.Kernel(T.ceildiv(seqlen_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            po_local = T.alloc_fragment([block_M, dim], accum_dtype)
            o_accum_local = T.alloc_fragment([block_M, dim], accum_dtype)
            lse_split = T.alloc_fragment([block_M], accum_dtype)
            lse_max = T.alloc_fragment([block_M], accum_dtype)
            lse_total = T.alloc_fragment([block_M], accum_dtype)
            scale_local = T.alloc_fragment([block_M], accum_dtype)

            T.clear(o_accum_local)
            T.clear(lse_total)
            T.fill(lse_max, -T.infinity(accum_dtype))
            for k in T.serial(num_split):
                T.copy(glse[bz, by, k, bx * block_M : (bx + 1) * block_M], lse_split)
                for i in T.Parallel(block_M):
                    lse_max[i] = T.max(lse_max[i], lse_split[i])
            for k in T.serial(num_split):
                T.copy(glse[bz, by, k, bx * block_M : (bx + 1) * block_M], lse_split)
                for i in T.Parallel(block_M):
                    lse_total[i] += T.exp2(lse_split[i] - lse_max[i])
            for i in T.Parallel(block_M):
                lse_total[i] = T.log2(lse_total[i]) + lse_max[i]
            for k in T.serial(num_split):
                T.copy(glse[bz, by, k, bx * block_M : (bx + 1) * block_M], lse_split)
                T.copy(Output_partial[bz, by, k, bx * block_M : (bx + 1) * block_M, :], po_local)
                for i in T.Parallel(block_M):
                    scale_local[i] = T.exp2(lse_split[i] - lse_total[i])
                for i, j in T.Parallel(block_M, dim):
                    o_accum_local[i, j] += po_local[i, j] * scale_local[i]
            T.copy(o_accum_local, Output[bz, by, bx * block_M : (bx + 1) * block_M, :])

    return main


def decoding_reference(q, k, v):
    """Softmax(Q K^T / sqrt(d)) V in float32."""
    q, k, v = q.float(), k.float(), v.float()
    return ((q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5).softmax(dim=-1) @ v


def _case(batch, heads, seqlen_q, seqlen_kv, dim, **config):
    shape_q, shape_kv = (batch, heads, seqlen_q, dim), (batch, heads, seqlen_kv, dim)
    return dict(
        compile=lambda: flash_decoding(batch, heads, seqlen_q, seqlen_kv, dim, **config),
        inputs=lambda torch: tuple(torch.randn(s, device="cuda", dtype=torch.float16)
                                   for s in (shape_q, shape_kv, shape_kv)),
        reference=decoding_reference, rtol=1e-2, atol=1e-2,
        flops=4 * batch * heads * seqlen_q * seqlen_kv * dim,
        bytes=2 * batch * heads * seqlen_kv * dim * 2)


CASES = {
    "flash_decoding": _case(1, 32, 128, 8192, 128, num_split=8, block_M=64, block_N=128, num_stages=2, threads=128),
}
