"""DeepSeek's sparse MLA backward (as TileLang's DeepSeek v3.2 example computes it, for one key-value
group): each query token attends to ``topk`` keys of one latent cache ``KV`` (the first ``dim``
columns are the values, all ``dim + tail_dim`` the keys) that an index table picks, keys after the
token masked out. Given the forward's log-sum-exp and ``Delta = rowsum(dO * O)``, per token,

    P  = exp(scale * Q K^T - Lse)            dS = P * (dO V^T - Delta) * scale
    dQ = dS K                                dKV[idx] += dS^T Q  (+ P^T dO in the value columns).

A block per token loops over its keys ``block_size`` at a time: the keys gathered into a shared
tile, five gemms, and each key block's dKV added atomically into global memory, four floats at a
time (``T.atomic_addx4``), staged half a block at a time through a float32 shared tile, read from
the accumulator at shifted rows. (The fine-tuning variant of TileLang's example stages through a
``T.view`` of the key tile instead; TileLang 0.1.15 refuses that view at this program's 256
threads, "different layout for alias buffer", so the two compilers could not share this source.)"""

import tileworkbench as tilelang
import tileworkbench.language as T


def sparse_mla_bwd_program(Q, KV, dO, Indices, Lse, Delta, dKV, heads, dim, tail_dim, topk, block_size=32,
                           threads=256):
    S, SKV = T.const("S, SKV")
    scale = (dim + tail_dim) ** -0.5
    half = block_size // 2
    Q: T.Tensor((S, heads, dim + tail_dim), T.bfloat16)
    KV: T.Tensor((SKV, dim + tail_dim), T.bfloat16)
    dO: T.Tensor((S, heads, dim), T.bfloat16)
    Indices: T.Tensor((S, topk), T.int32)
    Lse: T.Tensor((S, heads), T.float32)
    Delta: T.Tensor((S, heads), T.float32)
    dKV: T.Tensor((SKV, dim + tail_dim), T.float32)
    dQ = T.empty((S, heads, dim + tail_dim), T.bfloat16)

    with T.Kernel(S, threads=threads) as s:
        q_shared = T.alloc_shared((heads, dim), T.bfloat16)
        q_tail_shared = T.alloc_shared((heads, tail_dim), T.bfloat16)
        kv_shared = T.alloc_shared((block_size, dim), T.bfloat16)
        kv_tail_shared = T.alloc_shared((block_size, tail_dim), T.bfloat16)
        do_shared = T.alloc_shared((heads, dim), T.bfloat16)
        p_cast = T.alloc_shared((heads, block_size), T.bfloat16)
        ds_cast = T.alloc_shared((heads, block_size), T.bfloat16)
        mask = T.alloc_fragment((block_size,), "bool")
        acc_p = T.alloc_fragment((heads, block_size), T.float32)
        acc_dp = T.alloc_fragment((heads, block_size), T.float32)
        acc_dq = T.alloc_fragment((heads, dim), T.float32)
        acc_dq_tail = T.alloc_fragment((heads, tail_dim), T.float32)
        acc_dkv = T.alloc_fragment((block_size, dim), T.float32)
        acc_dkv_tail = T.alloc_fragment((block_size, tail_dim), T.float32)
        dkv_stage = T.alloc_shared((half, dim), T.float32)
        dkv_tail_stage = T.alloc_shared((half, tail_dim), T.float32)

        T.copy(Q[s, :, :dim], q_shared)
        T.copy(Q[s, :, dim:], q_tail_shared)
        T.copy(dO[s, :, :], do_shared)
        T.clear(acc_dq)
        T.clear(acc_dq_tail)
        for k in T.Pipelined(topk // block_size, num_stages=0):
            for j in T.Parallel(block_size):
                mask[j] = Indices[s, k * block_size + j] <= s
            for h, j in T.Parallel(heads, block_size):
                acc_p[h, j] = T.if_then_else(mask[j], 0, -T.infinity(T.float32))
            for j, d in T.Parallel(block_size, dim):
                kv_shared[j, d] = KV[Indices[s, k * block_size + j], d]
            for j, d in T.Parallel(block_size, tail_dim):
                kv_tail_shared[j, d] = KV[Indices[s, k * block_size + j], dim + d]
            T.gemm(q_shared, kv_shared, acc_p, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            T.gemm(q_tail_shared, kv_tail_shared, acc_p, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            for h, j in T.Parallel(heads, block_size):
                acc_p[h, j] = T.exp(acc_p[h, j] * scale - Lse[s, h])
            T.copy(acc_p, p_cast)
            T.gemm(do_shared, kv_shared, acc_dp, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for h, j in T.Parallel(heads, block_size):
                acc_dp[h, j] = acc_p[h, j] * (acc_dp[h, j] - Delta[s, h]) * scale
            T.copy(acc_dp, ds_cast)
            T.gemm(ds_cast, kv_shared, acc_dq, policy=T.GemmWarpPolicy.FullCol)
            T.gemm(ds_cast, kv_tail_shared, acc_dq_tail, policy=T.GemmWarpPolicy.FullCol)
            T.gemm(ds_cast, q_shared, acc_dkv, transpose_A=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            T.gemm(p_cast, do_shared, acc_dkv, transpose_A=True, policy=T.GemmWarpPolicy.FullCol)
            T.gemm(ds_cast, q_tail_shared, acc_dkv_tail, transpose_A=True, clear_accum=True,
                   policy=T.GemmWarpPolicy.FullCol)
            for part in range(2):
                for j, d in T.Parallel(block_size, dim):
                    if j < half:
                        dkv_stage[j, d] = acc_dkv[j + part * half, d]
                for j, d in T.Parallel(block_size, tail_dim):
                    if j < half:
                        dkv_tail_stage[j, d] = acc_dkv_tail[j + part * half, d]
                for j, d in T.Parallel(half, dim // 4):
                    T.atomic_addx4(dKV[Indices[s, k * block_size + part * half + j], d * 4], dkv_stage[j, d * 4])
                for j, d in T.Parallel(half, tail_dim // 4):
                    T.atomic_addx4(dKV[Indices[s, k * block_size + part * half + j], dim + d * 4],
                                   dkv_tail_stage[j, d * 4])
        T.copy(acc_dq, dQ[s, :, :dim])
        T.copy(acc_dq_tail, dQ[s, :, dim:])

    return dQ


sparse_mla_bwd = tilelang.jit(sparse_mla_bwd_program)


def reference(q, kv, do, indices, lse, delta, dkv):
    """(dQ, dKV) in float32, token by token; dKV from zero (the kernel adds into the zeroed ``dkv``).
    P and dS are rounded to bfloat16 before the products, as the program (and TileLang's) stages
    them in bfloat16 tiles for its gemms: against float32 P and dS, dKV's sums over 2048 tokens
    differed by up to 0.1 (of values up to 67) from that rounding alone; against rounded ones,
    0.004 (H100, session 34)."""
    dim = do.shape[-1]
    scale = q.shape[-1] ** -0.5
    q, kv, do = q.float(), kv.float(), do.float()
    dq, dkv_want = q.new_zeros(q.shape), kv.new_zeros(kv.shape)
    for s in range(q.shape[0]):
        idx = indices[s].long()
        keys = kv[idx]
        p = (q[s] @ keys.T * scale - lse[s][:, None]).exp() * (idx <= s).float()
        ds = p * (do[s] @ keys[:, :dim].T - delta[s][:, None]) * scale
        p, ds = p.bfloat16().float(), ds.bfloat16().float()
        dq[s] = ds @ keys
        grad = ds.T @ q[s]
        grad[:, :dim] += p.T @ do[s]
        dkv_want.index_add_(0, idx, grad)
    return dq, dkv_want


def _inputs(torch, s, skv, heads, dim, tail_dim, topk):
    q = torch.randn(s, heads, dim + tail_dim, device="cuda").bfloat16()
    kv = torch.randn(skv, dim + tail_dim, device="cuda").bfloat16()
    do = torch.randn(s, heads, dim, device="cuda").bfloat16()
    indices = torch.stack([torch.randperm(skv, device="cuda")[:topk] for _ in range(s)]).int()
    scores = torch.einsum("shd,skd->shk", q.float(), kv.float()[indices.long()]) * (dim + tail_dim) ** -0.5
    allowed = indices[:, None, :] <= torch.arange(s, device="cuda")[:, None, None]
    lse = scores.masked_fill(~allowed, float("-inf")).logsumexp(-1).nan_to_num(neginf=0.0)
    delta = torch.randn(s, heads, device="cuda")
    dkv = torch.zeros(skv, dim + tail_dim, device="cuda")
    return q, kv, do, indices, lse, delta, dkv


def _case(s, skv, heads=64, dim=512, tail_dim=64, topk=512):
    return dict(
        compile=lambda: sparse_mla_bwd.compile(S=s, SKV=skv, heads=heads, dim=dim, tail_dim=tail_dim, topk=topk),
        inputs=lambda torch: _inputs(torch, s, skv, heads, dim, tail_dim, topk),
        reference=reference, accumulates=True, returns_too=True, rtol=2e-2, atol=5e-2,
        flops=2 * s * topk * heads * (3 * (dim + tail_dim) + 2 * dim))


CASES = {"sparse_mla_bwd": _case(2048, 2048)}
