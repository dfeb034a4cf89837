"""scope_consumer_syncs: block barriers on the consumer side of a warp-specialised kernel count
only the consumer threads.

Expects: lowered IR (every ``SyncThreads`` placed; ``warp_specialize`` may have split the block).
Guarantees: every ``SyncThreads`` inside ``WarpSpecialize.consumer`` has ``threads`` set to the
consumer thread count, so it becomes a named barrier (``bar.sync 1, C``) that the producer
warpgroup, busy in its own loop, never has to reach. A ``SyncThreads`` on the producer side is
a compiler bug and raises. Kernels without warp specialisation are unchanged.
"""

from __future__ import annotations

import dataclasses

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect
from .manager import register


class _Scope(IRMutator):
    def __init__(self, threads: int):
        self.threads = threads

    def visit_SyncThreads(self, node: ir.SyncThreads):
        return ir.SyncThreads(threads=self.threads, loc=node.loc)


class _Split(IRMutator):
    def visit_WarpSpecialize(self, node: ir.WarpSpecialize):
        if collect(node.producer, ir.SyncThreads):
            raise CompileError("internal: a block barrier on the producer side of a warp-specialised "
                               "kernel would deadlock", node.loc)
        consumer = _Scope(node.consumer_threads).visit(node.consumer)
        return dataclasses.replace(node, consumer=consumer)


@register("scope_consumer_syncs", "lower")
def scope_consumer_syncs(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if not func.launch.producer_threads:
        return func
    return func.with_body(_Split().visit(func.body))
