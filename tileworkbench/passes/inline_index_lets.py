"""inline_index_lets: a kernel's names for tile offsets (``m0 = by * block_M``, ``kk = k * block_K``) replaced by their values.

Expects: the IR from the front end.
Guarantees: every ``LetStmt`` whose value is integer arithmetic over the block indices, the
variables of serial and pipelined loops, constants and other such names (no element index of a
``T.Parallel`` loop, no thread index, load or call), and whose name is never re-assigned, is
gone; each use of the name holds the value instead. Every other name stays, so per-element names
such as ``row = by * block_M + i`` keep reading as written in the generated CUDA.

Why: later passes prove tile alignment from the index expressions (a TMA copy into 128-byte
panels needs its column start a multiple of the panel; paired stores need even columns). A name
hides that: with ``n0 = bx * 256`` the B tile's start is just ``n0``, and such a GEMM lost warp
specialisation and TMA (cp.async instead); so did one with ``kk = k * block_K`` in its pipelined
loop, whose body warp specialisation wants to be only copies and gemms. Inlined, the kernel
lowers exactly as if it were written with the expressions.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect, reassigned_vars, substitute
from .manager import register


def _offset_arithmetic(value: ir.Expr, known: set) -> bool:
    """Integer arithmetic (at least one operator) over ``known`` variables and constants only."""
    if value.dtype.is_float or not isinstance(value, ir.BinOp):
        return False
    if collect(value, (ir.BufferLoad, ir.Call, ir.Raw)):
        return False
    return all(v in known for v in collect(value, ir.Var))


class _DropLets(IRMutator):
    """Removes the ``LetStmt``s of the names being inlined."""

    def __init__(self, names):
        self.names = names

    def visit_LetStmt(self, node: ir.LetStmt):
        return ir.seq([]) if node.var in self.names else node


@register("inline_index_lets", "tile")
def inline_index_lets(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    reassigned = reassigned_vars(func.body)
    tile_loops = {f.var for f in collect(func.body, ir.For) if f.kind in ("serial", "pipelined")}
    offsets = (set(func.launch.block_vars) | tile_loops) - reassigned
    values: dict = {}
    for let in collect(func.body, ir.LetStmt):  # program order: a name's value may use earlier names
        if let.var in reassigned or not _offset_arithmetic(let.value, offsets | set(values)):
            continue
        values[let.var] = substitute(let.value, values)
    if not values:
        return func
    return func.with_body(substitute(_DropLets(values).visit(func.body), values))
