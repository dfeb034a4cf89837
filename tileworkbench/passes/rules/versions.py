"""Accesses of a pipelined loop's tiles on one stage's version of them (``ir.Buffer.versioned``:
a leading dimension of ``stages`` copies), as ``inject_software_pipeline`` and ``warp_specialize``
rewrite a loop body."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import IRMutator


class OnVersion(IRMutator):
    """Every region, load and store of a buffer in ``versioned`` (old buffer -> versioned one)
    moved to version ``slot`` of it."""

    def __init__(self, versioned: dict, slot):
        self.versioned, self.slot = versioned, slot

    def visit_Region(self, r: ir.Region):
        r = self.generic_visit(r)
        new = self.versioned.get(r.buffer)
        return r if new is None else r.in_version(new, self.slot)

    def visit_BufferLoad(self, node: ir.BufferLoad):
        node = self.generic_visit(node)
        new = self.versioned.get(node.buffer)
        return node if new is None else ir.BufferLoad(new, (self.slot,) + tuple(node.indices), node.dtype)

    def visit_BufferStore(self, node: ir.BufferStore):
        node = self.generic_visit(node)
        new = self.versioned.get(node.buffer)
        if new is None:
            return node
        return ir.BufferStore(new, (self.slot,) + tuple(node.indices), node.value, loc=node.loc)
