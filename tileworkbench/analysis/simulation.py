"""Simulation of the mbarrier protocol of a lowered kernel, iteration by iteration.

The simulator replays the final lowered IR of one thread block (of each that :mod:`.blocks`
chooses) and follows every barrier slot:
:mod:`.schedule` says how it walks the program (lockstep threads, unrolled loops, the two roles
of a warp-specialised block interleaved), :mod:`.protocol` what each barrier operation does to a
slot. Observers (:class:`.observer.BarrierObserver`: the protocol checker) ride along: they are
told about every protocol operation with the threads that execute it, and they see the
statements that touch shared memory (which the protocol alone skips), so a checker can follow the
data as well. They add findings (with their own ``source``) but never events, so the timeline is
the same with or without them.

:func:`simulate` returns a :class:`Simulation` (structured events and findings);
:meth:`Simulation.to_json` gives the trace's ``barriers`` section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..ir import nodes as ir
from . import program
from .blocks import walked_blocks
from .lines import KernelLines
from .observer import BarrierObserver
from .protocol import BARRIER_OPS, Frame, ProtocolRules, SlotState, barrier_call
from .schedule import SIMULATED_TILES, Schedule
from .scope_schedule import ScopeSchedule

MAX_EVENTS = 20000
SIMULATED_SIZE = 1000  # a T.dynamic size's value in the simulation: no multiple of a tile, so a partial last one
SOURCE = "barrier_simulation"  # the ``source`` of the findings this module produces


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
    block: tuple = (0, 0, 0)  # the block whose walk the events are
    blocks: tuple = ((0, 0, 0),)  # every block walked (``blocks.walked_blocks``), its findings merged

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
                "loops": self.loops, "threads": self.threads, "block": _xyz(self.block),
                "blocks": [_xyz(b) for b in self.blocks], "truncated": self.truncated}


def block_text(block) -> str:
    """``3`` for a one-dimensional grid's block, ``(31, 0, 0)`` for a three-dimensional one's."""
    return str(block[0]) if len(block) == 1 else f"({', '.join(map(str, block))})"


def _xyz(block) -> list:
    return list(block) + [0] * (3 - len(block))


def _relevant(body, leaf=None) -> set:
    """ids of the statements that contain (or are) a barrier operation, or a leaf for which
    ``leaf(stmt)`` is true."""
    found: set = set()

    def walk(s) -> bool:
        hit = barrier_call(s) is not None or (leaf is not None and leaf(s))
        for c in program.children(s):
            hit = walk(c) or hit
        if hit:
            found.add(id(s))
        return hit

    walk(body)
    return found



class Simulator(Schedule, ScopeSchedule, ProtocolRules):
    """One block's simulation: the walk (``Schedule``), the slot rules (``ProtocolRules``), and
    what they record: events, findings, loops."""

    def __init__(self, func: ir.PrimFunc, max_events: int, block: tuple = ()):
        self.func = func
        self.observers: list = []
        self.threads = func.launch.total_threads
        self.tid = np.arange(self.threads)
        self.env: dict = {func.launch.thread_var: self.tid}
        # barriers are per block: one block stands for every block that makes the same barrier
        # operations (``blocks``); (0, 0, 0) unless told
        self.block = tuple(block) or tuple(0 for _ in func.launch.block_vars)
        self.env.update(zip(func.launch.block_vars, self.block))
        # a persistent kernel's block: block 0 of a one-block grid walks every tile
        self.env.update({ir.HW_BLOCK.text: 0, ir.HW_BLOCKS.text: 1})
        self.assumed_sizes = _assume_call_sizes(func, self.env)
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
        """Let ``observers`` (``BarrierObserver``s) ride along; the statements they find
        interesting become relevant too."""
        for o in observers:
            if not isinstance(o, BarrierObserver):
                raise TypeError(f"a barrier-simulation observer is a BarrierObserver, not {type(o).__name__}")
        self.observers = list(observers)
        if self.observers:
            self.relevant = _relevant(self.func.body, lambda s: any(o.interesting(s) for o in self.observers))

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


class _Stop(Exception):
    pass


def simulate(artifact, max_events: int = MAX_EVENTS, observers=None) -> Simulation:
    """Replay the barrier protocol of a lowered kernel (an artifact of ``tileworkbench.lower``
    or its ``func``) over every loop iteration; see the module docstring for the rules.

    ``observers``: factories ``factory(simulator, artifact) -> BarrierObserver | None`` to run
    along (none: the protocol alone; the analysis stage passes the protocol checker's).

    Block (0, 0, 0) is walked, and where the protocol reads the block index the grid's corners too
    (:mod:`.blocks`): the events are those of the walk with the most of them (causal attention's
    longest query block), the findings those of every walk (a finding that only a corner has
    names its block)."""
    func = program.func_of(artifact)
    first = _simulator(func, artifact, max_events, observers, ())
    walks = [first] + [_simulator(func, artifact, max_events, observers, block)
                       for block in walked_blocks(func, first.env, first.relevant)[1:]]
    for sim in walks:
        _walk(sim)
    shown = max(walks, key=lambda sim: len(sim.events))  # the first of the longest: (0, 0, 0) on a tie
    findings = _merged_findings(shown, walks)
    barriers = []
    for name, buf in shown.declared.items():
        counts = [int(c) for c in buf.attrs.get("counts", [])]
        barriers.append({"name": name, "slots": len(counts), "init_count": counts[0] if counts else None,
                         "counts": counts, "versions": int(buf.attrs.get("versions", 1))})
    pipelined = [lp["extent"] for lp in shown.loops if lp["kind"] == "pipelined"]
    trips = pipelined or [lp["extent"] for lp in shown.loops if lp["kind"] == "loop"]
    return Simulation(barriers, max(trips, default=0), shown.events, findings, shown.loops, shown.threads,
                      shown.truncated, shown.block, tuple(sim.block for sim in walks))


def _simulator(func, artifact, max_events: int, observers, block: tuple) -> Simulator:
    sim = Simulator(func, max_events, block)
    sim.observe([o for o in (f(sim, artifact) for f in observers or ()) if o is not None])
    return sim


def _walk(sim: Simulator):
    """One block's simulation, its observers finished."""
    try:
        sim.run(sim.func.body, np.ones(sim.threads, dtype=bool), Frame())
    except _Stop:
        pass
    else:
        sim.finish()
    if sim.assumed_sizes and sim.events:
        sim.finding(("assumed_sizes",), "warning", "simulated_at_size",
                    f"the sizes a call sets ({', '.join(sim.assumed_sizes)}) are simulated at {SIMULATED_SIZE}: the "
                    "barrier protocol is checked at that size")
    for o in sim.observers:
        o.finish()


def _merged_findings(shown: Simulator, walks: list) -> list:
    """``shown``'s findings in order (its events point into them), then the other walks' new ones;
    a finding that not every walk makes names the block it was found in."""
    keys = [{_finding_key(f) for f in sim.findings} for sim in walks]
    everywhere = set.intersection(*keys)
    findings, seen = [], set()
    for sim in [shown] + [w for w in walks if w is not shown]:
        for f in sim.findings:
            key = _finding_key(f)
            if sim is not shown and key in seen:
                continue
            seen.add(key)
            findings.append(f if key in everywhere else
                            {**f, "message": f"{f['message']} (in block {block_text(sim.block)})",
                                "block": _xyz(sim.block)})
    return findings


def _finding_key(f: dict) -> tuple:
    return f.get("code"), f.get("barrier"), f.get("slot"), f.get("line"), f.get("source")


def _assume_call_sizes(func: ir.PrimFunc, env: dict) -> list:
    """Binds each ``T.dynamic`` size parameter so that the size is ``SIMULATED_SIZE`` (the aligned
    form's parameter is the size over its multiple); the sizes' names. Without a value, loops whose
    trip counts the sizes set could not be walked, and a warp-specialised pipeline's protocol would
    go unchecked."""
    sizes = func.attrs.get("dynamic_sizes", {})
    named = []
    for p in func.params:
        if isinstance(p, ir.Var) and p.name in sizes:
            multiple = sizes[p.name][2] or 1
            env[p] = SIMULATED_SIZE // multiple
            named.append(re.sub(r"_div\d+$", "", p.name))  # the aligned form's k_div8 is k over 8
    return named


def barrier_timeline(artifact) -> dict:
    """The trace's ``barriers`` section for ``artifact`` (findings not included)."""
    return simulate(artifact).to_json()


__all__ = ["BARRIER_OPS", "SIMULATED_SIZE", "SIMULATED_TILES", "SOURCE", "Frame", "Simulation", "Simulator", "SlotState",
           "barrier_timeline", "simulate"]
