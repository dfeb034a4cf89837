"""peel_first_iteration: a loop marked ``peel_first`` runs its first iteration ahead of the loop.

Phase: codegen, first (the analyses read the IR before it).
Expects: lowered IR; loops that ``warp_specialize`` marks with the ``peel_first`` annotation: the
consumer loop of an overlapped two-gemm pipeline (``tw.gemm_overlap``), whose body branches on
``k > k0`` (the previous iteration's P @ V is issued, waited for and released only from the
second iteration on).
Guarantees: such a loop ``for k in [k0, k0 + n)`` becomes its body at ``k = k0`` (the branches on
``k`` decided) followed by the loop over ``[k0 + 1, k0 + n)`` (its branches on ``k > k0`` decided
true), the two inside ``if n > 0`` unless ``n >= 1`` is known. Every iteration runs the statements
it ran before, in the same order, so what the analyses found for the loop holds for the peeled
form. Variables bound inside the body are bound afresh in the peeled copy (each loop or scalar
variable stays bound once). Why: on the H200 the overlapped schedule with its branches in the loop
ran at 0.83-0.87x of the plain one, peeled at 1.04-1.07x (docs/experiments.md, "Attention:
intra-warpgroup overlap and ping-pong"). The analyses check the unpeeled loop because their
simulation pairs the producer's and consumer's loops in lockstep.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import interval, launch_ranges, simplify
from ..ir.visitor import IRMutator, substitute, with_fresh_bindings
from .manager import register
from .simplify_ir import _SimplifyStmts

PEEL_FIRST = "peel_first"  # the For annotation warp_specialize sets


class _Peel(IRMutator):
    def __init__(self, func: ir.PrimFunc):
        self.func = func
        self.ranges = launch_ranges(func)

    def decided(self, stmt):
        simplifier = _SimplifyStmts(self.ranges)
        simplifier.thread_var = self.func.launch.thread_var
        return simplifier.visit(stmt)

    def visit_For(self, node):
        node = self.generic_visit(node)
        if not node.annotations.get(PEEL_FIRST):
            return node
        annotations = {k: v for k, v in node.annotations.items() if k != PEEL_FIRST}
        first = self.decided(with_fresh_bindings(substitute(node.body, {node.var: node.start})))
        rest = dataclasses.replace(node, start=simplify(node.start + 1), extent=simplify(node.extent - 1),
                                   annotations=annotations)
        rest = self.decided(rest)  # its k > k0 tests are true now
        body = ir.seq([s for s in (first, rest) if s is not None])
        if (interval(node.extent, self.ranges)[0] or 0) >= 1:
            return body
        return ir.IfThenElse(ir.cmp(">", node.extent, 0), body, loc=node.loc)


@register("peel_first_iteration", "codegen")
def peel_first_iteration(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    return func.with_body(_Peel(func).visit(func.body))
