"""elide_proxy_fences: drop the per-iteration async-proxy fence where no thread reads the tiles.

Expects: lowered IR; steady-state loops of ``inject_software_pipeline`` (annotation
``pipelined``) start with ``tw::fence_proxy_async()`` and a block barrier before refilling the
version read in the previous iteration.
Guarantees: the fence is removed from such a loop when nothing in it reads shared memory through
the generic proxy — no thread load of a shared buffer and no ``tw::gemm_ss`` (ldmatrix) or ``tw::gemm_ss_tf32`` — so the
previous reads were all wgmma or TMA (async proxy), which the wgmma wait and the block barrier
already order before the next TMA write. Loops with generic reads keep their fence, and so do
loops that write through the generic proxy a tile a wgmma or TMA call in them reads (the write of
one iteration must reach the async proxy before the next iteration's read). A loop that loses
its fence gets one right before it: in the first iteration that fence also ordered what the
threads wrote before the loop (a query tile the consumers copied in) before the loop's wgmma read
it (TileLang's varlen GQA decode went without one).
A kernel in which nothing uses the async proxy at all (no TMA, no wgmma: ``ASYNC_PROXY_CALLS``)
loses every such fence: ``insert_thread_syncs`` puts one before each block barrier in case the
reader is TMA or wgmma, and without either it orders nothing (an elementwise kernel or a
reduction through shared memory). A kernel whose only async-proxy work is TMA stores
(``store_last_tile_by_tma``'s result tile) keeps only the fence ``lower_tma`` puts before each
store's barrier: that fence orders every write its thread made before it, which is all a store
reads; the others order nothing any async-proxy read needs.
In a kernel of one role (no ``T.ws`` scope, no warp specialisation), a fence directly before a
block barrier then stays only where, on some path from that barrier, a wgmma or TMA call comes
before the next such fenced barrier: the later fence orders every earlier access of its thread
too, so the earlier one ordered nothing the later one does not (the sparse MLA backward's step
loop kept a fence before each of its dKV staging barriers, which only threads read across).
Inside each ``T.ws`` scope the same walk runs over the scope's own barriers, an mbarrier arrival
counting as an access that needs the fence (it may hand another scope's wgmma what the threads
wrote) and the scope's end too; then, over the fences left, one whose thread touched no tile a
wgmma or TMA call uses since its last remaining fence goes too (that fence orders all of it).
Issuing a ``cp.async`` copy is no such touch: the copy lands after the thread has moved on, so
a fence then orders none of it; the thread's ``cp_async_wait`` is (its copies land there), and
copies that arrive on an mbarrier are fenced by every thread that waits on it (``lower_tma``).
What a scope's threads touched before entering it is followed from the kernel's start, an
mbarrier arrival ending the writes (``fence_before_arrivals``, the next pass, fences every write
before one): TileLang's seesaw sparse MLA producer lost a fence before each of its eight named
barriers an iteration (a ``MEMBAR`` each in SASS), 0.85x -> 0.94x TileLang's prefill.
Kernels the compiler warp-specialised keep their fences.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.intrinsic_calls import cp_async_waited
from ..ir.visitor import IRMutator, collect
from ..target import PassConfigKey
from .manager import register
from .rules import tma as tma_rules
from .rules.proxies import (async_access_tiles, fence, generic_write_tiles, is_arrival, is_async_call, is_cp_async_copy,
                            is_fence, shared_tiles)


def _generic_shared_reads(body) -> bool:
    calls = collect(body, ir.Call)
    addressed = {id(c.args[0]) for c in calls if c.name == "address_of" and c.args}  # not reads
    if any(load.buffer.scope == "shared" and id(load) not in addressed for load in collect(body, ir.BufferLoad)):
        return True
    return any(c.name.startswith(("tw::gemm_ss<", "tw::gemm_ss_tf32<")) for c in calls)


def _loop_carried_generic_write(body, refill_fence) -> bool:
    """Whether ``body`` (a loop's, in order) writes through the generic proxy a shared tile that a
    wgmma or TMA call reads before that write in the loop, with no proxy fence after the write nor
    before the read but ``refill_fence``: one iteration's write (the consumers rescale B after its
    gemm) then reaches the next iteration's read only through that fence. A generic write: a store
    to a shared buffer, or a shared address first in a call of neither proxy-async kind (a vector
    copy's, stmatrix's, a pair store's or a ``cp.async``'s destination)."""
    writes, reads, fences = {}, {}, []
    for at, stmt in enumerate(collect(body, ir.Stmt)):
        if stmt is refill_fence:
            continue
        if is_fence(stmt):
            fences.append(at)
        elif isinstance(stmt, ir.Evaluate) and is_async_call(stmt.call):
            for buf in shared_tiles(stmt.call):
                reads.setdefault(id(buf), at)
        for buf in generic_write_tiles(stmt):
            writes[id(buf)] = at
    return any(buf in writes and not any(f > writes[buf] or f < read for f in fences)
               for buf, read in reads.items())


class _Elide(IRMutator):
    def visit_For(self, node: ir.For):
        node = self.generic_visit(node)
        if node.pipeline is None or not node.pipeline.steady or not isinstance(node.body, ir.SeqStmt):
            return node
        if _generic_shared_reads(node.body):
            return node
        stmts = list(node.body.stmts)
        refill_fence = next((i for i, s in enumerate(stmts[:-1]) if is_fence(s) and
                             isinstance(stmts[i + 1], ir.SyncThreads)), None)
        first_refill = next((i for i, s in enumerate(stmts) if isinstance(s, ir.IfThenElse)), len(stmts))
        if refill_fence is None or refill_fence > first_refill:
            return node
        if _loop_carried_generic_write(node.body, stmts[refill_fence]):
            return node
        del stmts[refill_fence]  # only the write-after-read fence before the refill
        # ... which also ordered, in the first iteration, what the threads wrote before the loop
        # (a query tile copied in by the consumers) before the loop's wgmma reads it: once, ahead
        return ir.seq([fence(), dataclasses.replace(node, body=ir.seq(stmts))])


class _DropFences(IRMutator):
    def visit_SeqStmt(self, node: ir.SeqStmt):
        node = self.generic_visit(node)
        return ir.seq([s for s in node.stmts if not is_fence(s)])


def _only_tma_stores(body) -> bool:
    """Whether the kernel's async-proxy work is TMA stores alone (no TMA load, no wgmma)."""
    names = {c.name for c in collect(body, ir.Call) if is_async_call(c)}
    return bool(names) and not collect(body, ir.TmaCopy) and all(tma_rules.is_store_call(n) for n in names)


