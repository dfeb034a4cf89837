"""Simulation of the mbarrier protocol of a lowered kernel, iteration by iteration.

The simulator replays the final lowered IR of one thread block (block indices 0) and follows
every barrier slot through the PTX rules:

* ``init(count)`` sets the pending arrival count of phase 0 and a transaction count of 0;
* ``expect_transaction(bytes)`` raises the transaction count of the current phase;
* a TMA load that signals the slot lowers it by the bytes it moves (modelled as landing
  at once: the protocol, not the timing, is what the simulation checks);
* ``arrive()`` lowers the pending count by the number of threads that execute it;
* the phase completes when both reach 0: the phase number advances and the counts reset;
* ``wait(parity)`` returns once the phase with that parity has completed, i.e. when the
  parity of the current (incomplete) phase differs from ``parity``.

Statements run in program order for every thread at once ("lockstep"); ``if`` narrows the set
of threads: ``tw::shuffle_elect<N>()`` keeps one thread of each group of ``N``, other conditions
are evaluated per thread (:mod:`.evaluate`). Loops with barrier operations are unrolled with
concrete loop variables, so slot and parity expressions are evaluated exactly as the
generated code evaluates them. A wait whose phase has not completed when it is reached can
never complete (every thread that could arrive is itself at the wait), and is reported as an
event with a ``finding``. Warp-specialised code (``WarpSpecialize``: a producer and a consumer
side running their own loops at the same time) is run with one schedule that a correct
protocol allows: the statements before each side's loop, then the two loops' iterations
interleaved (producer iteration *k*, consumer iteration *k*, ...), then what follows each loop.
A wait that this schedule reaches before its phase completes is reported like any other. In a
persistent kernel each side's role loop sits in a tile loop: block 0 of a one-block grid stands
for every block, and :data:`SIMULATED_TILES` tiles are run, each as above (so the stage counter,
the barriers' phases and the epilogue tile are followed from one tile into the next).

Observers (:data:`OBSERVERS`, filled by :mod:`.checker`) ride along: they are told about every
protocol operation with the threads that execute it, and they see the statements that touch
shared memory (which the protocol alone skips), so a checker can follow the data as well. They
add findings (with their own ``source``) but never events, so the timeline is the same with or
without them.

:func:`simulate` returns a :class:`Simulation` (structured events and findings, meant to be
reused by a protocol checker); :meth:`Simulation.to_json` gives the trace's ``barriers`` section.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from ..ir import nodes as ir
from ..ir.visitor import collect
from . import program
from .evaluate import Unknown, as_int, evaluate
from .lines import KernelLines

BARRIER_OPS = (".init", ".arrive", ".expect_transaction", ".arrive_and_expect_tx", ".wait")
TMA_LOAD = "tw::tma_load"
_ELECT = re.compile(r"^tw::shuffle_elect<(\d+)>$")
MAX_EVENTS = 20000
SOURCE = "barrier_simulation"  # the ``source`` of the findings this module produces

# Factories ``factory(simulator, artifact) -> observer or None`` that :func:`simulate` runs when it
# is not given observers explicitly (analysis.checker registers the protocol checker here). An
# observer may define any of: ``interesting(stmt)`` (a leaf it wants to see), ``scan(stmt,
# active, frame)`` (called for such statements outside the protocol), ``on_init``,
# ``on_expect``, ``on_tma_load``, ``on_arrive``, ``on_wait`` (keyword arguments: name, slot,
# who, frame, event, state, and the operation's facts) and ``finish()``.
OBSERVERS: list = []


@dataclass
class SlotState:
    """One mbarrier: its init count, what the current phase still waits for, and its phase."""

    count: int
    pending: int
    tx: int = 0
    phase: int = 0  # number of completed phases = index of the current phase


@dataclass(frozen=True)
class Frame:
    """Where the simulation is: pipeline stage, iteration, innermost kernel line, election."""

    stage: str = "body"
    iteration: int | None = None
    line: int | None = None
    elect: int | None = None  # N of the innermost tw::shuffle_elect<N>() around us
    loops: tuple = ()  # (For, value) of the enclosing simulated loops, outermost first


@dataclass
class Simulation:
    """The result: declared barriers, loops, events in order, findings (indices are local)."""

    barriers: list
    iterations: int
    events: list
    findings: list
    loops: list
    threads: int
    truncated: bool = False

    @property
    def deadlocked(self) -> bool:
        return any(f.get("code") == "wait_never_completes" for f in self.findings)

    def waits(self) -> list:
        return [e for e in self.events if e["kind"] == "wait"]

    def to_json(self, finding_offset: int = 0) -> dict:
        """The trace's ``barriers`` section; event ``finding`` indices are shifted by
        ``finding_offset`` (the number of findings already in the trace)."""
        events = []
        for e in self.events:
            if "finding" in e:
                e = {**e, "finding": e["finding"] + finding_offset}
            events.append(e)
        return {"barriers": self.barriers, "iterations": self.iterations, "events": events,
                "loops": self.loops, "threads": self.threads, "block": [0, 0, 0],
                "truncated": self.truncated}


def _func_of(artifact) -> ir.PrimFunc:
    func = getattr(artifact, "func", artifact)
    if not isinstance(func, ir.PrimFunc):
        raise TypeError(f"expected a lowering artifact or a PrimFunc, got {type(artifact).__name__}")
    return func


def _barrier_call(stmt):
    """The Call of a barrier operation or of a TMA load that signals a barrier, else None."""
    if not isinstance(stmt, ir.Evaluate) or not isinstance(stmt.call, ir.Call):
        return None
    call = stmt.call
    if call.name in BARRIER_OPS or call.name.startswith("."):
        return call if call.args and isinstance(call.args[0], ir.BarrierRef) else None
    if call.name == TMA_LOAD and any(isinstance(a, ir.BarrierRef) for a in call.args):
        return call
    return None


def _relevant(body, leaf=None) -> set:
    """ids of the statements that contain (or are) a barrier operation, or a leaf for which
    ``leaf(stmt)`` is true."""
    found: set = set()

    def walk(s) -> bool:
        hit = _barrier_call(s) is not None or (leaf is not None and leaf(s))
        for c in program.children(s):
            hit = walk(c) or hit
        if hit:
            found.add(id(s))
        return hit

    walk(body)
    return found


SIMULATED_TILES = 2  # tiles of a persistent kernel's tile loop that the simulation runs


def _distinct(values: np.ndarray) -> list:
    """The distinct values of a small integer array, ascending (as ``np.unique`` gives them).
    ``np.unique`` asks ``np.ma`` whether the array is masked, and that import cost every process's
    first simulation 10-25 ms, overlapping NVRTC; the arrays here have at most a block's threads."""
    return sorted(set(values.tolist()))


