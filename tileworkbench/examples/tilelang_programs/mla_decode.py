"""Multi-head latent attention decoding (DeepSeek's MLA, as TileLang's MLA decode example has it):
one query token per head over a compressed KV cache shared by every head: each key is a 512-wide
latent vector, which is also its value, plus a 64-wide rotary part. A block takes 64 heads of one
batch row; the cache is walked in tiles of 64 keys with an online softmax, the scores from two
gemms (latent and rotary parts), P @ KV with P copied through shared memory into a fragment. With
``num_split > 1`` the cache is cut into ranges that different blocks take at once, and a second
kernel combines the partial outputs by their log-sum-exps (two ``T.Kernel`` blocks and
``T.alloc_global`` workspaces in one prim_func). On two warpgroups the 64 heads are one 64-row
block that the warpgroups share side by side along N: P reaches the gemm from shared memory
(``passes/stage_fragment_operands``), where TileLang reads it from registers."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit(out_idx=[4], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def mla_decode(batch, heads, seqlen_kv, dim, pe_dim, num_split=1, block_N=64, block_H=64, threads=256):
    scale = (dim + pe_dim) ** -0.5 * 1.44269504  # softmax scale, and log2(e) for exp2
    dtype = T.float16
    accum_dtype = T.float32
    split_len = seqlen_kv // num_split  # keys per split (seqlen_kv a multiple of num_split * block_N)

    @T.prim_func
    def main(
        Q: T.Tensor([batch, heads, dim], dtype),
        Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
        KV: T.Tensor([batch, seqlen_kv, 1, dim], dtype),
        K_pe: T.Tensor([batch, seqlen_kv, 1, pe_dim], dtype),
        Output: T.Tensor([batch, heads, dim], dtype),
    ):
        if num_split > 1:  # the parts' log-sum-exps and outputs, for the combine
            lse_parts = T.alloc_global([batch, heads, num_split], accum_dtype)
            out_parts = T.alloc_global([batch, heads, num_split, dim], accum_dtype)

        # each block: block_H heads of one batch row over one split of the cache
        with T.Kernel(batch, heads // block_H, num_split, threads=threads) as (b, hb, part):
            q_tile = T.alloc_shared([block_H, dim], dtype)
            q_pe_tile = T.alloc_shared([block_H, pe_dim], dtype)
            kv_tile = T.alloc_shared([block_N, dim], dtype)
            k_pe_tile = T.alloc_shared([block_N, pe_dim], dtype)
            p_tile = T.alloc_shared([block_H, block_N], dtype)
            scores = T.alloc_fragment([block_H, block_N], accum_dtype)
            p = T.alloc_fragment([block_H, block_N], dtype)
            acc = T.alloc_fragment([block_H, dim], accum_dtype)
            row_max = T.alloc_fragment([block_H], accum_dtype)
            row_max_before = T.alloc_fragment([block_H], accum_dtype)
            rescale = T.alloc_fragment([block_H], accum_dtype)
            row_sum = T.alloc_fragment([block_H], accum_dtype)
            denominator = T.alloc_fragment([block_H], accum_dtype)

            T.copy(Q[b, hb * block_H : (hb + 1) * block_H, :], q_tile)
            T.copy(Q_pe[b, hb * block_H : (hb + 1) * block_H, :], q_pe_tile)
            T.fill(acc, 0)
            T.fill(denominator, 0)
            T.fill(row_max, -T.infinity(accum_dtype))

            for t in T.Pipelined(T.ceildiv(split_len, block_N), num_stages=2):
                first = part * split_len + t * block_N
                last = part * split_len + (t + 1) * block_N
                T.copy(KV[b, first:last, 0, :], kv_tile)
                T.copy(K_pe[b, first:last, 0, :], k_pe_tile)
                T.clear(scores)
                T.gemm(q_tile, kv_tile, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(q_pe_tile, k_pe_tile, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(row_max, row_max_before)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2(row_max_before[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    scores[i, j] = T.exp2(scores[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(scores, row_sum, dim=1)
                T.copy(scores, p_tile)
                T.copy(p_tile, p)
                for i in T.Parallel(block_H):
                    denominator[i] = denominator[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc[i, j] *= rescale[i]
                T.gemm(p, kv_tile, acc, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(block_H, dim):
                acc[i, j] /= denominator[i]
            if num_split == 1:
                out_tile = T.alloc_shared([block_H, dim], dtype)  # over the cache tiles, dead by now
                T.copy(acc, out_tile)
                T.copy(out_tile, Output[b, hb * block_H : (hb + 1) * block_H, :])
            else:
                for i in T.Parallel(block_H):
                    denominator[i] = T.log2(denominator[i]) + row_max[i] * scale
                T.copy(denominator, lse_parts[b, hb * block_H : (hb + 1) * block_H, part])
                T.copy(acc, out_parts[b, hb * block_H : (hb + 1) * block_H, part, :])

        if num_split > 1:
            # each block: one head of one batch row, its parts weighted by their share of the sum
            with T.Kernel(heads, batch, threads=128) as (h, b):
                part_out = T.alloc_fragment([dim], accum_dtype)
                total = T.alloc_fragment([dim], accum_dtype)
                lse_max = T.alloc_var(accum_dtype)
                lse_total = T.alloc_var(accum_dtype)
                weight = T.alloc_var(accum_dtype)
                T.clear(total)
                T.clear(lse_total)
                lse_max = -T.infinity(accum_dtype)
                for k in T.serial(num_split):
                    lse_max = T.max(lse_max, lse_parts[b, h, k])
                for k in T.serial(num_split):
                    lse_total += T.exp2(lse_parts[b, h, k] - lse_max)
                lse_total = T.log2(lse_total) + lse_max
                for k in T.serial(num_split):
                    for i in T.Parallel(dim):
                        part_out[i] = out_parts[b, h, k, i]
                    weight = T.exp2(lse_parts[b, h, k] - lse_total)
                    for i in T.Parallel(dim):
                        total[i] += part_out[i] * weight
                for i in T.Parallel(dim):
                    Output[b, h, i] = total[i]

    return main


def mla_reference(q, q_pe, kv, k_pe):
    """softmax([Q, Q_pe] [KV, K_pe]^T / sqrt(dim + pe_dim)) KV in float32, every head on the one
    latent cache."""
    q, q_pe, kv, k_pe = q.float(), q_pe.float(), kv[:, :, 0].float(), k_pe[:, :, 0].float()
    scores = (q @ kv.transpose(-1, -2) + q_pe @ k_pe.transpose(-1, -2)) / (q.shape[-1] + q_pe.shape[-1]) ** 0.5
    return scores.softmax(dim=-1) @ kv


def _case(batch, heads, seqlen_kv, dim=512, pe_dim=64, **config):
    shapes = ((batch, heads, dim), (batch, heads, pe_dim), (batch, seqlen_kv, 1, dim), (batch, seqlen_kv, 1, pe_dim))
    return dict(
        compile=lambda: mla_decode(batch, heads, seqlen_kv, dim, pe_dim, **config),
        inputs=lambda torch: tuple(torch.randn(s, device="cuda", dtype=torch.float16) for s in shapes),
        reference=mla_reference, rtol=1e-2, atol=1e-2,
        flops=2 * batch * heads * seqlen_kv * (2 * dim + pe_dim),
        bytes=2 * batch * seqlen_kv * (dim + pe_dim))


CASES = {
    "mla_decode": _case(64, 128, 8192),
    "mla_decode_split": _case(16, 128, 8192, num_split=4),
}
