"""The value ranges the codegen phase decides by, kept as its passes walk the program in the order
the code generator prints it: the thread index (every thread the hardware launches) and the block
indices, loop variables, never re-assigned integer scalars, a persistent kernel's block indices
(bound per tile: the range the whole grid gives them), and on each side of a warp-specialised
block and in each ``T.ws`` scope the threads that run it."""

from __future__ import annotations

import dataclasses

from ...ir import nodes as ir
from ...ir.simplify import RangeTracker, enter_thread_scope, launch_ranges, leave_thread_scope
from ...ir.visitor import IRMutator, reassigned_vars


class CodegenWalk(RangeTracker, IRMutator):
    """An IR mutator that keeps ``self.ranges`` as described above; subclasses rewrite what they
    need and call ``super()`` for ``For``, ``LetStmt``, ``Assign``, ``WarpSpecialize`` and ``ThreadScope``."""

    def __init__(self, func: ir.PrimFunc):
        launch = func.launch
        self.ranges = launch_ranges(func)
        self.reassigned = reassigned_vars(func.body)
        self.block_ranges = dict(self.ranges) if launch.persistent_tiles else {}
        self.block_ranges.pop(launch.thread_var, None)
        self.thread_var = launch.thread_var

    def track_let(self, node: ir.LetStmt):
        if node.var in self.block_ranges:  # a persistent kernel's block index, bound per tile
            self.ranges[node.var] = self.block_ranges[node.var]
        else:
            super().track_let(node)

    def visit_For(self, node: ir.For):
        self.track_loop(node)
        return dataclasses.replace(node, body=self.visit(node.body))

    def visit_LetStmt(self, node: ir.LetStmt):
        node = self.generic_visit(node)
        self.track_let(node)
        return node

    def visit_Assign(self, node: ir.Assign):
        self.forget(node.var)
        return self.generic_visit(node)

    def visit_WarpSpecialize(self, node: ir.WarpSpecialize):
        outer = self.ranges[self.thread_var]
        self.ranges[self.thread_var] = node.producer_range
        producer = self.visit(node.producer)
        self.ranges[self.thread_var] = node.consumer_range
        consumer = self.visit(node.consumer)
        self.ranges[self.thread_var] = outer
        return dataclasses.replace(node, producer=producer, consumer=consumer)

    def visit_ThreadScope(self, node: ir.ThreadScope):
        saved = enter_thread_scope(self.ranges, node, self.thread_var)
        body = self.visit(node.body)
        leave_thread_scope(self.ranges, saved)
        return dataclasses.replace(node, body=body)
