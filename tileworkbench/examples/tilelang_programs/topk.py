"""Top-k along rows, the way TileLang's top-k example does it for mixture-of-experts gating: each
block holds ``blk_m`` rows of the logits in registers and peels off the largest entry ``topk`` times
(a row max, the column where it sits as a max over a column-index tile, then that entry masked out).
Two outputs: the values and their int32 column indices, largest first."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def top_k_rows(logits, topk, blk_m, threads=128):
    M, N = T.const("M, N")
    dtype = T.float32

    logits: T.Tensor([M, N], dtype)
    values = T.empty([M, topk], dtype)
    indices = T.empty([M, topk], T.int32)

    with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
        rows = T.alloc_fragment([blk_m, N], dtype)
        row_max = T.alloc_fragment([blk_m], dtype)
        where = T.alloc_fragment([blk_m, N], T.int32)
        arg_max = T.alloc_fragment([blk_m], T.int32)

        T.copy(logits[bx * blk_m, 0], rows)
        for k in T.serial(topk):
            T.reduce_max(rows, row_max, dim=1, clear=True)
            # the column of the maximum: its index where the row holds it, -1 elsewhere
            for i, j in T.Parallel(blk_m, N):
                where[i, j] = T.if_then_else(rows[i, j] == row_max[i], j, -1)
            T.reduce_max(where, arg_max, dim=1, clear=True)
            # take it out of the running so the next round finds the next largest
            for i, j in T.Parallel(blk_m, N):
                rows[i, j] = T.if_then_else(rows[i, j] == row_max[i], -10000.0, rows[i, j])
            for i in T.Parallel(blk_m):
                values[bx * blk_m + i, k] = row_max[i]
                indices[bx * blk_m + i, k] = arg_max[i]

    return values, indices


def _reference(logits, topk):
    values, indices = logits.topk(topk, dim=1)
    return values, indices.int()


def _distinct_logits(torch, rows, cols):
    """Random logits in [0, 1) with no tie in a row: a tie within the top k is taken out in one round
    (by this kernel and TileLang's alike), which ``torch.topk`` keeps twice. Plain ``torch.rand``
    rows of 128 tie in the top 6 for about a third of 8192-row draws."""
    ranks = torch.argsort(torch.rand(rows, cols, device="cuda"), dim=1).float()
    return (ranks + torch.rand(rows, cols, device="cuda") * 0.5) / cols


TOKENS, EXPERTS, TOP = 8192, 128, 6

CASES = {
    "topk": dict(
        compile=lambda: top_k_rows.compile(M=TOKENS, N=EXPERTS, topk=TOP, blk_m=64),
        inputs=lambda torch: (_distinct_logits(torch, TOKENS, EXPERTS),),
        reference=lambda x: _reference(x, TOP),
        rtol=0, atol=0, bytes=TOKENS * EXPERTS * 4 + TOKENS * TOP * 8),
}
