"""insert_thread_syncs: block barriers (``__syncthreads``) between threads' shared-memory accesses.

Expects: tile-level IR (copies, gemms and user stores not yet lowered to threads).
Guarantees: a ``T.sync_threads()`` stands between
  * a thread write of a shared buffer (copy, fill, store) and any later read of it (RAW),
  * a read of a shared buffer and a later write of it by threads or by a TMA load (WAR),
including across iterations of serial and pipelined loops. Syncs are never placed inside an
``if`` (a barrier in divergent code deadlocks); a whole ``if`` counts as one access.
TMA loads make their data visible through their mbarrier, so a read after a TMA load needs none.
A ``T.atomic_add`` to a shared element is ordered like a write against reads and writes, but not
against other atomic adds (they commute: threads may add in any order).
Inside a ``WarpSpecialize`` only the consumer side gets syncs (the producer side is TMA only).
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field, replace

from ..ir import nodes as ir
from ..ir.visitor import IRVisitor, collect
from .manager import register


@dataclass
class _State:
    written: set = field(default_factory=set)  # shared buffers written by threads since the last sync
    read: set = field(default_factory=set)  # shared buffers read by threads since the last sync
    added: set = field(default_factory=set)  # shared buffers atomically added to since the last sync

    def merge(self, other: "_State") -> "_State":
        return _State(self.written | other.written, self.read | other.read, self.added | other.added)

    def copy(self) -> "_State":
        return _State(set(self.written), set(self.read), set(self.added))


class _Accesses(IRVisitor):
    """Shared buffers (by name) a statement reads / writes with threads, or writes with TMA."""

    def __init__(self):
        self.reads, self.writes, self.tma_writes, self.adds = set(), set(), set(), set()

    @staticmethod
    def shared(buf):
        return buf.scope == "shared"

    def visit_BufferLoad(self, n):
        if self.shared(n.buffer):
            self.reads.add(n.buffer.name)
        self.generic_visit(n)

    def visit_BufferStore(self, n):
        if self.shared(n.buffer):
            self.writes.add(n.buffer.name)
        self.generic_visit(n)

    def visit_Evaluate(self, n):
        call = n.call
        if isinstance(call, ir.Call) and call.name == "atomicAdd":  # (address_of(buf[idx]), value)
            target = call.args[0].args[0]
            if self.shared(target.buffer):
                self.adds.add(target.buffer.name)
            for index in target.indices:
                self.visit(index)
            self.visit(call.args[1])
            return
        self.generic_visit(n)

    def visit_Copy(self, n):
        if self.shared(n.src.buffer) and n.instruction != "tma":
            self.reads.add(n.src.buffer.name)
        if self.shared(n.dst.buffer):
            (self.tma_writes if n.instruction == "tma" else self.writes).add(n.dst.buffer.name)

    def visit_TmaCopy(self, n):
        if n.is_load:
            self.tma_writes.add(n.dst.buffer.name)

    def visit_Fill(self, n):
        if self.shared(n.dst.buffer):
            self.writes.add(n.dst.buffer.name)

    def visit_Gemm(self, n):
        for r in (n.a, n.b):
            if self.shared(r.buffer):
                self.reads.add(r.buffer.name)


def _accesses(stmt):
    a = _Accesses()
    a.visit(stmt)
    return a


def _hazard(acc: _Accesses, state: _State) -> bool:
    return bool((acc.reads & (state.written | state.added))
                or ((acc.writes | acc.tma_writes) & (state.read | state.written | state.added))
                or (acc.adds & (state.read | state.written)))


def _syncs(stmt) -> int:
    return len(collect(stmt, ir.SyncThreads))


def _sync(out: list):
    # The reader may be the async proxy (wgmma, TMA): order the threads' writes for it too.
    out.append(ir.Evaluate(ir.Call("tw::fence_proxy_async", ())))
    out.append(ir.SyncThreads())


def _leaf(stmt, state: _State, out: list) -> _State:
    acc = _accesses(stmt)
    if _hazard(acc, state):
        _sync(out)
        state = _State()
    out.append(stmt)
    state.written |= acc.writes
    state.read |= acc.reads
    state.added |= acc.adds
    return state


def _block(stmt, state: _State) -> tuple[ir.Stmt, _State]:
    out: list = []
    stmts = stmt.stmts if isinstance(stmt, ir.SeqStmt) else [stmt]
    for s in stmts:
        if isinstance(s, ir.SyncThreads):
            out.append(s)
            state = _State()
        elif isinstance(s, ir.For) and s.kind in ("serial", "pipelined", "unrolled"):
            _, end = _block(s.body, state.copy())  # first pass: what one iteration leaves behind
            body, end = _block(s.body, state.merge(end))  # loop-carried hazards included
            carried, carried_end = _block(s.body, end)  # the same with nothing from before the loop
            if _syncs(carried) < _syncs(body):
                # Only what came before the loop needs this one: a sync before it, not one per iteration.
                _sync(out)
                body, end = carried, carried_end
            out.append(dataclasses.replace(s, body=body))
            state = state.merge(end)
        elif isinstance(s, ir.WarpSpecialize):
            # The producer side only issues TMA (ordered by mbarriers); the consumer side is code
            # like any other (its barriers become consumer-only ones in scope_consumer_syncs).
            consumer, state = _block(s.consumer, state)
            out.append(replace(s, consumer=consumer))
        else:
            state = _leaf(s, state, out)
    return ir.seq(out), state


@register("insert_thread_syncs", "tile")
def insert_thread_syncs(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    body, _ = _block(func.body, _State())
    return func.with_body(body)