class _Simulator:
    def __init__(self, func: ir.PrimFunc, max_events: int):
        self.func = func
        self.observers: list = []
        self.threads = func.launch.total_threads
        self.tid = np.arange(self.threads)
        self.env: dict = {func.launch.thread_var: self.tid}
        for v in func.launch.block_vars:
            self.env[v] = 0  # block (0, 0, 0) stands for every block: barriers are per block
        # a persistent kernel's block: block 0 of a one-block grid walks every tile
        self.env.update({ir.HW_BLOCK.text: 0, ir.HW_BLOCKS.text: 1})
        self.index = program.numbering(func.body)
        self.ir_line = program.ir_lines(func)
        self.relevant = self.protocol = _relevant(func.body)
        self.max_events = max_events
        self.slots: dict = {}  # (barrier name, slot) -> SlotState
        self.declared: dict = {}  # barrier name -> Buffer
        self.events: list = []
        self.findings: list = []
        self._finding_keys: dict = {}
        self.loops: list = []
        self.truncated = False
        self.descriptors = {d.name: d for d in func.attrs.get("tma_descriptors", [])}
        self.params = {p.name: p for p in func.params if isinstance(p, ir.Buffer)}
        self.lines = KernelLines(func)

    def observe(self, observers: list):
        """Let ``observers`` ride along (see :data:`OBSERVERS`); the statements they find
        interesting become relevant too."""
        self.observers = observers
        leaves = [o.interesting for o in observers if hasattr(o, "interesting")]
        if leaves:
            self.relevant = _relevant(self.func.body, lambda s: any(f(s) for f in leaves))

    def notify(self, hook: str, **facts):
        for o in self.observers:
            fn = getattr(o, hook, None)
            if fn is not None:
                fn(**facts)

    # ---- results -----------------------------------------------------------------------------
    def finding(self, key, severity, code, message, barrier=None, slot=None, frame=None, line=None,
                source=SOURCE) -> int:
        """Index of the finding for ``key`` (one finding per offending statement and slot)."""
        if key in self._finding_keys:
            return self._finding_keys[key]
        self.findings.append({
            "severity": severity, "code": code, "message": message, "barrier": barrier, "slot": slot,
            "iteration": frame.iteration if frame else None,
            "line": line if line is not None else (frame.line if frame else None), "source": source,
        })
        self._finding_keys[key] = len(self.findings) - 1
        return self._finding_keys[key]

    def emit(self, stmt, frame: Frame, barrier: str, slot, kind: str, scope: str, line_kind=None,
             **facts) -> dict:
        if len(self.events) >= self.max_events:
            if not self.truncated:
                self.truncated = True
                self.finding(("truncated",), "warning", "truncated",
                             f"barrier simulation stopped after {self.max_events} events")
            raise _Stop()
        event = {"seq": len(self.events), "barrier": barrier, "slot": slot, "kind": kind,
                 "iteration": frame.iteration, "stage": "setup" if kind == "init" else frame.stage,
                 "scope": scope,
                 "line": self.lines.of(stmt, line_kind or kind, self.declared.get(barrier), frame.line),
                 "stmt": self.index.get(id(stmt)), "ir_line": self.ir_line.get(id(stmt))}
        event.update(facts)
        self.events.append(event)
        return event

    # ---- helpers -----------------------------------------------------------------------------
    def scope(self, active, frame: Frame) -> str:
        if frame.elect is not None:
            return f"elected of {frame.elect}"
        n = int(active.sum())
        if n == self.threads:
            return f"all {self.threads} threads"
        return "one thread" if n == 1 else f"{n} threads"

    def groups(self, expr, active, stmt, frame: Frame):
        """[(value, thread mask)] of ``expr`` over the active threads."""
        try:
            value = evaluate(expr, self.env)
        except Unknown as why:
            self.finding(("unknown", id(stmt)), "warning", "not_evaluated",
                         f"cannot evaluate {expr} ({why}); the operation is not simulated", frame=frame)
            return []
        if not isinstance(value, np.ndarray):
            return [(int(value), active)]
        out = []
        for v in _distinct(value[active]):
            out.append((int(v), active & (value == v)))
        return out

    def elect(self, n: int, active):
        """tw::shuffle_elect<n>: the first thread of every group of ``n`` consecutive threads,
        when it runs here (a group whose first thread does not elects no one)."""
        return active & (self.tid % n == 0)

    def leaderless(self, n: int, active, taken, node: ir.IfThenElse, frame: Frame):
        """Report a group of ``n`` threads some of which reach an elected block while its leader
        (the group's first thread) does not: nobody runs the block (no TMA copy is issued)."""
        groups = self.tid // n
        leaderless = [g for g in _distinct(groups[active]) if not taken[groups == g].any()]
        if not leaderless:
            return
        refs = collect(node.then_body, ir.BarrierRef)
        barrier, slot = (refs[0].buffer.name, self.scalar(refs[0].index)) if refs else (None, None)
        on = f" (the TMA copy on {barrier}[{slot}])" if barrier else ""
        for g in leaderless:
            running = np.nonzero(active & (groups == g))[0]
            self.finding(("leaderless", id(node), int(g)), "error", "leader_not_running",
                         f"threads {running[0]}..{running[-1]} reach tw::shuffle_elect<{n}>() but not their "
                         f"leader, thread {g * n}: nobody runs the elected code{on}, so it never happens; let "
                         f"the whole group of {n} threads reach it", barrier, slot, frame=frame)

    def scalar(self, expr):
        """``expr``'s value when it is one integer for every thread, else None."""
        try:
            value = evaluate(expr, self.env)
        except Unknown:
            return None
        return int(value) if not isinstance(value, np.ndarray) else None

    def state(self, name, slot, stmt, frame):
        st = self.slots.get((name, slot))
        if st is None:
            buf = self.declared.get(name)
            n = len(buf.attrs.get("counts", [])) if buf is not None else 0
            what = f"slot {slot} of {name}, which has {n} slots" if n and not 0 <= slot < n else \
                f"{name}[{slot}] before its init"
            self.finding(("uninit", id(stmt), name, slot), "error", "uninitialized",
                         f"barrier operation on {what}", name, slot, frame)
        return st

    # ---- statements --------------------------------------------------------------------------
    def run(self, stmt, active, frame: Frame):
        if stmt is None:
            return
        if isinstance(stmt, ir.SeqStmt):
            self.run_seq(stmt.stmts, active, frame)
        elif isinstance(stmt, (ir.LetStmt, ir.Assign)):
            try:
                self.env[stmt.var] = evaluate(stmt.value, self.env)
            except Unknown:
                self.env[stmt.var] = Unknown
            if id(stmt) in self.relevant:  # its value reads what an observer follows
                self.notify("scan", stmt=stmt, active=active, frame=frame)
        elif isinstance(stmt, ir.Allocate):
            if stmt.buffer.scope == "barrier":
                self.declared[stmt.buffer.name] = stmt.buffer
        elif id(stmt) not in self.relevant:
            return
        elif id(stmt) not in self.protocol:  # touches what an observer follows, no barrier inside
            self.notify("scan", stmt=stmt, active=active, frame=frame)
        elif isinstance(stmt, ir.WarpSpecialize):
            self.run_split(stmt, active, frame)
        elif isinstance(stmt, ir.For):
            self.run_for(stmt, active, frame)
        elif isinstance(stmt, ir.IfThenElse):
            self.run_if(stmt, active, frame)
        elif isinstance(stmt, ir.Evaluate):
            self.run_call(stmt, active, frame)

    def run_seq(self, stmts, active, frame: Frame):
        for i, s in enumerate(stmts):
            if isinstance(s, ir.Comment) and s.text.startswith("prologue"):
                # inject_software_pipeline's prologue; simplify may have unrolled its loop away.
                k0 = next((ir.const_int(x.start) for x in stmts[i + 1:]
                           if isinstance(x, ir.For) and x.annotations.get("pipelined")), 0)
                frame = dataclasses.replace(frame, stage="prologue", iteration=k0 or 0)
            elif isinstance(s, ir.For) and s.annotations.get("pipelined") and frame.stage == "prologue":
                frame = dataclasses.replace(frame, stage="body", iteration=None)
            self.run(s, active, frame)

    def run_for(self, loop: ir.For, active, frame: Frame):
        line = loop.loc.line if loop.loc is not None else frame.line
        try:
            start = as_int(evaluate(loop.start, self.env))
            extent = as_int(evaluate(loop.extent, self.env))
        except Unknown as why:
            self.finding(("loop", id(loop)), "warning", "not_evaluated",
                         f"the loop over {loop.var.name} has no constant extent ({why}); not simulated",
                         frame=frame, line=line)
            return
        stages = loop.annotations.get("num_stages")
        kind = "prologue" if loop.annotations.get("stage") == "prologue" else \
            "pipelined" if loop.annotations.get("pipelined") else "loop"
        self.loops.append({"var": loop.var.name, "start": start, "extent": extent, "kind": kind,
                           "stages": stages, "line": line})
        base = frame.iteration if frame.stage == "prologue" else None
        for value in range(start, start + extent):
            self.env[loop.var] = value
            if kind == "prologue":
                inner = dataclasses.replace(frame, iteration=(base or 0) + value - start, line=line)
            elif kind == "pipelined":
                tail = extent - (stages - 1) if stages else extent
                stage = "epilogue" if value - start >= tail else "steady"
                inner = dataclasses.replace(frame, stage=stage, iteration=value, line=line,
                                            loops=frame.loops + ((loop, value),))
            else:
                loops = frame.loops + ((loop, value),)
                inner = dataclasses.replace(frame, line=line, loops=loops,
                                            iteration=frame.iteration if frame.stage != "body" else
                                            _linear(loops))
            self.run(loop.body, active, inner)
        self.env.pop(loop.var, None)

    def run_split(self, node: ir.WarpSpecialize, active, frame: Frame):
        """Both sides of a warp-specialised block, their role loops interleaved (module doc)."""
        first = node.consumer_threads
        sides = []
        for body, mask in ((node.producer, active & (self.tid >= first)), (node.consumer, active & (self.tid < first))):
            before, conds, tiles, inner_before, loop, inner_after, after = _role_path(body)
            self.run_seq(before, mask, frame)
            for cond in conds:  # the ifs around the loop (the producer's one warp)
                value = evaluate(cond, self.env)
                mask = mask & (value.astype(bool) if isinstance(value, np.ndarray) else bool(value))
            sides.append(_Side(tiles, inner_before, loop, inner_after, after, mask))
        loops = [side.loop for side in sides if side.loop is not None]
        tile_loops = [side.tiles for side in sides if side.tiles is not None]
        if len(loops) != 2 or len(tile_loops) not in (0, 2):
            self.finding(("split", id(node)), "warning", "not_evaluated",
                         "a warp-specialised side has no role loop; its sides run one after the other",
                         frame=frame)
            for side in sides:
                for part in (side.tiles or side.loop, side.after):
                    self.run(ir.seq(part) if isinstance(part, list) else part, side.mask, frame)
            return
        if tile_loops:
            count = min(SIMULATED_TILES, tile_loops[0].annotations[ir.TILE_LOOP])
            for side in sides:
                self.loops.append({"var": side.tiles.var.name, "start": 0, "extent": count, "kind": "tiles",
                                   "line": side.tiles.loc.line if side.tiles.loc is not None else frame.line,
                                   "role": side.loop.annotations.get("ws_role")})
            for value in range(count):
                tile_frames = []
                for side in sides:
                    self.env[side.tiles.var] = value
                    tile_frame = dataclasses.replace(frame, loops=frame.loops + ((side.tiles, value),))
                    self.run_seq(side.inner_before, side.mask, tile_frame)
                    tile_frames.append(tile_frame)
                self.interleave(sides, tile_frames)
                for side, tile_frame in zip(sides, tile_frames):
                    self.run_seq(side.inner_after, side.mask, tile_frame)
            for side in sides:
                self.env.pop(side.tiles.var, None)
        else:
            for side in sides:
                self.run_seq(side.inner_before, side.mask, frame)
            self.interleave(sides, [frame, frame])
            for side in sides:
                self.run_seq(side.inner_after, side.mask, frame)
        for side in sides:
            self.run_seq(side.after, side.mask, frame)

    def interleave(self, sides, frames):
        """The two role loops, iteration by iteration: producer k, consumer k, producer k + 1, ..."""
        loops = [side.loop for side in sides]
        start = as_int(evaluate(loops[0].start, self.env))
        extent = as_int(evaluate(loops[0].extent, self.env))
        stages = loops[0].annotations.get("num_stages")
        for loop, frame in zip(loops, frames):
            self.loops.append({"var": loop.var.name, "start": start, "extent": extent, "kind": "pipelined",
                               "stages": stages, "line": loop.loc.line if loop.loc is not None else frame.line,
                               "role": loop.annotations.get("ws_role")})
        for value in range(start, start + extent):
            for side, frame in zip(sides, frames):
                loop = side.loop
                self.env[loop.var] = value
                line = loop.loc.line if loop.loc is not None else frame.line
                inner = dataclasses.replace(frame, stage="steady", iteration=value, line=line,
                                            loops=frame.loops + ((loop, value),))
                self.run(loop.body, side.mask, inner)
        for loop in loops:
            self.env.pop(loop.var, None)

    def run_if(self, node: ir.IfThenElse, active, frame: Frame):
        line = node.loc.line if node.loc is not None else frame.line
        frame = dataclasses.replace(frame, line=line)
        cond = node.cond
        match = _ELECT.match(cond.name) if isinstance(cond, ir.Call) else None
        if match:
            n = int(match.group(1))
            taken = self.elect(n, active)
            self.leaderless(n, active, taken, node, frame)
            self.run(node.then_body, taken, dataclasses.replace(frame, elect=n))
            self.run(node.else_body, active & ~taken, frame)
            return
        try:
            value = evaluate(cond, self.env)
        except Unknown as why:
            self.finding(("cond", id(node)), "warning", "not_evaluated",
                         f"cannot evaluate the condition {cond} ({why}); assumed true for every thread",
                         frame=frame)
            self.run(node.then_body, active, frame)
            return
        if isinstance(value, np.ndarray):
            mask = active & value.astype(bool)
        else:
            mask = active if value else np.zeros_like(active)
        narrowed = frame if mask.sum() == active.sum() else dataclasses.replace(frame, elect=None)
        if mask.any():
            self.run(node.then_body, mask, narrowed)
        rest = active & ~mask
        if node.else_body is not None and rest.any():
            self.run(node.else_body, rest, dataclasses.replace(frame, elect=None))

    def run_call(self, stmt: ir.Evaluate, active, frame: Frame):
        call = _barrier_call(stmt)
        if call is None or not active.any():
            return
        if call.name == TMA_LOAD:
            self.tma_load(stmt, call, active, frame)
            return
        ref = call.args[0]
        name = ref.buffer.name
        scope = self.scope(active, frame)
        for slot, who in self.groups(ref.index, active, stmt, frame):
            n = int(who.sum())
            if call.name == ".init":
                self.init(stmt, call, name, slot, n, scope, frame)
                continue
            st = self.state(name, slot, stmt, frame)
            if st is None:
                continue
            if call.name in (".expect_transaction", ".arrive_and_expect_tx"):
                self.expect(stmt, call, name, slot, st, who, scope, frame)
            if call.name in (".arrive", ".arrive_and_expect_tx"):
                self.arrive(stmt, name, slot, st, n, scope, frame, who)
            elif call.name == ".wait":
                self.wait(stmt, call, name, slot, st, who, scope, frame)
            elif call.name != ".expect_transaction":
                self.finding(("op", call.name), "warning", "unknown_op",
                             f"barrier operation {call.name} is not simulated", name, slot, frame)

    def value(self, expr, who, stmt, frame) -> int:
        try:
            v = evaluate(expr, self.env)
            return int(v[who][0]) if isinstance(v, np.ndarray) else int(v)
        except Unknown as why:
            self.finding(("value", id(stmt)), "warning", "not_evaluated",
                         f"cannot evaluate {expr} ({why}); taken as 0", frame=frame)
            return 0

    # ---- the protocol ------------------------------------------------------------------------
    def init(self, stmt, call, name, slot, n, scope, frame):
        count = self.value(call.args[1], np.ones(self.threads, dtype=bool), stmt, frame)
        if n > 1:
            self.finding(("multi-init", id(stmt)), "warning", "init_by_many",
                         f"{name}[{slot}] is initialised by {n} threads", name, slot, frame)
        if (name, slot) in self.slots and self.slots[(name, slot)].pending != self.slots[(name, slot)].count:
            self.finding(("reinit", id(stmt)), "warning", "reinit_in_use",
                         f"{name}[{slot}] is initialised again while a phase is in progress", name, slot, frame)
        self.slots[(name, slot)] = SlotState(count, count)
        event = self.emit(stmt, frame, name, slot, "init", scope, count=count)
        self.notify("on_init", name=name, slot=slot, frame=frame, event=event, state=self.slots[(name, slot)])

    def expect(self, stmt, call, name, slot, st: SlotState, who, scope, frame):
        n = int(who.sum())
        total = self.value(call.args[1], who, stmt, frame) * n
        event = self.emit(stmt, frame, name, slot, "expect_tx", scope, bytes=total, count=n, phase=st.phase)
        st.tx += total
        self.notify("on_expect", name=name, slot=slot, who=who, frame=frame, event=event, state=st, nbytes=total)

    def complete(self, stmt, name, slot, st: SlotState, scope, frame, cause: str):
        if st.pending == 0 and st.tx == 0:
            self.emit(stmt, frame, name, slot, "phase_complete", scope, line_kind=cause, phase=st.phase)
            st.phase += 1
            st.pending = st.count

    def arrive(self, stmt, name, slot, st: SlotState, n, scope, frame, who=None):
        event = self.emit(stmt, frame, name, slot, "arrive", scope, count=n, phase=st.phase)
        self.notify("on_arrive", name=name, slot=slot, who=who, frame=frame, event=event, state=st)
        left = n
        while left > 0:
            take = min(left, st.pending)
            st.pending -= take
            left -= take
            if left and st.pending == 0 and st.tx != 0:
                event["finding"] = self.finding(
                    ("overflow", id(stmt), name, slot), "error", "arrive_overflow",
                    f"{n} threads arrive on {name}[{slot}], but phase {st.phase} expects only "
                    f"{st.count} arrivals and still waits for {st.tx} transaction bytes", name, slot, frame,
                    event["line"])
                break
            if left:
                event.setdefault("finding", self.finding(
                    ("overflow", id(stmt), name, slot), "warning", "arrive_overflow",
                    f"{n} threads arrive on {name}[{slot}], initialised for {st.count}: the extra "
                    f"arrivals complete later phases", name, slot, frame, event["line"]))
            self.complete(stmt, name, slot, st, scope, frame, "arrive")

    def tma_load(self, stmt, call, active, frame):
        ref = next(a for a in call.args if isinstance(a, ir.BarrierRef))
        name = ref.buffer.name
        nbytes = self.tma_bytes(call)
        scope = self.scope(active, frame)
        for slot, who in self.groups(ref.index, active, stmt, frame):
            st = self.state(name, slot, stmt, frame)
            if st is None:
                continue
            n = int(who.sum())
            moved = nbytes * n if nbytes is not None else max(st.tx, 0)
            event = self.emit(stmt, frame, name, slot, "tma_load", scope, bytes=moved, count=n, phase=st.phase)
            self.notify("on_tma_load", name=name, slot=slot, who=who, frame=frame, event=event, state=st,
                        stmt=stmt, call=call, nbytes=nbytes)
            st.tx -= moved
            self.complete(stmt, name, slot, st, scope, frame, "tma_load")

    def tma_bytes(self, call: ir.Call):
        """Bytes one TMA load moves: the constant of a bulk copy, or the descriptor's box."""
        if isinstance(call.args[0], ir.Raw):
            desc = self.descriptors.get(call.args[0].text)
            tensor = self.params.get(desc.buffer) if desc is not None else None
            if desc is None or tensor is None:
                return None
            numel = 1
            for d in desc.box_dims:
                numel *= int(d)
            return tensor.dtype.payload_bytes(numel)
        return ir.const_int(call.args[2]) if len(call.args) > 2 else None

    def wait(self, stmt, call, name, slot, st: SlotState, who, scope, frame):
        parity = self.value(call.args[1], who, stmt, frame) % 2
        done = st.phase % 2 != parity
        event = self.emit(stmt, frame, name, slot, "wait", scope, parity=parity, count=int(who.sum()),
                          phase=st.phase - 1 if done else st.phase, completes=done)
        self.notify("on_wait", name=name, slot=slot, who=who, frame=frame, event=event, state=st)
        if not done:
            event["finding"] = self.finding(
                ("blocked", id(stmt), name, slot), "error", "wait_never_completes",
                f"{name}[{slot}].wait({parity}) can never complete: phase {st.phase} has "
                f"{st.count - st.pending} of {st.count} arrivals and {st.tx} transaction bytes "
                "outstanding, and every thread that could complete it is waiting",
                name, slot, frame, event["line"])

    def finish(self):
        for (name, slot), st in self.slots.items():
            if st.pending != st.count or st.tx != 0:
                self.finding(("end", name, slot), "warning", "phase_incomplete_at_exit",
                             f"the kernel ends with phase {st.phase} of {name}[{slot}] incomplete "
                             f"({st.count - st.pending} of {st.count} arrivals, {st.tx} transaction "
                             "bytes outstanding)", name, slot)