def _stores(stmt) -> int:
    return sum(ir.is_tma_store_issue(c.name) for c in collect(stmt, ir.Call))


def _issue(stmt) -> bool:
    """``lower_tma``'s issue of a store: one thread's ``if`` around the stores and their commit,
    nothing else (no loop, barrier or other work the fence before it would have to cover)."""
    return isinstance(stmt, ir.IfThenElse) and stmt.else_body is None and _stores(stmt) > 0 and all(
        isinstance(x, ir.Evaluate) for x in ir.statements(stmt.then_body))


class _StoreFencesOnly(IRMutator):
    """Every fence but those right before a barrier that a TMA store follows; ``fenced`` counts
    the stores behind a kept fence (the caller checks it is every store)."""

    def __init__(self):
        self.fenced = 0

    def visit_SeqStmt(self, node: ir.SeqStmt):
        node = self.generic_visit(node)
        stmts, kept = node.stmts, []
        for i, s in enumerate(stmts):
            before_store = i + 2 < len(stmts) and isinstance(stmts[i + 1], ir.SyncThreads) and _issue(stmts[i + 2])
            if not is_fence(s):
                kept.append(s)
            elif before_store:
                kept.append(s)
                self.fenced += _stores(stmts[i + 2])
        return ir.seq(kept)


def _uses_async_proxy(node) -> bool:
    """Whether anything under ``node`` touches shared memory through the async proxy: a TMA copy
    or a call of ``ASYNC_PROXY_CALLS``."""
    return any(is_async_call(c) for c in collect(node, ir.Call)) or bool(collect(node, ir.TmaCopy))


def _is_block_barrier(stmt) -> bool:
    return isinstance(stmt, ir.SyncThreads) and stmt.threads is None


