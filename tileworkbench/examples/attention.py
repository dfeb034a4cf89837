"""FlashAttention forward, grouped-query attention and flash decoding in our DSL, written the way a
TileLang user writes them: ``T.gemm`` for Q @ K^T with ``transpose_B``, the online softmax with
``T.reduce_max``, ``T.exp2`` and a running sum, P @ V with P in registers, the output through
shared memory. The attention benchmark (``python -m tileworkbench.bench attention``), the attention
notebook and the tests compile these.

The programs are those of ``examples/tilelang_programs/attention.py`` and ``flash_decoding.py``,
the files TileLang 0.1.15 compiles in the side-by-side runs; tests/bench/test_bench_attention.py
checks that both spellings lower to the same CUDA, byte for byte. What makes them fast is the
compiler's (docs/architecture.md): a producer warpgroup issuing K and V by TMA, consumer
warpgroups running wgmma with P as the register operand, ``setmaxnreg``, the softmax of one tile
beside the previous tile's P @ V, the causal loop cut at the diagonal with the mask computed only
on the diagonal tile and the longest query blocks launched first.

Tensors are (batch, heads, seq, dim), fp16; scores are scaled by 1/sqrt(dim).
"""

# No ``from __future__ import annotations``: the kernels' tensor annotations name the builder's
# locals (shapes, dtypes), which the front end can only see when Python evaluates them.
import tileworkbench.language as T

from ..errors import user_error
from ..target import PassConfigKey

# TileLang's tuned configuration for its own example on the H100/H200 (the baseline).
DEFAULT_CONFIG = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256}
# Ours per head dimension where another is faster, from scripts/experiments/attention_configs.py on
# the H200 (docs/experiments.md, "Attention tile configurations"): with head dim 64 the K and V
# tiles are half as large, and 256 keys a tile halve the iterations (1 x 16 x 8192 x 64: 422 ->
# 473 TFLOP/s).
CONFIGS = {64: {**DEFAULT_CONFIG, "block_N": 256}}
# Causal rows where another is faster still (attention_configs.py on an H100, 2026-12-07, session
# 38): at head dim 64, 192-query tiles over three consumer warpgroups, 128 keys a tile (1 x 16 x
# 8192 x 64 causal: 409.6 -> 436.9 TFLOP/s; non-causal stays at 128 x 256, 466.1 against 437.3).
CAUSAL_CONFIGS = {64: {"block_M": 192, "block_N": 128, "num_stages": 2, "threads": 384}}
# One query a head over a long KV cache: 64-row tiles (the smallest wgmma M) over 128 keys at a
# time; one split per (batch, head) when those alone fill the GPU.
DECODE_CONFIG = {"block_M": 64, "block_N": 128, "num_stages": 2, "threads": 128}
# exp2 and the divisions in fast math, as TileLang's examples compile them.
PASS_CONFIGS = {PassConfigKey.TL_ENABLE_FAST_MATH.value: True}
LOG2E = 1.44269504


def best_config(dim: int, is_causal: bool = False) -> dict:
    """Our configuration for this head dimension, causal or not (TileLang's tuned one where we have
    no better)."""
    if is_causal and dim in CAUSAL_CONFIGS:
        return dict(CAUSAL_CONFIGS[dim])
    return dict(CONFIGS.get(dim, DEFAULT_CONFIG))


def softmax_step(block_M, block_N, dim, scale):
    """One key tile's step of the online softmax, as a ``T.macro`` both kernels inline: S (the
    scores, ``acc_s``) becomes P = exp2(S * scale - the row maxima so far), cast to fp16 for P @ V
    (``acc_s_cast``); the running row sums (``logsum``) and O (``acc_o``), built under the old
    maxima, shrink by exp2(old - new)."""
    accum = T.float32

    @T.macro
    def online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
        T.copy(scores_max, scores_max_prev)
        T.fill(scores_max, -T.infinity(accum))
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

    return online_softmax


