"""The copies each thread issues itself (``ir.ThreadCopy``: TileLang's ``T.ptx_cp_async``) on the
tile-level interpreter.

Each running thread reads its run of the tensor when it issues the copy (zeros past the tensor or
where the predicate is false; a run past the tile writes nothing), as ``cp.async`` reads it; the run
lands in the tile when the thread's ``T.cp_async_barrier_noinc`` arrives (``land``), the earliest
the readers that wait on that barrier may see it. A read of the tile before that sees the old
values, so a consumer that does not wait reads what the GPU could give it too.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .values import evaluate, loaded, stored


class ThreadCopies:
    """``Runner``'s statement for ``ir.ThreadCopy`` (``self.b`` is the block)."""

    def s_ThreadCopy(self, s: ir.ThreadCopy):
        b = self.b
        n = ir.const_int(s.dst.extents[-1])
        threads = b.threads()
        lanes = np.arange(n)

        def indices(region):
            starts = [np.broadcast_to(np.asarray(evaluate(x, b), dtype=np.int64), (threads,)) for x in region.starts]
            return [x[:, None] for x in starts[:-1]] + [starts[-1][:, None] + lanes[None, :]]

        src_idx, dst_idx = indices(s.src), indices(s.dst)
        src = b.array(s.src.buffer)
        read = _inside(src_idx, src.shape)
        if s.predicate is not None:
            read &= np.broadcast_to(np.asarray(evaluate(s.predicate, b), dtype=bool).reshape(-1, 1), read.shape)
        clipped = tuple(np.where(read, i, 0) for i in src_idx)
        values = np.where(read, loaded(src[clipped], s.src.buffer.dtype), 0)
        dst = b.array(s.dst.buffer)
        write = _inside(dst_idx, dst.shape)
        target = tuple(np.broadcast_to(i, write.shape)[write] for i in dst_idx)
        b.thread_copies.append((s.dst.buffer, dst, target, stored(values[write], s.dst.buffer.dtype)))
        return
        yield


def land(block):
    """The copies issued so far land in their tiles (a ``cp_async_barrier_noinc`` arrival)."""
    for buf, array, target, values in block.thread_copies:
        array[target] = values
        if target[0].size:
            block.written(buf, [int(i.min()) for i in target], [int(i.max()) for i in target])
    block.thread_copies = []


def _inside(idx, shape) -> np.ndarray:
    ok = np.ones(np.broadcast_shapes(*[i.shape for i in idx]), dtype=bool)
    for i, size in zip(idx, shape):
        ok &= (i >= 0) & (i < size)
    return ok