def _hands_over(node) -> bool:
    """Whether ``node`` arrives on an mbarrier: how a ``T.ws`` scope hands a tile to another,
    whose wgmma or TMA may then read what this one's threads wrote."""
    return bool(collect(node, ir.BarrierArrive)) or any("arrive" in c.name for c in collect(node, ir.Call))


class _AsyncReach:
    """Backwards over a kernel of one role, or over one ``T.ws`` scope: from each point, whether
    some path reaches an access that needs the threads' generic writes fenced (``reaches``: an
    async-proxy access; in a scope an mbarrier arrival too) before passing a fence directly followed
    by a barrier of all the threads walked (``is_barrier``; the pair). ``seen`` holds the fences of
    the pairs it walked, ``needed`` those from whose barrier such an access is reachable."""

    def __init__(self, is_barrier=None, reaches=None):
        self.is_barrier = is_barrier or _is_block_barrier
        self.reaches = reaches or _uses_async_proxy
        self.seen: set = set()
        self.needed: set = set()

    def before(self, stmt, after: bool) -> bool:
        """Whether an async access is reachable from just before ``stmt``, given whether one is
        from just after it."""
        if isinstance(stmt, ir.SeqStmt):
            reach, stmts = after, stmt.stmts
            for i in range(len(stmts) - 1, -1, -1):
                s = stmts[i]
                if is_fence(s) and i + 1 < len(stmts) and self.is_barrier(stmts[i + 1]):
                    self.seen.add(id(s))
                    if reach:
                        self.needed.add(id(s))
                    reach = False  # every thread fences, then all meet: this pair orders what follows
                else:
                    reach = self.before(s, reach)
            return reach
        if isinstance(stmt, ir.IfThenElse):
            return self.before(stmt.then_body, after) or (
                self.before(stmt.else_body, after) if stmt.else_body is not None else after)
        if isinstance(stmt, (ir.For, ir.While)):
            start = False  # at the body's start, for some number of iterations; grows to a fixed point
            while True:
                again = self.before(stmt.body, start or after)
                if again == start:
                    return after or start
                start = again
        return True if self.reaches(stmt) else after


class _Untouched:
    """Forwards over a ``T.ws`` scope: whether, on some path to each point, the thread has touched
    through the generic proxy (a load, a store, an address handed to a call of neither async kind)
    one of ``tiles``, those some wgmma or TMA call reads or writes, since its last fence.
    ``seen`` holds the fences of the pairs (``is_barrier``) it walked, ``touched`` those reached
    after such a touch on some path; a fence reached with none orders nothing its previous fence
    did not (that one precedes the same barrier in the thread's order)."""

    def __init__(self, tiles: set, is_barrier, arrivals_fence: bool = False):
        self.tiles, self.is_barrier = tiles, is_barrier
        self.seen: set = set()
        self.touched: set = set()
        self.entries: dict = {}  # id of each ThreadScope walked -> whether a touch may precede it unfenced
        # an mbarrier arrival counts as a fence: fence_before_arrivals, the next pass, fences every
        # write before one (and a read needs none before an arrival, by the same rule)
        self.arrivals_fence = arrivals_fence

    def touches(self, stmt) -> bool:
        if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call):
            if is_async_call(stmt.call) or is_cp_async_copy(stmt.call):
                # a cp.async's copy lands after its thread has moved on: a fence here orders none
                # of it; the thread's wait for it (below), or the fence after every wait on a
                # barrier the copies arrive on (lower_tma), is where it is ordered
                return False
            if cp_async_waited(stmt.call.name) is not None:
                return True  # the thread's copies land here
        return any(id(x.buffer) in self.tiles for x in collect(stmt, (ir.BufferStore, ir.BufferLoad)))

    def after(self, stmt, dirty: bool) -> bool:
        if isinstance(stmt, ir.SeqStmt):
            stmts = stmt.stmts
            for i, s in enumerate(stmts):
                if is_fence(s):
                    if i + 1 < len(stmts) and self.is_barrier(stmts[i + 1]):
                        self.seen.add(id(s))
                        if dirty:
                            self.touched.add(id(s))
                    dirty = False
                elif self.arrivals_fence and is_arrival(s):
                    dirty = False
                else:
                    dirty = self.after(s, dirty)
            return dirty
        if isinstance(stmt, ir.IfThenElse):
            then = self.after(stmt.then_body, dirty)
            return then or (self.after(stmt.else_body, dirty) if stmt.else_body is not None else dirty)
        if isinstance(stmt, (ir.For, ir.While)):
            entry = dirty  # the body's entry: before the loop, or after any iteration
            while True:
                end = self.after(stmt.body, entry)
                if (entry or end) == entry:
                    return entry
                entry = True
        if isinstance(stmt, ir.ThreadScope):
            self.entries[id(stmt)] = self.entries.get(id(stmt), False) or dirty
            return dirty or self.after(stmt.body, dirty)  # the threads of the scope, or the others
        return dirty or self.touches(stmt)


