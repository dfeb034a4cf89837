"""Which thread blocks the barrier simulation walks.

Barriers live in one block, so one block's walk checks the protocol of every block that makes the
same barrier operations in the same order. A block makes others when what the walk decides by
reads the block's index: a loop's bounds (causal attention's query block ``bx`` runs ``bx + 1``
key tiles), a branch's condition (a guard on the grid's last, partial tile), a barrier slot, a
parity, a byte count. :func:`block_indices_read` follows the block indices through the kernel's
scalars and local buffers (a value computed from one, or under a loop or branch that reads one)
and says which of them such decisions read; :func:`walked_blocks` adds the grid's corners along
those, each at its first and at its last value: the blocks at both ends of a trip
count or a guard that grows or shrinks with the index. A block in between whose protocol differs
from every corner's is not walked.

A persistent kernel's blocks walk tiles whose coordinates the tile loop sets: its one simulated
block walks the tiles (``schedule``), so it has no corners here.
"""

from __future__ import annotations

import itertools

from ..ir import nodes as ir
from ..ir.visitor import IRVisitor
from . import program
from .evaluate import Unknown, as_int, evaluate
from .protocol import TMA_LOAD, barrier_call


def block_indices_read(func: ir.PrimFunc, walked: set) -> list:
    """The block indices (of ``func.launch.block_vars``) that a decision of the walk over the
    statements whose ids are in ``walked`` (the simulation's ``relevant`` set) reads, directly or
    through values computed from them."""
    decisions = [e for stmt in program.preorder(func.body) if id(stmt) in walked for e in _decided_by(stmt)]
    read = []
    for var in func.launch.block_vars:
        tainted = _tainted(func, var)
        if any(_reads(e, tainted) for e in decisions):
            read.append(var)
    return read


def walked_blocks(func: ir.PrimFunc, env: dict, walked: set) -> list:
    """The blocks to simulate, block (0, 0, 0) first: it alone, or with the grid's corners along
    the indices :func:`block_indices_read` finds. ``env`` binds what the grid's extents may read (a
    call's sizes)."""
    launch = func.launch
    origin = tuple(0 for _ in launch.block_vars)
    read = block_indices_read(func, walked) if launch.block_vars and not launch.persistent_tiles else []
    ends = []
    for var, extent in zip(launch.block_vars, launch.grid):
        last = 0
        if var in read:
            try:
                last = max(as_int(evaluate(extent, env)) - 1, 0)
            except Unknown:
                pass
        ends.append(sorted({0, last}))
    return [origin] + [c for c in itertools.product(*ends) if c != origin]


def _decided_by(stmt) -> list:
    """The expressions the walk decides by at ``stmt``."""
    if isinstance(stmt, ir.For):
        return [stmt.start, stmt.extent]
    if isinstance(stmt, (ir.IfThenElse, ir.While)):
        return [stmt.cond]
    call = barrier_call(stmt)
    if call is None:
        return []
    refs = [a for a in call.args if isinstance(a, ir.BarrierRef)]
    if call.name == TMA_LOAD:  # its coordinates read the block index; only its slot decides
        return [r.index for r in refs]
    return [r.index for r in refs] + list(call.args[1:])


def _tainted(func: ir.PrimFunc, source: ir.Var) -> set:
    """``source`` (a block index), and every scalar and local buffer (by name) whose value may
    depend on it: assigned from an expression that reads it, or under a loop or branch that does."""
    tainted = {source}
    while True:
        before = len(tainted)
        _spread(func.body, tainted, under=False)
        if len(tainted) == before:
            return tainted


def _spread(stmt, tainted: set, under: bool):
    """One pass over ``stmt``: taints what it writes when its value (or ``under``: the control
    around it) reads a tainted name."""
    if stmt is None:
        return
    if isinstance(stmt, (ir.LetStmt, ir.Assign)):
        if under or _reads(stmt.value, tainted):
            tainted.add(stmt.var)
    elif isinstance(stmt, ir.BufferStore):
        if under or _reads(stmt.value, tainted) or any(_reads(i, tainted) for i in stmt.indices):
            tainted.add(stmt.buffer.name)
    elif isinstance(stmt, ir.For):
        inner = under or _reads(stmt.start, tainted) or _reads(stmt.extent, tainted)
        _spread(stmt.body, tainted, inner)
        return
    elif isinstance(stmt, (ir.IfThenElse, ir.While)):
        inner = under or _reads(stmt.cond, tainted)
        for child in program.children(stmt):
            _spread(child, tainted, inner)
        return
    for child in program.children(stmt):
        _spread(child, tainted, under)


def _reads(expr, tainted: set) -> bool:
    """Whether ``expr``'s value may depend on a tainted name. A load from global memory does not
    count: the simulation cannot evaluate it in any block (block-sparse GEMM's mask), so it walks
    every block the same way whatever index the load reads."""
    reader = _TaintedRead(tainted)
    reader.visit(expr)
    return reader.found


class _TaintedRead(IRVisitor):
    def __init__(self, tainted: set):
        self.tainted, self.found = tainted, False

    def visit_Var(self, var):
        self.found = self.found or var in self.tainted

    def visit_BufferLoad(self, load):
        if load.buffer.scope == "global":
            return
        self.found = self.found or load.buffer.name in self.tainted
        self.generic_visit(load)

