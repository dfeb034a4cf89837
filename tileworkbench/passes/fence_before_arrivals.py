"""fence_before_arrivals: a thread's generic writes to a tile the async proxy reads are fenced before it arrives on an mbarrier.

Phase: lower (after ``elide_proxy_fences``, before ``plan_shared_memory``: each shared buffer is
still its own bytes).
Expects: lowered IR; mbarrier arrivals as ``Evaluate(Call(".arrive", barrier))`` or
``.arrive_and_expect_tx`` (``lower_tma``).
Guarantees: on every path to an ``.arrive``, a thread that has written through the generic proxy
(a store, or a call writing at a shared address first in its arguments: a vector copy, ``stmatrix``,
a pair store) to a shared tile that a wgmma or TMA call somewhere in the kernel reads has a
``tw::fence_proxy_async()`` between that write and the arrival; one is inserted right before the
arrival where some path lacks it (forwards over the statements, loops to a fixed point, branches
joined). Nothing else changes.
Why: across ``T.ws`` scopes an mbarrier is how one warpgroup hands another a tile; a tile its
threads wrote and the other's wgmma reads must reach the async proxy first. TileLang's FlashMLA
example writes ``SP1_shared`` from registers and arrives with no fence of its own (TileLang's CUDA
happens to fence before the wgmma in between, for its own reasons); ours had none there.
``cp.async`` copies are the waits' to fence (``lower_tma``: an arrival once they land).
"""

from __future__ import annotations

import dataclasses

from ..errors import InternalCompilerError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register
from .rules.proxies import async_access_tiles, fence, is_arrival, is_fence, landed_write_tiles


def _generic_writes(stmt, tiles: set) -> bool:
    """Whether ``stmt`` (a statement holding no other) writes one of ``tiles`` through the generic
    proxy, its writes done when it is."""
    return any(id(buf) in tiles for buf in landed_write_tiles(stmt))


class _Fence:
    """Forwards: ``dirty`` is whether, on some path here, the thread wrote one of ``tiles`` since
    its last fence. ``walk`` returns the statement (fences inserted) and ``dirty`` after it."""

    def __init__(self, tiles: set):
        self.tiles = tiles

    def walk(self, stmt, dirty: bool):
        if isinstance(stmt, ir.SeqStmt):
            out = []
            for s in stmt.stmts:
                if is_arrival(s) and dirty:
                    out.append(fence())
                    dirty = False
                s, dirty = self.walk(s, dirty)
                out.append(s)
            return dataclasses.replace(stmt, stmts=out), dirty
        if is_fence(stmt):
            return stmt, False
        if is_arrival(stmt):  # alone as a body: the fence goes in front of it
            return (ir.seq([fence(), stmt]), False) if dirty else (stmt, False)
        if isinstance(stmt, ir.IfThenElse):
            then, after_then = self.walk(stmt.then_body, dirty)
            other, after_other = self.walk(stmt.else_body, dirty) if stmt.else_body is not None else (None, dirty)
            return dataclasses.replace(stmt, then_body=then, else_body=other), after_then or after_other
        if isinstance(stmt, (ir.For, ir.While)):
            entry = dirty
            while True:  # the body's entry: before the loop, or after any iteration
                _, end = self.walk(stmt.body, entry)
                if (entry or end) == entry:
                    break
                entry = entry or end
            body, end = self.walk(stmt.body, entry)
            return dataclasses.replace(stmt, body=body), entry or end
        if isinstance(stmt, ir.ThreadScope):
            body, end = self.walk(stmt.body, dirty)
            return dataclasses.replace(stmt, body=body), end
        if isinstance(stmt, ir.WarpSpecialize):  # each thread runs one of the two
            producer, after_producer = self.walk(stmt.producer, dirty)
            consumer, after_consumer = self.walk(stmt.consumer, dirty)
            return dataclasses.replace(stmt, producer=producer, consumer=consumer), after_producer or after_consumer
        if len(collect(stmt, ir.Stmt)) > 1:  # holds statements this walk does not know how to order
            raise InternalCompilerError(f"internal: fence_before_arrivals cannot walk into {type(stmt).__name__}")
        return stmt, dirty or _generic_writes(stmt, self.tiles)


@register("fence_before_arrivals", "lower")
def fence_before_arrivals(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    tiles = {id(buf) for buf in async_access_tiles(func.body)}
    if not tiles or not any(is_arrival(s) for s in collect(func.body, ir.Evaluate)):
        return func
    body, _ = _Fence(tiles).walk(func.body, False)
    return func.with_body(body)
