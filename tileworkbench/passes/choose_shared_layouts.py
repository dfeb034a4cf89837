"""choose_shared_layouts: decide the swizzle of every shared tile.

Expects: tile-level IR after pipelining (shared buffers may carry a version dimension).
Guarantees: ``buffer.attrs["swizzle"]`` is set (bytes: 0, 32, 64 or 128) on every shared
buffer. Tiles read by ``T.gemm`` and tiles moved by a descriptor TMA get the swizzle their inner
dimension allows (see ``tma_rules.swizzle_for_tile``); all other tiles stay unswizzled, so that
contiguous TMA copies into them can be descriptorless bulk copies. TMA and thread accesses both
use the one layout chosen here.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import collect
from . import tma_rules
from .manager import register


def _tma_pairs(body):
    """(global region, shared buffer) of every TMA copy, explicit or preferred."""
    for op in collect(body, (ir.TmaCopy, ir.Copy)):
        if isinstance(op, ir.Copy) and op.instruction != "tma":
            continue
        src, dst = op.src, op.dst
        if src.buffer.scope == "global" and dst.buffer.scope == "shared":
            yield src, dst.buffer
        elif src.buffer.scope == "shared" and dst.buffer.scope == "global":
            yield dst, src.buffer


@register("choose_shared_layouts", "tile")
def choose_shared_layouts(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    shared = [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.scope == "shared"]
    wanted = set()
    for gemm in collect(func.body, ir.Gemm):
        for r in (gemm.a, gemm.b):
            if r.buffer.scope == "shared":
                wanted.add(id(r.buffer))
    for g_region, buf in _tma_pairs(func.body):
        if not tma_rules.is_contiguous(g_region) or tma_rules.region_bytes(g_region) % 16:
            wanted.add(id(buf))  # a descriptor is needed anyway: give it the fast layout
    for buf in shared:
        buf.attrs["swizzle"] = tma_rules.swizzle_for_tile(buf) if id(buf) in wanted else 0
    return func.with_body(func.body)
