"""verify_scope_races: reject a read of a shared tile that another ``T.ws`` scope, running beside
the reader, writes with nothing that could order the write before the read.

Expects: tile-level IR after ``insert_thread_syncs`` (``T.ws`` scopes, and the branches of an ``if
tx < 128: ... elif ...`` chain, as ``ir.ThreadScope``; scopes of different threads side by side
where ``ir.scope_runs`` groups them: a block barrier that pass put between two scopes, where
neither waits on an mbarrier, orders them, and ends the run).
Guarantees: the same IR (this pass never changes it). In each run of scopes side by side, when
one side's threads write a shared tile (a store, a tile copy, fill or reduction, the landing of
their ``T.ptx_cp_async`` runs; not a TMA load, which its own barrier orders) and make no mbarrier
arrival after the write (later in their statements, or anywhere in a loop around the write: the
next iteration's), no other side can learn that the write is done: a read of those elements by
another side (regions not provably apart) is then a race, unless the read is ordered before the
write (the reader arrives on a barrier after the read that the writer waits on before the write).
Such a read is a ``CompileError`` at its line naming the write's; pass config
``tw.barrier_check`` ``"warn"`` makes it a ``TileworkbenchWarning``, ``"off"`` skips the check.
A block barrier cannot help: inside a scope there is none for both sides.

TileLang's hand-written MLA decode and pipelined sparse MLA examples have this race (their second
consumer divides by ``sum_exp_shared``, which the first writes after its loop): on an H100, in debug
mode, their outputs came out wrong; one barrier added made them right (docs/tilelang.md). What
this pass does not see, the tile-level interpreter's race records do (orders through several
barriers, iteration by iteration): an arrival anywhere in a loop around a write counts here as
after it, so a loop's last write left unordered by an arrival that comes first in its body is
not reported.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

from ..errors import CompileError, SourceLocation, TileworkbenchWarning
from ..ir import nodes as ir
from ..ir.visitor import collect
from ..target import PassConfigKey, barrier_check_mode
from .manager import register

CONFIG = PassConfigKey.TW_BARRIER_CHECK.value


@dataclass
class _Event:
    """One thing a side does, in its program order: a read or write of a shared tile (``box``: per
    dimension the (lowest, highest) index, None where not a constant), an arrival or a wait."""

    kind: str  # "r", "w", "arrive", "wait"
    name: str  # the buffer's or the barrier's
    box: tuple | None
    loops: frozenset  # the loops of the side around it
    index: int
    loc: SourceLocation | None


def _point_box(indices) -> tuple:
    return tuple((v, v) if (v := ir.const_int(i)) is not None else None for i in indices)


def _region_box(r: ir.Region) -> tuple:
    out = []
    for start, extent in zip(r.starts, r.extents):
        lo, n = ir.const_int(start), ir.const_int(extent)
        out.append((lo, lo + n - 1) if lo is not None and n is not None else None)
    return tuple(out)


def _apart(a: tuple | None, b: tuple | None) -> bool:
    """Whether two boxes are provably apart (along some dimension both know)."""
    if a is None or b is None:
        return False
    return any(x is not None and y is not None and (x[1] < y[0] or y[1] < x[0]) for x, y in zip(a, b))


class _Side:
    """A side's events, walked in program order."""

    def __init__(self, scopes):
        self.events: list[_Event] = []
        self.loops: list = []
        self.loc = None
        for scope in scopes:
            self.walk(scope.body)

    def add(self, kind, name, box=None):
        self.events.append(_Event(kind, name, box, frozenset(self.loops), len(self.events), self.loc))

    def reads_in(self, expr):
        for load in collect(expr, ir.BufferLoad):
            if load.buffer.scope == "shared":
                self.add("r", load.buffer.name, _point_box(load.indices))

    def region(self, kind, r: ir.Region):
        if r.buffer.scope == "shared":
            self.add(kind, r.buffer.name, _region_box(r))

    def walk(self, s):
        if s is None:
            return
        outer = self.loc
        if getattr(s, "loc", None) is not None:
            self.loc = s.loc
        self.statement(s)
        self.loc = outer

    def statement(self, s):
        if isinstance(s, (ir.For, ir.While)):
            self.reads_in(s.extent if isinstance(s, ir.For) else s.cond)
            self.loops.append(id(s))
            self.walk(s.body)
            self.loops.pop()
        elif isinstance(s, ir.BarrierArrive):
            self.add("arrive", s.barrier.buffer.name)
        elif isinstance(s, ir.BarrierWait):
            self.add("wait", s.barrier.buffer.name)
        elif isinstance(s, ir.BufferStore):
            self.reads_in(s.value)
            if s.buffer.scope == "shared":
                self.add("w", s.buffer.name, _point_box(s.indices))
        elif isinstance(s, ir.TmaCopy):
            if not s.is_load:
                self.region("r", s.src)
        elif isinstance(s, ir.Reduce):
            for kind, buf in (("r", s.src), ("w", s.dst)):
                if buf.scope == "shared":
                    self.add(kind, buf.name, None)
        else:
            self.fields(s)

    def fields(self, s):
        """Any other statement: its expressions read, its regions read (``src``, ``a``, ``b``) or
        written (``dst``, ``c``), its statements walked, in field order."""
        writes = []
        for f in dataclasses.fields(s) if dataclasses.is_dataclass(s) else ():
            value = getattr(s, f.name)
            if isinstance(value, ir.Region):
                if f.name in ("dst", "c"):
                    writes.append(value)
                else:
                    self.region("r", value)
            elif isinstance(value, ir.Stmt):
                self.walk(value)
            elif isinstance(value, (tuple, list)) and value and all(isinstance(v, ir.Stmt) for v in value):
                for v in value:
                    self.walk(v)
            elif isinstance(value, ir.Expr):
                self.reads_in(value)
        for r in writes:
            self.region("w", r)

    # ---- orders ------------------------------------------------------------------------------
    def arrives_after(self, event: _Event) -> bool:
        """Whether the side arrives on a barrier after ``event``: later, or in a loop around both."""
        return any(e.kind == "arrive" and _follows(e, event) for e in self.events)

    def waits_before(self, event: _Event, barrier: str) -> bool:
        """Whether the side waits on ``barrier`` before ``event``: earlier, or in a loop around both."""
        return any(e.kind == "wait" and e.name == barrier and _follows(event, e) for e in self.events)


