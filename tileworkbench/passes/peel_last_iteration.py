"""peel_last_iteration: a loop whose branches on its variable go one way on every iteration but
the last runs the last one after the loop, and the loop without those branches.

Phase: codegen, after ``peel_first_iteration`` (the analyses read the IR before it).
Expects: lowered IR.
Guarantees: a serial loop ``for k in [k0, k0 + n)`` whose body holds an ``if`` on ``k`` that is
decided alike for every ``k <= k0 + n - 2`` but not at ``k0 + n - 1`` (proved by writing ``k`` as
``k0 + n - 2 - d`` with ``d >= 0``, so it holds whatever ``n`` is) becomes the loop over
``[k0, k0 + n - 1)`` with each such ``if`` replaced by the branch it takes, followed by the body at
``k = k0 + n - 1`` (its branches simplified there), the two inside ``if n > 0`` unless ``n >= 1`` is
known. Every iteration runs the statements it ran before, in the same order; variables bound in the
body are bound afresh in the peeled copy. Why: causal attention masks its scores with a branch on
whether the key tile is left of, on or right of the diagonal; only the last tile of a query block's
loop is on it, and the branch left in the loop kept the overlapped schedule (``tw.gemm_overlap``)
slower than the plain one (docs/experiments.md, "Attention: intra-warpgroup overlap and ping-pong").
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import interval, launch_ranges, simplify
from ..ir.visitor import IRMutator, collect, substitute, uses_var, with_fresh_bindings
from .manager import register
from .simplify_ir import _SimplifyStmts


class _Decide(IRMutator):
    """Each ``if`` named in ``taken`` (by id) replaced by the branch it takes."""

    def __init__(self, taken: dict):
        self.taken = taken

    def visit_IfThenElse(self, node):
        if id(node) not in self.taken:
            return self.generic_visit(node)
        branch = node.then_body if self.taken[id(node)] else node.else_body
        return None if branch is None else self.visit(branch)


def _decided(cond: ir.Expr, ranges: dict):
    cond = simplify(cond, ranges)
    return bool(cond.value) if isinstance(cond, ir.Const) else None


class _PeelLast(IRMutator):
    def __init__(self, func: ir.PrimFunc):
        self.func = func
        self.ranges = launch_ranges(func)

    def steady_branches(self, loop: ir.For, last: ir.Expr) -> dict:
        """id -> the branch taken on every iteration but the last, for the ifs on the loop's
        variable decided so there and not alike at the last one."""
        d = ir.Var("d")
        before_last = {loop.var: simplify(last - 1 - d)}
        ranges = {**self.ranges, d: (0, None)}
        taken = {}
        for branch in collect(loop.body, ir.IfThenElse):
            if not uses_var(branch.cond, loop.var):
                continue
            steady = _decided(substitute(branch.cond, before_last), ranges)
            if steady is not None and _decided(substitute(branch.cond, {loop.var: last}), self.ranges) != steady:
                taken[id(branch)] = steady
        return taken

    def visit_For(self, node):
        node = self.generic_visit(node)
        if node.kind != "serial":
            return node
        last = simplify(node.start + node.extent - 1)
        taken = self.steady_branches(node, last)
        if not taken:
            return node
        steady = dataclasses.replace(node, extent=simplify(node.extent - 1), body=_Decide(taken).visit(node.body))
        simplifier = _SimplifyStmts(self.ranges)
        simplifier.thread_var = self.func.launch.thread_var
        final = simplifier.visit(with_fresh_bindings(substitute(node.body, {node.var: last})))
        body = ir.seq([steady, final])
        if (interval(node.extent, self.ranges)[0] or 0) >= 1:
            return body
        return ir.IfThenElse(ir.cmp(">", node.extent, 0), body, loc=node.loc)


@register("peel_last_iteration", "codegen")
def peel_last_iteration(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    return func.with_body(_PeelLast(func).visit(func.body))
