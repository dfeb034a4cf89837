"""instrument_timeline: a kernel compiled with ``tw.timeline`` records what it really does.

Phase: codegen, last (it runs only when ``tw.timeline`` is set; the analyses never see it).
Expects: the codegen phase's IR; pass configs ``tw.timeline`` (True: every block records, k:
every k-th unit, below) and ``tw.timeline_capacity`` (events per recording thread).
Guarantees: the events the compiler's plan already names are recorded where they happen: an
mbarrier wait's begin and end, arrivals, expect-tx, a TMA load's issue, a wgmma's issue and the
wait for it, a TMA store's issue and the wait for it. Each is a statement
``tw_tl.record(site, slot, parity)`` before the operation (issues, arrivals, a wait's begin) or
after it (a wait's end, a wgmma or store wait's end): a cause is recorded before it happens and
an effect after, so an order the timeline shows is one that happened. Every thread running a site
executes its record; the first thread of each warpgroup of a role (``tw_tl.open<TX, STREAM>()``
before the body, ``close`` after it: ``%globaltimer`` and ``clock64`` at both ends, to put the
events on one clock) keeps it: its warp holds the events, one per lane, and stores 32 at a time
(``tw/timeline.h``), so no record is inside a branch that splits a warp. What
runs on one thread (a branch on an elected thread or on ``tx == c``) is recorded just before that
branch by the threads around it, since the lanes count their events alike.

Sites share a record where that keeps the order true: records with nothing between them, and an
issue's or arrival's record with the previous record when only issues, expect-tx and arrivals
(and one-thread branches of those) lie between, provided they name the same barrier slot and
parity (a wait's begin is never taken earlier: that would lengthen the wait).
The shared record is taken where the first of them stood: still before each cause and after each
effect (``TimelineSite.recorded_by``; the decoder gives each site its row).

Sampling (``tw.timeline`` k > 1) samples units of work: blocks, or in a persistent kernel (a tile
loop, ``ir.TILE_LOOP``) each block's every k-th tile. A unit that does not record runs the plain
code: the unit's body is kept twice, ``if (sampled) { instrumented } else { plain }``.

``func.attrs["timeline"]`` is the ``ir.records.TimelinePlan``: streams, sites, sampling,
capacity. The operations themselves and their order are unchanged; without the config this pass
does not run and the device source is byte-identical to a build without it.
"""

from __future__ import annotations

import dataclasses

from ..errors import user_error
from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.records import TimelinePlan, TimelineSite
from ..ir.stmt import TILE_LOOP
from ..target import PassConfigKey
from .manager import register
from .rules.uniformity import Variance

WARPGROUP = 128
WARP = 32
DEFAULT_CAPACITY = 2048
# False: a sampled kernel keeps one body, its records run in every unit (for measuring what the
# plain copy buys; scripts/experiments/timeline_record_forms.py)
SAMPLED_COPY = True
TIMELINE_VAR = "tw_tl"  # the kernel's tw::Timeline (codegen/cuda.py declares it)
RECORD = f"{TIMELINE_VAR}.record"
# Kinds whose record may be taken earlier than where it stands, past operations that wait for
# nothing: issues and arrivals (a cause recorded earlier is still recorded before it happens). A
# wait's begin is not one: taken earlier, it would lengthen the wait it begins.
EARLY_RECORD_OK = frozenset({"arrive", "expect_tx", "tma_issue", "wgmma_issue", "store_issue"})
# Operations a cause's record may be moved up past (it then still comes before its cause): they
# wait for nothing. A wgmma issue is not one: it waits for the group before it.
_PASSABLE = frozenset({"arrive", "expect_tx", "tma_issue", "store_issue"})


def timeline_every(configs: dict) -> int:
    """Every how many blocks one records (0: timeline mode is off)."""
    value = configs.get(PassConfigKey.TW_TIMELINE.value)
    if value is None or value is False:
        return 0
    return 1 if value is True else int(value)


