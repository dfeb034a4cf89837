"""simplify: canonicalise index arithmetic and drop what it decides.

Expects: any IR.
Guarantees: integer expressions in affine canonical form with floor-div/mod folded where the
ranges of loop, thread and block indices allow (``ir.simplify``); ``if`` statements whose
condition is decided are replaced by the branch taken; loops of extent 1 are replaced by their
body with the index substituted; loops of extent 0, and loops and ifs left with nothing to run,
are dropped.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import _Simplifier, enter_thread_scope, launch_ranges, leave_thread_scope
from ..ir.visitor import substitute
from .manager import register


class _SimplifyStmts(_Simplifier):
    def visit_IfThenElse(self, node):
        node = self.generic_visit(node)
        if isinstance(node.cond, ir.Const):
            return node.then_body if node.cond.value else node.else_body
        if node.then_body is None:  # its statements were all dropped (a loop that never runs)
            return None if node.else_body is None else ir.IfThenElse(ir.Not(node.cond), node.else_body, loc=node.loc)
        return node

    def visit_WarpSpecialize(self, node):
        # Each side knows which threads run it (e.g. the producer's `tx < C + 32` is no constant).
        tid = self.thread_var
        outer = self.ranges[tid]
        self.ranges[tid] = node.producer_range
        producer = self.visit(node.producer)
        self.ranges[tid] = node.consumer_range
        consumer = self.visit(node.consumer)
        self.ranges[tid] = outer
        return dataclasses.replace(node, producer=producer if producer is not None else ir.SeqStmt([]),
                                   consumer=consumer if consumer is not None else ir.SeqStmt([]))

    def visit_ThreadScope(self, node):
        saved = enter_thread_scope(self.ranges, node, self.thread_var)
        body = self.visit(node.body)
        leave_thread_scope(self.ranges, saved)
        return None if body is None else dataclasses.replace(node, body=body)

    def visit_For(self, node):
        if ir.const_int(node.extent) == 1 and not (node.pipeline is not None and node.pipeline.steady):
            return self.visit(substitute(node.body, {node.var: node.start}))
        if ir.const_int(node.extent) == 0:
            return None
        node = super().visit_For(node)
        return None if isinstance(node, ir.For) and node.body is None else node  # nothing left to repeat


@register("simplify", "lower")
def simplify(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    simplifier = _SimplifyStmts(launch_ranges(func))
    simplifier.thread_var = func.launch.thread_var
    body = simplifier.visit(func.body)
    return func.with_body(body if body is not None else ir.SeqStmt([]))
