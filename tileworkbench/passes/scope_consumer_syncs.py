"""scope_consumer_syncs: block barriers on the consumer side of a warp-specialised kernel, and
inside a ``T.ws`` scope, count only the threads that run there.

Expects: lowered IR (every ``SyncThreads`` placed; ``warp_specialize`` may have split the block).
Guarantees: every ``SyncThreads`` inside ``WarpSpecialize.consumer`` has ``threads`` set to the
consumer thread count, so it becomes a named barrier (``bar.sync 1, C``) that the producer
warpgroup, busy in its own loop, never has to reach. A ``SyncThreads`` on the producer side is
a compiler bug and raises. Every ``SyncThreads`` inside a ``ThreadScope`` (``with T.ws(...)``)
becomes a named barrier of the scope's threads; each distinct set of threads gets its own
barrier id (1, 2, ... in program order, at most 15), so scopes that share warps never meet at one
barrier with two different counts. Kernels without either are unchanged.
"""

from __future__ import annotations

import dataclasses

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect
from .manager import register


class _Scope(IRMutator):
    def __init__(self, threads: int, barrier: int = 1):
        self.threads, self.barrier = threads, barrier

    def visit_SyncThreads(self, node: ir.SyncThreads):
        return ir.SyncThreads(threads=self.threads, barrier=self.barrier, loc=node.loc)


class _ThreadScopes(IRMutator):
    def __init__(self):
        self.ids: dict = {}  # (first, count) -> named barrier id

    def visit_ThreadScope(self, node: ir.ThreadScope):
        if not collect(node.body, ir.SyncThreads):
            return node
        key = (node.first, node.count)
        if key not in self.ids:
            if len(self.ids) == 15:
                raise CompileError("more than 15 different `T.ws` thread groups need block barriers: the GPU "
                                   "has 15 named barriers besides __syncthreads", node.loc)
            self.ids[key] = len(self.ids) + 1
        return dataclasses.replace(node, body=_Scope(node.count, self.ids[key]).visit(node.body))


class _Split(IRMutator):
    def visit_WarpSpecialize(self, node: ir.WarpSpecialize):
        if collect(node.producer, ir.SyncThreads):
            raise CompileError("internal: a block barrier on the producer side of a warp-specialised "
                               "kernel would deadlock", node.loc)
        consumer = _Scope(node.consumer_threads).visit(node.consumer)
        return dataclasses.replace(node, consumer=consumer)


@register("scope_consumer_syncs", "lower")
def scope_consumer_syncs(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if collect(func.body, ir.ThreadScope):
        return func.with_body(_ThreadScopes().visit(func.body))
    if not func.launch.producer_threads:
        return func
    return func.with_body(_Split().visit(func.body))