def _follows(later: _Event, earlier: _Event) -> bool:
    """``later`` comes after ``earlier`` in program order, or a loop around both runs it after
    ``earlier`` in a next iteration."""
    return later.index > earlier.index or bool(later.loops & earlier.loops)


def _first_race(sides: list) -> tuple | None:
    for (w_threads, writer), (r_threads, reader) in ((a, b) for a in sides for b in sides if a is not b):
        for w in writer.events:
            if w.kind != "w" or writer.arrives_after(w):
                continue
            for r in reader.events:
                if r.kind != "r" or r.name != w.name or _apart(r.box, w.box):
                    continue
                read_first = any(a.kind == "arrive" and _follows(a, r) and writer.waits_before(w, a.name)
                                 for a in reader.events)
                if not read_first:
                    return w, w_threads, r, r_threads
    return None


def _threads(first_count) -> str:
    first, count = first_count
    return f"threads {first}-{first + count - 1}"


@register("verify_scope_races", "tile")
def verify_scope_races(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    mode = barrier_check_mode(ctx.configs)
    if mode == "off":
        return func
    for seq in collect(func.body, ir.SeqStmt):
        for run in ir.scope_runs(seq.stmts):
            if not isinstance(run, ir.ScopeRun):
                continue
            found = _first_race([(key, _Side(scopes)) for key, scopes in run.sides])
            if found is None:
                continue
            w, w_threads, r, r_threads = found
            at = f" at line {w.loc.line}" if w.loc is not None and w.loc.line else ""
            message = (f"race: {r.name} is read here by {_threads(r_threads)} while {_threads(w_threads)} write it"
                       f"{at} and arrive on no barrier after that write: nothing can order the write before this "
                       "read. Arrive on an mbarrier after the write and wait on it before the read (pass config "
                       f"{CONFIG}='warn' lets it through)")
            if mode == "warn":
                line = r.loc.line if r.loc is not None and r.loc.line else 0
                warnings.warn_explicit(TileworkbenchWarning(message), TileworkbenchWarning,
                                       func.source_file or "<kernel>", line)
            else:
                raise CompileError(message, r.loc)
    return func
