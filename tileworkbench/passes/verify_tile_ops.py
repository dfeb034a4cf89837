"""verify_tile_ops: reject tile operations no later pass can lower, with the kernel line.

Expects: the IR straight from the front end.
Guarantees: the same IR (this pass never changes it); every ``TmaCopy`` has constant extents
and legal dtypes (no store from ``float4_e2m1_unpacked`` shared memory), every ``Copy`` out of
an unpacked FP4 buffer is rejected, every buffer accessed by index has the right rank, no copy
runs between two overlapping regions of one buffer (known from constants); no tile
operation stands inside a ``T.Parallel`` loop (it runs once for the whole block, its threads
sharing the work: inside a loop over elements it would run once per element, each element's
threads racing over the whole tile; the lowering had made ``T.fill(T0, i)`` in a loop over ``i``
two threads storing different values into one element).
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import IRVisitor
from .manager import register

FP4_UNPACK_ONLY = "only supports float4_e2m1_unpacked as an FP4 unpack load"


_USER_NAMES = {ir.Copy: "T.copy", ir.TmaCopy: "T.tma_copy", ir.Im2Col: "T.im2col", ir.Fill: "T.fill",
               ir.Gemm: "T.gemm", ir.Reduce: "T.reduce_*", ir.Scan: "T.cumsum / T.cummax"}


class _Verify(IRVisitor):
    def __init__(self):
        self.parallel = 0  # T.Parallel loops around the statement being visited

    def visit_For(self, node: ir.For):
        inside = node.kind == "parallel"
        self.parallel += inside
        self.generic_visit(node)
        self.parallel -= inside

    def visit(self, node):
        if self.parallel and isinstance(node, ir.TILE_OPS):
            raise CompileError(f"{_USER_NAMES[type(node)]} inside a T.Parallel loop: a tile operation runs once for "
                               "the whole block, its threads sharing the work; put it outside the loop, or write the "
                               "elements in the loop", node.loc)
        return super().visit(node)

    def visit_TmaCopy(self, node: ir.TmaCopy):
        for r in (node.src, node.dst):
            if r.static_extents() is None:
                raise CompileError(f"T.tma_copy needs constant tile extents, {r.buffer.name} has "
                                   f"{[str(e) for e in r.extents]}", node.loc)
        if not node.is_load and node.src.buffer.dtype.name == "float4_e2m1_unpacked":
            raise CompileError(f"T.tma_copy {FP4_UNPACK_ONLY}; {node.src.buffer.name} holds unpacked "
                               "FP4 and cannot be stored to global memory", node.loc)
        if node.is_load and node.dst.buffer.dtype.name == "float4_e2m1_unpacked" and \
                node.src.buffer.dtype.name != "float4_e2m1fn":
            raise CompileError("an unpacked FP4 shared buffer can only be loaded from a "
                               "float4_e2m1fn tensor", node.loc)

    def visit_Copy(self, node: ir.Copy):
        if node.src.buffer is node.dst.buffer and _overlap(node.src, node.dst):
            raise CompileError(f"T.copy within {node.src.buffer.name} between regions that overlap: the threads copy "
                               "the elements in no set order, so what lands is undefined; copy through a tile of "
                               "its own", node.loc)
        if node.src.buffer.dtype.name == "float4_e2m1_unpacked":
            raise CompileError(f"T.copy {FP4_UNPACK_ONLY}; {node.src.buffer.name} cannot be a source",
                               node.loc)
        packed = [r.buffer for r in (node.src, node.dst) if r.buffer.dtype.packed]
        if packed and node.instruction != "tma" and node.src.buffer.dtype != node.dst.buffer.dtype:
            raise CompileError("packed FP4 data can only be copied to a buffer of the same type",
                               node.loc)


def _overlap(a: ir.Region, b: ir.Region) -> bool:
    """Two regions of one buffer known (constant starts and extents) to share elements without being
    the same region (a copy of a region onto itself changes nothing)."""
    spans = []
    for sa, ea, sb, eb in zip(a.starts, a.extents, b.starts, b.extents):
        values = [ir.const_int(x) for x in (sa, ea, sb, eb)]
        if any(v is None for v in values):
            return False
        spans.append(values)
    if all(sa == sb and ea == eb for sa, ea, sb, eb in spans):
        return False
    return all(sa < sb + eb and sb < sa + ea for sa, ea, sb, eb in spans)


@register("verify_tile_ops", "tile")
def verify_tile_ops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    _Verify().visit(func.body)
    return func