def _thread_bound(cond, tid):
    """``(lo, hi)`` for a condition ``tid < c``, ``tid >= c``... (either side), ``(c, c + 1)`` for
    ``tid == c``, intersected over ``and``; None when it is not such a test. ``tid``: the thread
    index and the scalars that copy it."""
    if isinstance(cond, ir.BinOp) and cond.op == "and":
        a, b = _thread_bound(cond.a, tid), _thread_bound(cond.b, tid)
        if a is None or b is None:
            return None
        return max(a[0], b[0]), min(a[1], b[1])
    if not isinstance(cond, ir.BinOp) or cond.op not in ("<", "<=", ">", ">=", "=="):
        return None
    op, a, b = cond.op, cond.a, cond.b
    if b in tid and isinstance(a, ir.Const):
        op, a, b = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op], b, a
    if a not in tid or not isinstance(b, ir.Const):
        return None
    c = int(b.value)
    return {"<": (0, c), "<=": (0, c + 1), ">": (c + 1, 1 << 30), ">=": (c, 1 << 30), "==": (c, c + 1)}[op]


def _one_thread(cond, tid) -> bool:
    """A branch taken by one thread (per warp at most): an election or ``tid == c``."""
    if isinstance(cond, ir.Call) and cond.name.startswith("tw::shuffle_elect"):
        return True
    bound = _thread_bound(cond, tid)
    return bound is not None and bound[1] - bound[0] == 1


def _event(call: ir.Call):
    """(kinds before, kinds after, barrier ref or None) for an operation the timeline records."""
    name = call.name
    ref = next((a for a in call.args if isinstance(a, ir.BarrierRef)), None)
    if name == ".wait":
        return ("wait_begin",), ("wait_end",), ref
    # An arrival is recorded before it: the wait it completes ends after the record (a cause is
    # recorded before it happens and an effect after, so a measured order is one that happened).
    if name in (".arrive", ".arrive_and_expect_tx", ".arrive_after_copies"):  # the last: when issued
        return ("arrive",), (), ref
    if name == ".expect_transaction":
        return ("expect_tx",), (), ref
    if name.startswith("tw::tma_load"):
        return ("tma_issue",), (), ref
    if name.startswith("tw::wgmma_gemm"):
        return ("wgmma_issue",), (), None
    if ir.wgmma_waited(name) is not None:
        return (), ("wgmma_wait",), None
    if ir.is_tma_store_issue(name):
        return ("store_issue",), (), None
    if name.startswith("tw::tma_store_wait"):
        return (), ("store_wait",), None
    return None


