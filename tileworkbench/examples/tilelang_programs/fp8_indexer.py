"""DeepSeek's lightning indexer (FP8 MQA logits, as TileLang's DeepSeek v3.2 example computes it,
without its per-token key ranges): every key's score for a query token is the sum over the token's
heads of ReLU(q_h . k), each head weighted, times the key's scale,

    Logits[s, t] = k_scale[t] * sum_h w[s, h] * max(q[s, h] . k[t], 0).

One FP8 gemm scores a block of keys against the heads of ``block_Q`` tokens at once (a
``(block_N, block_Q * heads)`` accumulator); ``T.reshape`` sees it as ``(block_N, block_Q, heads)``
to weight each head and sum each token's heads (``T.reduce_sum`` along the view's last dimension)."""

import tileworkbench as tilelang
import tileworkbench.language as T


def mqa_logits_program(IndexQ, IndexK, KScale, Weights, heads, index_dim, block_N=256, num_stages=3, threads=512):
    S, SKV = T.const("S, SKV")
    block_Q = 128 // heads
    Weights: T.Tensor((S, heads), T.float32)  # first: S from its shape, before S * heads below
    IndexQ: T.Tensor((S * heads, index_dim), T.float8_e4m3fn)
    IndexK: T.Tensor((SKV, index_dim), T.float8_e4m3fn)
    KScale: T.Tensor((SKV,), T.float32)
    Logits = T.empty((S, SKV), T.float32)

    with T.Kernel(T.ceildiv(S, block_Q), threads=threads) as bx:
        q_shared = T.alloc_shared((block_Q * heads, index_dim), T.float8_e4m3fn)
        k_shared = T.alloc_shared((block_N, index_dim), T.float8_e4m3fn)
        k_scale = T.alloc_fragment((block_N,), T.float32)
        scores = T.alloc_fragment((block_N, block_Q * heads), T.float32)
        per_head = T.reshape(scores, (block_N, block_Q, heads))
        logits = T.alloc_fragment((block_N, block_Q), T.float32)
        w = T.alloc_fragment((block_Q, heads), T.float32)

        T.copy(IndexQ[bx * block_Q * heads, 0], q_shared)
        T.copy(Weights[bx * block_Q, 0], w)
        for t in T.Pipelined(T.ceildiv(SKV, block_N), num_stages=num_stages):
            T.copy(IndexK[t * block_N, 0], k_shared)
            T.copy(KScale[t * block_N], k_scale)
            T.gemm(k_shared, q_shared, scores, transpose_B=True, clear_accum=True,
                   policy=T.GemmWarpPolicy.FullCol)
            for n, q, h in T.Parallel(block_N, block_Q, heads):
                per_head[n, q, h] = T.max(per_head[n, q, h], 0) * w[q, h] * k_scale[n]
            T.reduce_sum(per_head, logits, dim=-1)
            for q, n in T.Parallel(block_Q, block_N):
                Logits[bx * block_Q + q, t * block_N + n] = logits[n, q]

    return Logits


mqa_logits = tilelang.jit(mqa_logits_program)
# The same program with the producer warpgroup switched off in both compilers: TileLang 0.1.15's own
# split hands the key-scale copy (T.copy(KScale[...], k_scale)) to the producer as registers of its
# own, so its consumers read k_scale never written (its output fails the check); without the split
# both compile it as a plain cp.async pipeline.
mqa_logits_no_ws = tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})(
    mqa_logits_program)


S, SKV, HEADS, DIM = 2048, 8192, 32, 64


def _inputs(torch, s=S, skv=SKV, heads=HEADS, dim=DIM):
    fp8 = torch.float8_e4m3fn
    q = torch.randn(s * heads, dim, device="cuda").to(fp8)
    k = torch.randn(skv, dim, device="cuda").to(fp8)
    k_scale = torch.rand(skv, device="cuda") + 0.5
    weights = torch.randn(s, heads, device="cuda")
    return q, k, k_scale, weights


def _reference(q, k, k_scale, weights):
    s, heads = weights.shape
    out = weights.new_empty(s, k.shape[0])
    for first in range(0, s, 256):  # 256 tokens at a time: the scores of every head are large
        rows = q[first * heads:(first + 256) * heads].float()
        scores = (rows @ k.float().T).relu().view(-1, heads, k.shape[0])
        out[first:first + 256] = (scores * weights[first:first + 256, :, None]).sum(1) * k_scale
    return out


CASES = {
    "fp8_indexer_h32_d64": dict(
        compile=lambda: mqa_logits.compile(S=S, SKV=SKV, heads=HEADS, index_dim=DIM),
        # FP8 wgmma accumulates with fewer bits than float32: logits up to ~500 are off by up to ~0.05
        inputs=_inputs, reference=_reference, rtol=1e-3, atol=0.5, flops=2 * S * HEADS * SKV * DIM),
    "fp8_indexer_h32_d64_no_ws": dict(
        compile=lambda: mqa_logits_no_ws.compile(S=S, SKV=SKV, heads=HEADS, index_dim=DIM),
        inputs=_inputs, reference=_reference, rtol=1e-3, atol=0.5, flops=2 * S * HEADS * SKV * DIM),
}