class _Stop(Exception):
    pass


@dataclasses.dataclass
class _Side:
    """One side of a ``WarpSpecialize`` as the simulation runs it (see :func:`_role_path`)."""

    tiles: ir.For | None
    inner_before: list
    loop: ir.For | None
    inner_after: list
    after: list
    mask: np.ndarray


def _role_path(side) -> tuple:
    """(statements before, conditions around, the tile loop or None, statements before the role
    loop in it, the role loop, statements after it in the tile loop, statements after) of one
    side of a ``WarpSpecialize``: the loop (or a persistent kernel's tile loop around it) stands
    in the side's sequence or inside an ``if``, there possibly after scalar declarations
    (``carry_stage_counters``), which run as statements before the loop."""
    stmts = list(side.stmts) if isinstance(side, ir.SeqStmt) else [side]
    for i, s in enumerate(stmts):
        conds = []
        inner = s
        while isinstance(inner, ir.IfThenElse) and inner.else_body is None:
            conds.append(inner.cond)
            inner = inner.then_body
        # under the ifs: the loop, or the loop among statements (scalars declared before it)
        under = list(inner.stmts) if isinstance(inner, ir.SeqStmt) else [inner]
        if not conds and under != [s]:
            continue
        for j, u in enumerate(under):
            if isinstance(u, ir.For) and u.annotations.get("ws_role"):
                return stmts[:i], conds, None, under[:j], u, under[j + 1:], stmts[i + 1:]
            if isinstance(u, ir.For) and u.annotations.get(ir.TILE_LOOP):
                body = list(u.body.stmts) if isinstance(u.body, ir.SeqStmt) else [u.body]
                for k, b in enumerate(body):
                    if isinstance(b, ir.For) and b.annotations.get("ws_role"):
                        return stmts[:i] + under[:j], conds, u, body[:k], b, body[k + 1:], under[j + 1:] + stmts[i + 1:]
    return stmts, [], None, [], None, [], []


