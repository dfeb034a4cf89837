"""name_buffers_uniquely: every buffer of the kernel has a name of its own.

Expects: lowered IR, its buffers declared (parameters, ``Allocate``).
Guarantees: no two buffers share a name: a later buffer of a name already taken (the scratch tiles
two reductions or scans of one source each declare, a tile a macro allocates at each call) is
renamed ``name_1``, ``name_2`` ..., the names the code generator gave them when printing. What
knows buffers by name after this pass (the thread-level interpreter's memory, the shared-memory
plan's entries, the barrier and race reports) then tells them apart; before it, two scans of one
tile shared one ``..._scan_totals`` at the thread level and raised a race that the GPU code,
whose two tiles have their own bytes, does not have.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register


@register("name_buffers_uniquely", "lower")
def name_buffers_uniquely(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    buffers = [p for p in func.params if isinstance(p, ir.Buffer)]
    buffers += [a.buffer for a in collect(func.body, ir.Allocate)]
    taken = {b.name for b in buffers} | {v.name for v in collect(func.body, ir.Var)}
    seen: set = set()
    for buf in buffers:
        if buf.name in seen:
            base, n = buf.name, 1
            while f"{base}_{n}" in taken:
                n += 1
            buf.name = f"{base}_{n}"
            taken.add(buf.name)
        seen.add(buf.name)
    return func