def mha_fwd(batch, heads, seq_len, dim, is_causal, block_M=128, block_N=128, num_stages=2, threads=256, groups=1):
    """Q (batch, heads, seq_len, dim), K and V (batch, heads // groups, seq_len, dim) -> O like Q,
    O's the fourth parameter (compile with ``out_idx=[3]``). ``groups > 1``: grouped-query
    attention, ``groups`` query heads sharing each K/V head."""
    if groups < 1 or heads % groups:
        raise user_error(f"groups={groups} must divide heads={heads} (each KV head serves `groups` query heads)")
    scale = (1.0 / dim) ** 0.5 * LOG2E  # softmax in base 2: exp(x / sqrt(d)) = exp2(x * scale)
    q_shape = [batch, heads, seq_len, dim]
    kv_shape = [batch, heads // groups, seq_len, dim]
    dtype = T.float16
    accum = T.float32
    online_softmax = softmax_step(block_M, block_N, dim, scale)

    @T.prim_func
    def main(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        Output: T.Tensor(q_shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, by, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))

            # a causal block stops at the diagonal: no key tile past its last query
            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal else T.ceildiv(seq_len, block_N)
            )

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, by // groups, k * block_N : (k + 1) * block_N, :], K_shared)
                # S starts at 0 where the query may see the key, -inf where it may not
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(acc_s.dtype), 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                T.copy(V[bz, by // groups, k * block_N : (k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * block_M : (bx + 1) * block_M, :])

    return main


def gqa_fwd(batch, heads, kv_heads, seq_len, dim, is_causal, **config):
    """Grouped-query attention: ``heads`` query heads over ``kv_heads`` K/V heads, at our
    configuration for the head dimension unless ``config`` says otherwise."""
    if kv_heads < 1 or heads % kv_heads:
        raise user_error(f"kv_heads={kv_heads} must divide heads={heads}")
    return mha_fwd(batch, heads, seq_len, dim, is_causal, groups=heads // kv_heads,
                   **{**best_config(dim, is_causal), **config})


def flash_decode(batch, heads, seqlen_q, seqlen_kv, dim, num_split=1, block_M=64, block_N=128, num_stages=2,
                 threads=128):
    """Split-KV decoding: block (query tile, batch x head, split) attends over ``seqlen_kv /
    num_split`` keys and writes its partial output and log2-sum-exp to global workspaces; a second
    kernel in the same prim_func weighs the splits together. ``seqlen_kv`` a multiple of
    ``num_split * block_N``."""
    if seqlen_kv % (num_split * block_N):
        raise user_error(f"seqlen_kv={seqlen_kv} must be a multiple of num_split * block_N = {num_split * block_N}")
    scale = (1.0 / dim) ** 0.5 * LOG2E
    q_shape = [batch, heads, seqlen_q, dim]
    kv_shape = [batch, heads, seqlen_kv, dim]
    dtype = T.float16
    accum = T.float32
    split_len = seqlen_kv // num_split
    online_softmax = softmax_step(block_M, block_N, dim, scale)

    @T.prim_func
    def main(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        Output: T.Tensor(q_shape, dtype),
    ):
        glse = T.alloc_global([batch, heads, num_split, seqlen_q], accum)
        Output_partial = T.alloc_global([batch, heads, num_split, seqlen_q, dim], accum)

        with T.Kernel(T.ceildiv(seqlen_q, block_M), heads * batch, num_split, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)

            hid = by % heads
            bid = by // heads
            sid = bz

            T.copy(Q[bid, hid, bx * block_M : (bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))

            for k in T.Pipelined(T.ceildiv(split_len, block_N), num_stages=num_stages):
                T.copy(K[bid, hid, split_len * sid + k * block_N : split_len * sid + (k + 1) * block_N, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                online_softmax(acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                T.copy(V[bid, hid, split_len * sid + k * block_N : split_len * sid + (k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(block_M):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale  # this split's log2-sum-exp
            T.copy(logsum, glse[bid, hid, sid, bx * block_M : (bx + 1) * block_M])
            T.copy(acc_o, Output_partial[bid, hid, sid, bx * block_M : (bx + 1) * block_M, :])

        # the combine: each split's output weighted by exp2(its lse - the total lse)
        with T.Kernel(T.ceildiv(seqlen_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            po_local = T.alloc_fragment([block_M, dim], accum)
            o_accum_local = T.alloc_fragment([block_M, dim], accum)
            lse_split = T.alloc_fragment([block_M], accum)
            lse_max = T.alloc_fragment([block_M], accum)
            lse_total = T.alloc_fragment([block_M], accum)
            scale_local = T.alloc_fragment([block_M], accum)

            T.clear(o_accum_local)
            T.clear(lse_total)
            T.fill(lse_max, -T.infinity(accum))
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