class _Instrument:
    """Walks the body knowing which threads run each statement and in which role."""

    def __init__(self, func: ir.PrimFunc, sample_tiles: bool):
        self.tid = _thread_index_copies(func)
        self.variance = Variance(func)
        self.total = func.launch.total_threads
        self.sample_tiles = sample_tiles  # persistent and sampled: a tile loop's body is kept twice
        self.sites: list[TimelineSite] = []
        self.streams: dict[int, str] = {}  # recorder thread -> role of its stream (first seen)

    def recorders(self, lo: int, hi: int) -> list[int]:
        hi = min(hi, self.total)
        return [max(lo, g * WARPGROUP) for g in range(lo // WARPGROUP, -(-hi // WARPGROUP))]

    def records(self, kinds, stmt, call, ref, span, role) -> list:
        out = []
        for kind in kinds:
            site = len(self.sites)
            line = stmt.loc.line if stmt.loc is not None else None
            self.sites.append(TimelineSite(kind, role, ref.buffer.name if ref is not None else None, line,
                                           expr_text(call)[:160]))
            slot = ref.index if ref is not None else ir.const(0)
            parity = call.args[1] if call.name == ".wait" else ir.const(0)
            for tx in self.recorders(*span):
                self.streams.setdefault(tx, role)
            out.append(ir.Evaluate(ir.Call(RECORD, (ir.const(site), slot, parity))))
        return out

    def hoisted(self, body, span, role) -> list:
        """Records, before a one-thread branch, of the issues inside it (TMA loads and stores)."""
        out = []
        for stmt in _flat(body):
            if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call):
                event = _event(stmt.call)
                if event is not None and event[0] and event[0][0] in ("tma_issue", "store_issue"):
                    out += self.records(event[0], stmt, stmt.call, event[2], span, role)
        return out

    def visit(self, s, span, role):
        if isinstance(s, ir.SeqStmt):
            return ir.seq([self.visit(c, span, role) for c in s.stmts])
        if isinstance(s, ir.Evaluate) and isinstance(s.call, ir.Call):
            event = _event(s.call)
            if event is None:
                return s
            before, after, ref = event
            return ir.seq(self.records(before, s, s.call, ref, span, role) + [s]
                          + self.records(after, s, s.call, ref, span, role))
        if isinstance(s, ir.WarpSpecialize):
            consumer = self.visit(s.consumer, (0, s.consumer_threads), "consumer")
            producer = self.visit(s.producer, (s.consumer_threads, s.consumer_threads + s.producer_threads),
                                  "producer")
            return dataclasses.replace(s, producer=producer, consumer=consumer)
        if isinstance(s, ir.ThreadScope):
            scope = f"ws({', '.join(map(str, s.warpgroups))})"
            return dataclasses.replace(s, body=self.visit(s.body, (s.first, s.first + s.count), scope))
        if isinstance(s, ir.IfThenElse):
            if _one_thread(s.cond, self.tid):
                return ir.seq(self.hoisted(s.then_body, span, role) + [s])
            bound = _thread_bound(s.cond, self.tid)
            inner = span if bound is None else (max(span[0], bound[0]), min(span[1], bound[1]))
            # a recording warp's lanes hold its events, so they must run every record together:
            # nothing is recorded inside a branch that may split a warp (one on the thread index
            # that is not along warps, or on anything else that may differ between threads)
            whole_warps = inner[0] % WARP == 0 and (inner[1] % WARP == 0 or inner[1] >= self.total) \
                if bound is not None else self.variance.is_uniform(s.cond)
            then_body = self.visit(s.then_body, inner, role) if inner[0] < inner[1] and whole_warps else s.then_body
            else_body = self.visit(s.else_body, span, role) if s.else_body is not None and bound is None \
                else s.else_body
            return dataclasses.replace(s, then_body=then_body, else_body=else_body)
        if isinstance(s, ir.For) and self.sample_tiles and SAMPLED_COPY and TILE_LOOP in s.annotations:
            sampled = ir.Call(f"{TIMELINE_VAR}.samples_tile", (s.var,), ir.dtypes.boolean)
            return dataclasses.replace(s, body=ir.IfThenElse(sampled, self.visit(s.body, span, role), s.body))
        if isinstance(s, ir.While) and not self.variance.is_uniform(s.cond):
            return s  # a loop the threads of a warp may leave apart: as a branch that splits a warp
        if isinstance(s, (ir.For, ir.While)):
            return dataclasses.replace(s, body=self.visit(s.body, span, role))
        return s

    # ---- sharing records ----------------------------------------------------------------------
    def _site_of(self, s) -> int | None:
        if isinstance(s, ir.Evaluate) and isinstance(s.call, ir.Call) and s.call.name == RECORD:
            return int(s.call.args[0].value)
        return None

    def _passable(self, s) -> bool:
        """A statement a cause's record may move up past: operations that wait for nothing, and
        one-thread branches of them."""
        if isinstance(s, ir.Evaluate) and isinstance(s.call, ir.Call):
            event = _event(s.call)
            return self._site_of(s) is not None or (
                event is not None and not event[1] and all(k in _PASSABLE for k in event[0]))
        if isinstance(s, ir.IfThenElse) and s.else_body is None and _one_thread(s.cond, self.tid):
            return all(self._passable(c) for c in _flat(s.then_body))
        return False

    def share(self, s):
        """``s`` with records merged as the module docstring says, in every statement list."""
        if isinstance(s, ir.SeqStmt):
            return ir.seq(self._share_list([self.share(c) for c in _flat(s)]))
        changes = {f.name: self.share(getattr(s, f.name)) for f in dataclasses.fields(s)
                   if isinstance(getattr(s, f.name), ir.Stmt)}
        return dataclasses.replace(s, **changes) if changes else s

    def _share_list(self, stmts: list) -> list:
        out: list = []
        group = None  # [index in out of the shared record, slot, parity] (None: no barrier / not a wait)
        adjacent = passable = False  # since the group's last record: nothing / only passable statements
        for s in stmts:
            site = self._site_of(s)
            if site is None:
                out.append(s)
                adjacent, passable = False, passable and self._passable(s)
                continue
            info = self.sites[site]
            slot = s.call.args[1] if info.barrier is not None else None
            parity = s.call.args[2] if info.kind in ("wait_begin", "wait_end") else None
            if group is not None and (adjacent or (passable and info.kind in EARLY_RECORD_OK)) \
                    and _agrees(group[1], slot) and _agrees(group[2], parity):
                head = self._site_of(out[group[0]])
                self.sites[site] = dataclasses.replace(info, recorded_by=head)
                group[1] = slot if group[1] is None else group[1]
                group[2] = parity if group[2] is None else group[2]
                out[group[0]] = ir.Evaluate(ir.Call(RECORD, (ir.const(head), *(ir.const(0) if e is None else e
                                                                               for e in group[1:]))))
            else:
                group = [len(out), slot, parity]
                out.append(s)
            adjacent = passable = True
        return out


def _thread_index_copies(func: ir.PrimFunc) -> set:
    """The thread index and the scalars declared as a copy of it (``tx_1 = tx``)."""
    tids = {func.launch.thread_var}
    for s in _walk(func.body):
        if isinstance(s, ir.LetStmt) and isinstance(s.value, ir.Var) and s.value in tids:
            tids.add(s.var)
    return tids


def _walk(s):
    """Every statement under ``s``, in order."""
    if isinstance(s, ir.SeqStmt):
        for c in s.stmts:
            yield from _walk(c)
        return
    yield s
    for f in dataclasses.fields(s):
        if isinstance(getattr(s, f.name), ir.Stmt):
            yield from _walk(getattr(s, f.name))


def _agrees(a, b) -> bool:
    """Two records' slots (or parities) can be one: the same expression, or one of them unused."""
    return a is None or b is None or expr_text(a) == expr_text(b)


def _flat(s):
    if isinstance(s, ir.SeqStmt):
        for c in s.stmts:
            yield from _flat(c)
    elif s is not None:
        yield s


def _check_configs(configs: dict):
    if configs.get(PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT.value):
        raise user_error("pass configs tw.timeline and tw.debug_barrier_timeout cannot be combined: debug mode's "
                           "bounded waits would be timed instead of the kernel's own; compile the kernel once with each")


@register("instrument_timeline", "codegen")
def instrument_timeline(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    every = timeline_every(ctx.configs)
    if not every:
        return func
    _check_configs(ctx.configs)
    capacity = int(ctx.configs.get(PassConfigKey.TW_TIMELINE_CAPACITY.value, DEFAULT_CAPACITY))
    unit = "tile" if every > 1 and _has_tile_loop(func.body) else "block"
    walker = _Instrument(func, sample_tiles=unit == "tile")
    body = walker.share(walker.visit(func.body, (0, walker.total), "block"))
    if every > 1 and unit == "block" and SAMPLED_COPY:  # blocks that do not record run the plain body
        body = ir.IfThenElse(ir.Call(f"{TIMELINE_VAR}.samples_block", (), ir.dtypes.boolean), body, func.body)
    for tx in walker.recorders(0, walker.total):  # every warpgroup keeps its begin and end at least
        walker.streams.setdefault(tx, _role_of(func.body, tx) or "block")
    recorders = tuple(sorted(walker.streams))
    streams = {tx: i for i, tx in enumerate(recorders)}
    plan = TimelinePlan(every=every, capacity=capacity, recorders=recorders,
                        roles=tuple(walker.streams[tx] for tx in recorders),
                        sites=tuple(walker.sites), unit=unit)
    opens = [ir.Evaluate(ir.Call(f"{TIMELINE_VAR}.open<{tx}, {streams[tx]}>", ())) for tx in recorders]
    closes = [ir.Evaluate(ir.Call(f"{TIMELINE_VAR}.close<{tx}, {streams[tx]}>", ())) for tx in recorders]
    out = func.with_body(ir.seq(opens + [body] + closes))
    out.attrs["timeline"] = plan
    return out


def _has_tile_loop(body) -> bool:
    return any(isinstance(s, ir.For) and TILE_LOOP in s.annotations for s in _walk(body))


def _role_of(body, tx: int) -> str | None:
    """The role thread ``tx`` has in the kernel's warp specialisation, if any."""
    for s in _flat(body):
        if isinstance(s, ir.WarpSpecialize):
            return "consumer" if tx < s.consumer_threads else "producer"
    return None
