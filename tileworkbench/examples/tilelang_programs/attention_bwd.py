"""FlashAttention backward (TileLang's MHA backward example, BHSD layout), given O and the
log2-domain log-sum-exp of each query row that the example's forward keeps (the forward is the
attention family's; the cases here compute both with torch): Delta = rowsum(O * dO), then for each block
of keys dK and dV over all query blocks, adding each block's part of dQ into a float32 dQ with
atomic adds, and casts dQ to half at the end. dQ is laid out in 8 x 8 pieces (``T.annotate_layout``
with a ``T.Layout`` on the global tensor, as TileLang's example has it), so that the atomic adds of
a fragment's rows land side by side; the post-processing kernel reads it back through the same
layout."""

import numpy as np

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit(
    out_idx=[2],
    pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    },
)
def flashattn_bwd_preprocess(batch, heads, seq_len, dim):
    dtype = T.float16
    accum_dtype = T.float32
    shape = [batch, heads, seq_len, dim]
    blk = 32

    @T.prim_func
    def flash_bwd_prep(
        O: T.Tensor(shape, dtype),  # type: ignore
        dO: T.Tensor(shape, dtype),  # type: ignore
        Delta: T.Tensor([batch, heads, seq_len], accum_dtype),  # type: ignore
    ):
        with T.Kernel(heads, T.ceildiv(seq_len, blk), batch) as (bx, by, bz):
            o = T.alloc_fragment([blk, blk], dtype)
            do = T.alloc_fragment([blk, blk], dtype)
            acc = T.alloc_fragment([blk, blk], accum_dtype)
            delta = T.alloc_fragment([blk], accum_dtype)
            T.clear(acc)
            for k in range(T.ceildiv(dim, blk)):
                T.copy(O[bz, bx, by * blk : (by + 1) * blk, k * blk : (k + 1) * blk], o)
                T.copy(dO[bz, bx, by * blk : (by + 1) * blk, k * blk : (k + 1) * blk], do)
                for i, j in T.Parallel(blk, blk):
                    acc[i, j] += o[i, j] * do[i, j]
            T.reduce_sum(acc, delta, 1)
            T.copy(delta, Delta[bz, bx, by * blk : (by + 1) * blk])

    return flash_bwd_prep


def dq_in_8x8_pieces(dQ):
    """dQ's elements in 8 x 8 pieces, each piece's 64 floats in the order a warp's lanes hold an
    8 x 8 block of a gemm fragment (two neighbouring columns a lane), so that a warp's atomic adds
    of one block fall on neighbouring addresses."""
    return T.Layout(dQ.shape, lambda b, h, row, col: [b, h, row // 8, col // 8, col % 2, 4 * (row % 8) + (col % 8) // 2])


@tilelang.jit(
    out_idx=[1],
    pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    },
)
def flashattn_bwd_postprocess(batch, heads, seq_len, dim):
    dtype = T.float16
    accum_dtype = T.float32
    shape = [batch, heads, seq_len, dim]
    blk = 64

    @T.prim_func
    def flash_bwd_post(
        dQ: T.Tensor(shape, accum_dtype),  # type: ignore
        dQ_out: T.Tensor(shape, dtype),  # type: ignore
    ):
        with T.Kernel(T.ceildiv(seq_len, blk), heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: dq_in_8x8_pieces(dQ)})
            T.copy(
                dQ[bz, by, bx * blk : (bx + 1) * blk, :],
                dQ_out[bz, by, bx * blk : (bx + 1) * blk, :],
            )

    return flash_bwd_post


