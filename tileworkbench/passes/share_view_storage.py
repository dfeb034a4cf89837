"""share_view_storage: a ``T.view`` of a shared tile lies over the tile's bytes, as in TileLang.

Expects: tile-level IR after ``choose_shared_layouts``, checked by ``verify_shared_views`` (no read
through one name of what the other name wrote); views are tiles marked ``ir.SHARED_VIEW``.
Guarantees: a view whose bytes may be the viewed tile's gets ``SharedView.shares_bytes``:
``insert_thread_syncs`` then orders every access through either name against the other's as
accesses of one tile (a barrier between the last read of the key tile and the staging writes over
it, and back), and ``plan_shared_memory`` places the view at the tile's offset. Since no value
passes between the names, the two compute what two tiles would, in the bytes of one: TileLang's
sparse MLA backward stages its float32 dKV rows in its bf16 key tile, 36 KB of 221 less shared
memory, which is L1 for its register spills (docs/experiments.md, session 39).
Only where every access of both is one the sync pass orders by itself: plain loads and stores,
thread copies, fills and gemm operands (no TMA, cp.async or im2col copy, nor a gather a pipeline
issues ahead as cp.async, whose writes land through another proxy or later; no scan, reduction,
atomic or address taken; no gemm left running past its statement), neither tile a pipeline's
versioned one, the view no larger than the tile, and no warp specialisation or ``T.ws`` scope
(whose roles order accesses by mbarriers). Elsewhere a view
keeps bytes of its own, as before.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register

# Statements through which a tile's bytes may be written or read other than by the threads' own
# ordered loads and stores
_UNORDERED = (ir.TmaCopy, ir.ThreadCopy, ir.Im2Col, ir.Reduce, ir.Scan)


def _unordered_tiles(body) -> set:
    """ids of the shared tiles some access the module doc excludes touches."""
    out = set()
    for op in collect(body, _UNORDERED):
        out |= {id(b) for b in collect(op, ir.Buffer)}
    for op in collect(body, ir.Copy):
        if op.instruction == "tma":
            out |= {id(op.src.buffer), id(op.dst.buffer)}
    for loop in collect(body, ir.For):  # a gather a software pipeline issues ahead lands as cp.async
        if loop.annotations.get(ir.ASYNC_COPY):
            out |= {id(st.buffer) for st in collect(loop, ir.BufferStore)}
    for gemm in collect(body, ir.Gemm):
        if gemm.in_flight != 0:  # a group left running: its reads outlast the statement
            out |= {id(r.buffer) for r in (gemm.a, gemm.b, gemm.c)}
    for call in collect(body, ir.Call):  # an atomic's target, an address taken (not a value read)
        if call.name in ir.ATOMIC_UPDATES:
            out.add(id(call.args[0].args[0].buffer))
        elif call.name == "address_of" and isinstance(call.args[0], ir.BufferLoad):
            out.add(id(call.args[0].buffer))
    return out


@register("share_view_storage", "tile")
def share_view_storage(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    views = [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.attrs.get(ir.SHARED_VIEW) is not None]
    if not views or collect(func.body, (ir.WarpSpecialize, ir.ThreadScope)):
        return func
    unordered = _unordered_tiles(func.body)
    for view in views:
        record = view.attrs[ir.SHARED_VIEW]
        tile = record.source
        if max(view.attrs.get("versions", 1), tile.attrs.get("versions", 1)) > 1:
            continue  # a pipeline's versioned tile: its stages are written ahead of their readers
        if id(view) in unordered or id(tile) in unordered or view.dtype.bytes_for(view.numel) > \
                tile.dtype.bytes_for(tile.numel):
            continue
        view.attrs[ir.SHARED_VIEW] = dataclasses.replace(record, shares_bytes=True)
    return func
