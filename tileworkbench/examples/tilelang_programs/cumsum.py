"""Running sums and maxima along a tile (``T.cumsum``, ``T.cummax``): the chunk-local cumulative sum
of a gated linear-attention model's log-gates (each chunk of the sequence summed from its start, or
from its end, head by head), and the running maximum along rows held in a fragment."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def chunk_local_cumsum(G, chunk_size=64, block_H=32, reverse=False, threads=128):
    B, S, H = T.const("B, S, H")

    G: T.Tensor((B, S, H), T.float32)
    O = T.empty((B, S, H), T.float32)

    with T.Kernel(T.ceildiv(H, block_H), T.ceildiv(S, chunk_size), B, threads=threads) as (bh, bc, bb):
        G_shared = T.alloc_shared((chunk_size, block_H), T.float32)
        T.copy(G[bb, bc * chunk_size:(bc + 1) * chunk_size, bh * block_H:(bh + 1) * block_H], G_shared)
        T.cumsum(G_shared, dim=0, reverse=reverse)
        T.copy(G_shared, O[bb, bc * chunk_size:(bc + 1) * chunk_size, bh * block_H:(bh + 1) * block_H])

    return O


@tilelang.jit
def row_cummax(X, block_M=4, threads=128, dtype=T.float16):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        x = T.alloc_fragment((block_M, N), dtype)
        T.copy(X[bx * block_M:(bx + 1) * block_M, 0:N], x)
        T.cummax(x, dim=1)
        T.copy(x, Y[bx * block_M:(bx + 1) * block_M, 0:N])

    return Y


def chunk_local_reference(g, chunk_size=64, reverse=False):
    """The cumulative sum within each chunk of ``chunk_size`` steps along dimension 1 (torch or numpy)."""
    b, s, h = g.shape
    chunks = g.reshape(b, s // chunk_size, chunk_size, h)
    if reverse:
        chunks = chunks.flip(2) if hasattr(chunks, "flip") else chunks[:, :, ::-1]
    out = chunks.cumsum(2)
    if reverse:
        out = out.flip(2) if hasattr(out, "flip") else out[:, :, ::-1]
    return out.reshape(b, s, h)


B, S, H = 8, 8192, 32
M, N = 8192, 1024

CASES = {
    "chunk_local_cumsum": dict(
        compile=lambda: chunk_local_cumsum.compile(B=B, S=S, H=H),
        inputs=lambda torch: (torch.randn(B, S, H, device="cuda"),),
        reference=lambda g: chunk_local_reference(g.double()),
        rtol=1e-4, atol=1e-4, bytes=2 * B * S * H * 4),
    "chunk_local_cumsum_reverse": dict(
        compile=lambda: chunk_local_cumsum.compile(B=B, S=S, H=H, reverse=True),
        inputs=lambda torch: (torch.randn(B, S, H, device="cuda"),),
        reference=lambda g: chunk_local_reference(g.double(), reverse=True),
        rtol=1e-4, atol=1e-4, bytes=2 * B * S * H * 4),
    "row_cummax": dict(
        compile=lambda: row_cummax.compile(M=M, N=N),
        inputs=lambda torch: (torch.randn(M, N, device="cuda", dtype=torch.float16),),
        reference=lambda x: x.float().cummax(dim=1).values,
        rtol=0, atol=0, bytes=2 * M * N * 2),
}