@tilelang.jit(
    pass_configs={
        tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True,
    }
)
def flashattn_bwd(batch, heads, seq_len, dim, is_causal, block_M, block_N):
    sm_scale = (1.0 / dim) ** 0.5
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    shape = [batch, heads, seq_len, dim]
    dtype = T.float16
    accum_dtype = T.float32

    @T.prim_func
    def flash_bwd(
        Q: T.Tensor(shape, dtype),  # type: ignore
        K: T.Tensor(shape, dtype),  # type: ignore
        V: T.Tensor(shape, dtype),  # type: ignore
        dO: T.Tensor(shape, dtype),  # type: ignore
        lse: T.Tensor([batch, heads, seq_len], accum_dtype),  # type: ignore
        Delta: T.Tensor([batch, heads, seq_len], accum_dtype),  # type: ignore
        dQ: T.Tensor(shape, accum_dtype),  # type: ignore
        dK: T.Tensor(shape, dtype),  # type: ignore
        dV: T.Tensor(shape, dtype),  # type: ignore
    ):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch, threads=128) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            # should not store K to local if dim is large
            # K_local = T.alloc_fragment([block_M, dim], dtype)
            # K_local_T = T.alloc_fragment([block_M, dim], dtype)
            # V_local = T.alloc_fragment([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)
            dv_shared = T.alloc_shared([block_M, dim], dtype)
            dk_shared = T.alloc_shared([block_M, dim], dtype)

            T.annotate_layout(
                {
                    dQ: dq_in_8x8_pieces(dQ),
                }
            )
            T.copy(K[bz, bx, by * block_M : (by + 1) * block_M, :], K_shared)
            T.copy(V[bz, bx, by * block_M : (by + 1) * block_M, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            loop_st = T.floordiv(by * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_st, loop_ed, num_stages=2):
                T.copy(Q[bz, bx, k * block_N : (k + 1) * block_N, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, bx, k * block_N : (k + 1) * block_N], lse_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(by * block_M + i <= k * block_N + j, qkT[i, j], 0)
                # We don't need to handle OOB positions for non-causal cases,
                # since OOB values won't affect other positions here.
                T.copy(dO[bz, bx, k * block_N : (k + 1) * block_N, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)

                T.copy(Delta[bz, bx, k * block_N : (k + 1) * block_N], delta)

                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)

                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                for i, j in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[bz, bx, k * block_N + i, j], dq[i, j])
            T.copy(dv, dv_shared)
            T.copy(dk, dk_shared)
            T.copy(dv_shared, dV[bz, bx, by * block_M : (by + 1) * block_M, :])
            T.copy(dk_shared, dK[bz, bx, by * block_M : (by + 1) * block_M, :])

    return flash_bwd


class FlashBackward:
    """The example's autograd backward as one call: (Q, K, V, O, lse, dO) -> (dQ, dK, dV)."""

    def __init__(self, batch, heads, seq_len, dim, is_causal, block_M=64, block_N=None):
        block_N = block_N or (64 if dim <= 64 else 32)
        self.prep = flashattn_bwd_preprocess(batch, heads, seq_len, dim)
        self.post = flashattn_bwd_postprocess(batch, heads, seq_len, dim)
        self.bwd = flashattn_bwd(batch, heads, seq_len, dim, is_causal, block_M, block_N)
        self.kernels = (self.prep, self.bwd, self.post)  # in the order a call launches them

    def __call__(self, q, k, v, o, lse, do):
        delta = self.prep(o, do)
        if isinstance(q, np.ndarray):  # the CPU interpreter's arrays
            dq, dk, dv = np.zeros(q.shape, np.float32), np.empty_like(q), np.empty_like(q)
        else:
            import torch
            dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
            dk, dv = torch.empty_like(q), torch.empty_like(q)
        self.bwd(q, k, v, do, lse, delta, dq, dk, dv)
        return self.post(dq), dk, dv


def _scores(q, k, is_causal):
    s = (q.float() @ k.float().transpose(-1, -2)) * q.shape[-1] ** -0.5
    if is_causal:
        n = q.shape[2]
        s = s.masked_fill(~q.new_ones(n, n, dtype=bool).tril(), float("-inf"))
    return s


def _forward(torch, q, k, v, is_causal):
    """O (half) and the log2-domain log-sum-exp the forward kernel keeps, in float32."""
    s = _scores(q, k, is_causal)
    lse = torch.logsumexp(s, dim=-1) / 0.6931471805599453
    return (s.softmax(-1) @ v.float()).half(), lse


def _gradients(q, k, v, o, lse, do, is_causal):
    """dQ, dK, dV of softmax attention by torch's autograd, in float32."""
    import torch
    q32, k32, v32 = (x.float().requires_grad_() for x in (q, k, v))
    out = _scores(q32, k32, is_causal).softmax(-1) @ v32
    return torch.autograd.grad(out, (q32, k32, v32), do.float())


def numpy_gradients(q, k, v, do, is_causal):
    """The kernels' inputs O (half) and log2-domain log-sum-exp (float32), and dQ, dK, dV of softmax
    attention written out in float64 numpy (no torch, no GPU: what the CPU interpreter's tests check)."""
    qf, kf, vf, dof = (np.asarray(x, np.float64) for x in (q, k, v, do))
    n, d = qf.shape[2], qf.shape[3]
    s = qf @ kf.transpose(0, 1, 3, 2) / np.sqrt(d)
    if is_causal:
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(s - m).sum(-1, keepdims=True)))[..., 0]
    p = np.exp(s - lse[..., None])
    o = p @ vf
    dv = p.transpose(0, 1, 3, 2) @ dof
    ds = p * (dof @ vf.transpose(0, 1, 3, 2) - (dof * o).sum(-1, keepdims=True))
    dq, dk = ds @ kf / np.sqrt(d), ds.transpose(0, 1, 3, 2) @ qf / np.sqrt(d)
    return o.astype(np.float16), (lse / np.log(2)).astype(np.float32), dq, dk, dv


def _case(batch, heads, seq_len, dim, is_causal):
    def inputs(torch):
        q, k, v, do = (torch.randn(batch, heads, seq_len, dim, device="cuda", dtype=torch.float16) for _ in range(4))
        o, lse = _forward(torch, q, k, v, is_causal)
        return q, k, v, o, lse, do

    matmuls = 5 * 2.0 * batch * heads * seq_len * seq_len * dim
    return dict(compile=lambda: FlashBackward(batch, heads, seq_len, dim, is_causal), inputs=inputs,
                reference=lambda q, k, v, o, lse, do: _gradients(q, k, v, o, lse, do, is_causal),
                rtol=1e-2, atol=1e-2, flops=matmuls * (0.5 if is_causal else 1))


CASES = {
    "attention_bwd": _case(8, 32, 1024, 64, False),
    "attention_bwd_causal": _case(8, 32, 1024, 64, True),
}
