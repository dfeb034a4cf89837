"""resolve_int_arithmetic: each integer operation's width and C meaning, and how each loop is written.

Phase: codegen, after ``linearize_accesses``.
Expects: accesses flat, let values simplified (``linearize_accesses``).
Guarantees, deciding by the ranges known where each expression is computed
(``rules.codegen_ranges``), so that the code generator only spells out what the IR says:
  * an integer ``+ - * // % <<`` whose value may leave the int32 range is typed ``int64``
    (``rules.int_width``; of unknown range: 64-bit only inside a wide tensor's offset, which
    ``linearize_accesses`` typed already), and a scalar declared with such a value is an
    ``int64`` variable (renamed through the rest of the program);
  * an integer ``//`` or ``%`` of two provably non-negative operands is ``truncdiv`` /
    ``truncmod`` (C's ``/`` and ``%``, which agree with floor division there); the ``//`` and
    ``%`` left may see negative operands (floor semantics, a helper in C);
  * every loop has its ``form`` (``ir.records.LoopForm``): the simplified bound it runs to,
    whether it is a do-while (a wgmma loop whose trip count is not a constant but provably at
    least one), and for an unrolled loop of guarded scalar moves from global memory that touches no
    per-thread array, that it unrolls ``GUARDED_UNROLL`` iterations at a time.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.records import LoopForm
from ..ir.simplify import interval, is_nonnegative, simplify
from ..ir.visitor import collect
from .manager import register
from .rules.codegen_ranges import CodegenWalk
from .rules.int_width import is_64_bit

_TRUNCATING = {"//": "truncdiv", "%": "truncmod"}

# An unrolled loop that moves global elements one by one behind bounds checks still standing after
# simplification (tiles of sizes known only at run time) is unrolled this many iterations at a time,
# not in full: in full, the dynamic-shape GEMM's general form held 64 such loads a stage in flight,
# 255 registers and 2 KB of spills; by four it ran 1.575x faster with the same bits, and NVRTC took
# 0.49 s instead of 1.74 (H200, scripts/experiments/dynamic_unroll.py).
GUARDED_UNROLL = 4


def _unrolled_guarded_loads(loop: ir.For) -> bool:
    """``loop`` is an unrolled loop of more than ``GUARDED_UNROLL`` iterations whose body stores
    global elements it loads inside an ``if`` and touches no per-thread array (which a loop not
    unrolled in full would index at run time, out of registers)."""
    if loop.kind != "unrolled" or (ir.const_int(loop.extent) or 0) <= GUARDED_UNROLL:
        return False
    if any(b.scope == "local" for b in collect(loop.body, ir.Buffer)):
        return False
    return any(load.buffer.scope == "global" for branch in collect(loop.body, ir.IfThenElse)
               for store in collect(branch.then_body, ir.BufferStore)
               for load in collect(store.value, ir.BufferLoad))


class _Resolve(CodegenWalk):
    def __init__(self, func: ir.PrimFunc):
        super().__init__(func)
        self.renamed: dict = {}  # a scalar retyped int64 -> its int64 variable

    def visit_Var(self, node: ir.Var):
        return self.renamed.get(node, node)

    def visit_BinOp(self, e: ir.BinOp):
        # Decided on e as it is, by the ranges of the variables it names.
        wide = e.dtype.bits < 64 and is_64_bit(e, self.ranges, False)
        op = e.op
        if op in _TRUNCATING and not e.dtype.is_float and (
                is_nonnegative(e.a, self.ranges) and is_nonnegative(e.b, self.ranges)):
            op = _TRUNCATING[op]
        node = self.generic_visit(e)
        if not wide and op == e.op:
            return node
        return ir.BinOp(op, node.a, node.b, ir.dtypes.int64 if wide else e.dtype)

    def visit_LetStmt(self, node: ir.LetStmt):
        var = node.var
        wide = not var.dtype.is_float and var.dtype.bits < 64 and is_64_bit(node.value, self.ranges, False)
        value = self.visit(node.value)
        self.track_let(node)  # keyed by the variable the rest of the input names
        if wide:
            self.renamed[var] = ir.Var(var.name, ir.dtypes.int64)
        return dataclasses.replace(node, var=self.visit(var), value=value)

    def visit_For(self, node: ir.For):
        self.track_loop(node)
        end = simplify(node.start + node.extent, self.ranges)
        form = LoopForm(self.visit(end), self.runs_at_least_once(node),
                        GUARDED_UNROLL if _unrolled_guarded_loads(node) else 0)
        return dataclasses.replace(node, start=self.visit(node.start), extent=self.visit(node.extent),
                                   body=self.visit(node.body), form=form)

    def runs_at_least_once(self, loop: ir.For) -> bool:
        """A serial loop around a wgmma gemm whose trip count is not a constant but provably at
        least one (a pipelined loop over ``(by + 1) * 2`` stages, say). Constant trip counts keep
        their for loops: ptxas sees through those already."""
        if loop.kind == "unrolled" or ir.const_int(loop.extent) is not None:
            return False
        if not any(c.name.startswith("tw::wgmma_gemm") for c in collect(loop.body, ir.Call)):
            return False
        low = interval(simplify(loop.extent, self.ranges), self.ranges)[0]
        return low is not None and low >= 1


@register("resolve_int_arithmetic", "codegen")
def resolve_int_arithmetic(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    return func.with_body(_Resolve(func).visit(func.body))