def _linear(loops) -> int:
    """Execution count of the innermost body over the enclosing loops (0-based)."""
    linear = 0
    for loop, value in loops:
        extent = ir.const_int(loop.extent) or 1
        linear = linear * extent + (value - (ir.const_int(loop.start) or 0))
    return linear


def simulate(artifact, max_events: int = MAX_EVENTS, observers=None) -> Simulation:
    """Replay the barrier protocol of a lowered kernel (an artifact of ``tileworkbench.lower``
    or its ``func``) over every loop iteration; see the module docstring for the rules.

    ``observers``: factories ``factory(simulator, artifact)`` to run along (default: the
    registered :data:`OBSERVERS`; pass ``[]`` for the protocol alone)."""
    func = _func_of(artifact)
    sim = _Simulator(func, max_events)
    factories = OBSERVERS if observers is None else observers
    sim.observe([o for o in (f(sim, artifact) for f in factories) if o is not None])
    everyone = np.ones(sim.threads, dtype=bool)
    try:
        sim.run(func.body, everyone, Frame())
    except _Stop:
        pass
    else:
        sim.finish()
    sim.notify("finish")
    barriers = []
    for name, buf in sim.declared.items():
        counts = [int(c) for c in buf.attrs.get("counts", [])]
        barriers.append({"name": name, "slots": len(counts), "init_count": counts[0] if counts else None,
                         "counts": counts, "versions": int(buf.attrs.get("versions", 1))})
    pipelined = [lp["extent"] for lp in sim.loops if lp["kind"] == "pipelined"]
    trips = pipelined or [lp["extent"] for lp in sim.loops if lp["kind"] == "loop"]
    return Simulation(barriers, max(trips, default=0), sim.events, sim.findings, sim.loops, sim.threads,
                      sim.truncated)


def barrier_timeline(artifact) -> dict:
    """The trace's ``barriers`` section for ``artifact`` (findings not included)."""
    return simulate(artifact).to_json()


__all__ = ["BARRIER_OPS", "OBSERVERS", "SOURCE", "Simulation", "SlotState", "barrier_timeline", "simulate"]