class _DropUnneeded(IRMutator):
    """Every fence of a pair that ``_AsyncReach`` walked and did not find needed (one in a
    statement it does not walk into stays)."""

    def __init__(self, unneeded: set):
        self.unneeded = unneeded

    def visit_SeqStmt(self, node: ir.SeqStmt):
        node = self.generic_visit(node)
        return ir.seq([s for s in node.stmts if id(s) not in self.unneeded])


def _drop_unreached_fences(body):
    """In a kernel of one role (no ``T.ws`` scopes, no warp specialisation: every thread meets
    every block barrier in the same order), the fences of the pairs after which no async-proxy
    access comes before the next pair. A later pair's fence orders everything its thread wrote or
    read before it (the earlier pair's accesses included) before what the async proxy does after
    that pair's barrier, so the earlier fence orders nothing the later one does not.
    Inside each ``T.ws`` scope the same holds for the scope's own barriers (its threads meet them
    in one order), with one more thing a pair's threads may be followed by: an mbarrier arrival,
    after which another scope's wgmma or TMA may read what they wrote (an arrival by another of the
    scope's threads than the writer: ``fence_before_arrivals`` fences only the arriving thread's own
    writes). The scope's end counts as reaching one. Kernels the compiler warp-specialised, and
    what lies outside the scopes, keep their fences."""
    if collect(body, ir.WarpSpecialize):
        return body
    if not collect(body, ir.ThreadScope):
        reach = _AsyncReach()
        reach.before(body, False)
        return _DropUnneeded(reach.seen - reach.needed).visit(body)
    def is_barrier(n):  # a block barrier inside a scope is one of the scope's threads (a named barrier, later)
        return lambda s: isinstance(s, ir.SyncThreads) and s.threads in (None, n)

    unneeded: set = set()
    for scope in collect(body, ir.ThreadScope):
        reach = _AsyncReach(is_barrier=is_barrier(scope.count), reaches=lambda s: _uses_async_proxy(s) or _hands_over(s))
        reach.before(scope.body, True)
        unneeded |= reach.seen - reach.needed
    body = _DropUnneeded(unneeded).visit(body)
    # Then, over what is left (each fence judged by the fences that stay: dropping two at once by
    # the two tests could leave a write fenced by neither), the fences no touch of an async tile precedes.
    tiles, unneeded = {id(buf) for buf in async_access_tiles(body)}, set()
    # what each scope's threads may have touched unfenced on entering it: from the kernel's start
    # (a scope after another counts the other's touches too, though its threads may not run it)
    whole = _Untouched(tiles, lambda s: False, arrivals_fence=True)
    whole.after(body, False)
    for scope in collect(body, ir.ThreadScope):
        untouched = _Untouched(tiles, is_barrier(scope.count))
        untouched.after(scope.body, whole.entries.get(id(scope), True))
        unneeded |= untouched.seen - untouched.touched
    return _DropUnneeded(unneeded).visit(body)


@register("elide_proxy_fences", "lower")
def elide_proxy_fences(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if ctx.flag(PassConfigKey.TW_KEEP_PROXY_FENCES):
        return func
    if not _uses_async_proxy(func.body):
        return func.with_body(_DropFences().visit(func.body))
    if _only_tma_stores(func.body):
        pruned = _StoreFencesOnly()
        body = pruned.visit(func.body)
        if pruned.fenced == _stores(func.body):  # every store still behind its fence, else keep them all
            return func.with_body(body)
        return func
    return func.with_body(_drop_unreached_fences(_Elide().visit(func.body)))
