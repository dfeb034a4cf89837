"""The mbarrier-protocol checker: definite bugs stop compilation, suspicious patterns warn.

It rides along the protocol simulation (:mod:`.simulation`, one thread block, every loop
iteration unrolled, thread scopes exact) as an observer and adds what the protocol alone does
not see:

* **the data**: which shared elements each TMA load writes and on which barrier phase it lands,
  which elements threads, gemms and TMA stores read and write, which phase every thread has
  observed through its waits (and what ``__syncthreads`` passes on to the others);
* **late landing**: the simulation lets TMA bytes land at once; the checker also keeps a
  shadow of every slot in which they land as late as they may (when something waits), which is
  when extra arrivals and early slot reuse corrupt a phase.

Errors (definite bugs): ``wait_never_completes`` (found by the simulation; the checker adds its
``cause``: ``no_arrivals``, ``own_later_arrive``, ``arrive_count_unreachable``, ``tx_mismatch``,
``wrong_parity``, ``circular_wait``, ``block_barrier_first``, or ``may_complete_later``, which is only a warning), ``uninitialized`` (the
simulation's), ``extra_arrivals``, ``slot_reused_before_wait``, ``tx_mismatch``,
``read_before_landed``, ``overwrite_in_use``, ``overwrite_in_flight``. Warnings (suspicious):
``store_source_reused``, ``store_unwaited_at_exit``, ``load_never_waited`` and the simulation's
own. docs/checker.md says what each one means.

The pass config ``tw.barrier_check`` (``PassConfigKey.TW_BARRIER_CHECK``) is ``"error"``
(default: the analysis stage's ``barrier_check`` raises a :class:`CompileError` at the kernel
line of the first error, or turns each warning into a :class:`TileworkbenchWarning`), ``"warn"``
(errors become warnings, in the trace too) or ``"off"`` (no checker; the simulation's own
findings stay in the trace).

The checker is a :class:`.observer.BarrierObserver` made of parts by concept: what accesses
touch (:mod:`.footprints`), the data rules (:mod:`.accesses`), the statements it replays outside
the protocol (:mod:`.scan`), and the explanation of deadlocks (:mod:`.diagnosis`); this module
holds the late-landing shadow of each slot and the protocol hooks that tie them together.

Limits: one block (block indices 0) stands for all; threads run in lockstep, and the two roles of
a warp-specialised block run in one interleaving a correct protocol allows (``schedule``), so an
order that only another interleaving would show is not seen; loops without barrier operations are scanned once
(twice when they issue TMA stores) with their loop variables unknown, so their accesses count
as touching every element those variables may reach; thread-to-thread races on shared memory
are insert_thread_syncs' business and not checked here; memory fences are not checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import TileworkbenchWarning
from ..ir import nodes as ir
from ..target import BARRIER_CHECK_MODES, PassConfigKey, barrier_check_mode
from .accesses import DataRules, Load, Read, Store
from .diagnosis import Diagnosis, at, iteration_of
from .footprints import Footprints, call_of, has_async_memory, is_shared, touches_shared
from .lines import KernelLines
from .observer import BarrierObserver
from .protocol import SlotState
from .scan import StatementScan
from .simulation import SOURCE as SIMULATION_SOURCE

SOURCE = "barrier_check"  # the ``source`` of the findings this module produces
CONFIG = PassConfigKey.TW_BARRIER_CHECK.value
MODES = BARRIER_CHECK_MODES
CHECKED_SOURCES = (SOURCE, SIMULATION_SOURCE)


def mode_of(artifact) -> str:
    """The ``tw.barrier_check`` mode in force for a lowering artifact ("error" by default)."""
    return barrier_check_mode(getattr(artifact, "pass_configs", None))



@dataclass
class Shadow:
    """One slot with TMA bytes landing as late as they may: the phase ends when something waits."""

    count: int
    arrived: int = 0
    expect: int = 0
    issued: int = 0
    event: dict | None = None  # the phase's first expect_tx / load event
    broken: bool = False  # reported once; not followed further

    def reset(self):
        self.arrived = self.expect = self.issued = 0
        self.event = None

    @property
    def landing(self) -> bool:
        """Every arrival is in and transaction bytes are involved: only landing is left."""
        return self.arrived == self.count and bool(self.expect or self.issued)


class Checker(Footprints, DataRules, StatementScan, Diagnosis, BarrierObserver):
    """The protocol checker (module doc)."""

    def __init__(self, sim, mode: str):
        self.sim = sim
        self.mode = mode
        self.env = sim.env
        self.threads = sim.threads
        self.source = KernelLines(sim.func)
        self.seen: dict = {}  # slot key -> per-thread number of the last phase observed complete
        self.loads: list[Load] = []
        self.reads: list[Read] = []
        self.stores: list[Store] = []
        self.shadow: dict = {}
        self.blocked: list = []  # (wait event, slot key, waiters, SlotState snapshot)
        self.stuck: set = set()  # slot keys with a deadlocked wait: what follows on them is moot
        self.arrivals: list = []  # (arrive event, slot key, arrivers)
        self.block_syncs: list = []  # (events before it, line) of every block barrier run
        self.last_wait: dict = {}  # slot key -> the last wait event that returned
        self.carried: dict = {}  # (slot key, phase) -> {slot key: phase the arrivers had seen}
        self._store_loops: dict = {}

    def report(self, key, severity, code, message, name=None, slot=None, frame=None, line=None, event=None):
        if line is None and (frame is None or frame.line is None) and name in self.sim.declared:
            loc = self.sim.declared[name].loc  # no better line known: where the barrier is declared
            line = loc.line if loc is not None else None
        idx = self.sim.finding(("check",) + key, severity, code, message, name, slot, frame, line, source=SOURCE)
        if event is not None:
            event.setdefault("finding", idx)
        return idx

    def interesting(self, stmt) -> bool:
        if isinstance(stmt, ir.SyncThreads):
            return True
        call = call_of(stmt)
        if call is not None and call.name.startswith("tw::tma_store"):
            return True
        return not isinstance(stmt, ir.SeqStmt) and touches_shared(stmt)

    def seen_of(self, key) -> np.ndarray:
        if key not in self.seen:
            self.seen[key] = np.full(self.threads, -1, dtype=np.int64)
        return self.seen[key]

    def mention(self, name: str, word: str) -> int | None:
        """The one kernel line that mentions ``name`` and ``word`` (e.g. a T.tma_copy of it)."""
        pat = re.compile(rf"\b{re.escape(name)}\b")
        hits = [i for i, t in enumerate(self.source.source) if word in t and pat.search(t)
                and not t.lstrip().startswith("#")]
        return self.source.first + hits[0] if len(hits) == 1 else None

    def on_init(self, name, slot, frame, event, state):
        self.shadow[(name, slot)] = Shadow(state.count)
        self.seen[(name, slot)] = np.full(self.threads, -1, dtype=np.int64)

    def on_expect(self, name, slot, who, frame, event, state, nbytes):
        sh = self.shadow.get((name, slot))
        if sh is None or sh.broken:
            return
        if sh.landing:
            sh.broken = True
            self.report(("early-reuse", event["stmt"], name, slot), "error", "slot_reused_before_wait",
                        f"expect_tx on {name}[{slot}]{at(event['line'])}{iteration_of(frame.iteration)} starts a new "
                        f"use of the slot while its previous phase may still wait for TMA bytes and no thread has "
                        "waited for it: the bytes join the old phase", name, slot, frame, event["line"], event)
            return
        sh.expect += nbytes
        sh.event = sh.event or event

    def on_tma_load(self, name, slot, who, frame, event, state, stmt, call, nbytes):
        key = (name, slot)
        sh = self.shadow.get(key)
        if sh is not None and not sh.broken:
            sh.issued += event["bytes"]
            sh.event = sh.event or event
        dst = call.args[2] if isinstance(call.args[0], ir.Raw) else call.args[0]
        load = dst.args[0] if isinstance(dst, ir.Call) and dst.name == "address_of" else None
        if not isinstance(load, ir.BufferLoad) or not is_shared(load.buffer):
            return
        lo, hi = self.span(load.buffer, load.indices, self.elements(load.buffer, nbytes))
        self.tma_write(stmt, load.buffer, int(lo[who].min()), int(hi[who].max()), who, key, state.phase,
                       event, frame)

    def on_arrive(self, name, slot, who, frame, event, state):
        key = (name, slot)
        # Whoever waits for this phase learns what the arriving threads had observed (a consumer
        # that saw a load land and then frees the slot tells the producer that waits for it).
        carried = self.carried.setdefault((key, state.phase), {})
        for other, seen in self.seen.items():
            carried[other] = max(carried.get(other, -1), int(seen[who].max()))
        for rec in self.reads:
            mine = rec.threads & who
            if mine.any():
                rec.released[(key, state.phase)] = rec.released.get((key, state.phase), False) | mine
        self.arrivals.append((event, key, who.copy()))
        sh = self.shadow.get(key)
        if sh is None or sh.broken:
            return
        n = int(who.sum())
        if sh.arrived + n > sh.count:
            if sh.expect or sh.issued:
                sh.broken = True
                self.report(("extra", event["stmt"], name, slot), "error", "extra_arrivals",
                            f"{n} threads arrive on {name}[{slot}]{at(event['line'])}"
                            f"{iteration_of(frame.iteration)}, but its init count is {sh.count} and the phase already has "
                            f"{sh.arrived} arrivals while its TMA bytes may still be in flight: the extra arrivals "
                            "complete the phase before the data lands, or complete the next phase early",
                            name, slot, frame, event["line"], event)
            else:  # a count-only barrier: the simulation reports the overflow
                sh.arrived = (sh.arrived + n) % sh.count
            return
        sh.arrived += n
        if sh.arrived == sh.count and not (sh.expect or sh.issued):
            sh.reset()

    def on_wait(self, name, slot, who, frame, event, state):
        key = (name, slot)
        if event["completes"]:
            seen = self.seen_of(key)
            seen[who] = np.maximum(seen[who], state.phase - 1)
            for other, phase in self.carried.get((key, state.phase - 1), {}).items():
                known = self.seen_of(other)
                known[who] = np.maximum(known[who], phase)
            self.last_wait[key] = event
            self.loads = [ld for ld in self.loads if not (self.seen_of(ld.key) >= ld.phase).all()]
        else:
            self.blocked.append((event, key, who.copy(), SlotState(**vars(state))))
            self.stuck.add(key)
        sh = self.shadow.get(key)
        if sh is not None and not sh.broken and sh.landing:
            self.check_bytes(key, sh, frame)
            sh.reset()

    def check_bytes(self, key, sh: Shadow, frame=None):
        if sh.expect == sh.issued:
            return
        name, slot = key
        ev = sh.event or {}
        more = "more" if sh.expect > sh.issued else "fewer"
        self.report(("tx", ev.get("stmt"), name, slot), "error", "tx_mismatch",
                    f"expect_tx announces {sh.expect} bytes on {name}[{slot}] but the TMA loads completing on it "
                    f"deliver {sh.issued} ({more} expected than delivered): the phase "
                    + ("never completes" if sh.expect > sh.issued else "completes before all the data lands"),
                    name, slot, frame, ev.get("line"), sh.event)

    def finish(self):
        for key, sh in self.shadow.items():
            if not sh.broken and sh.landing:
                self.check_bytes(key, sh)
        for st in self.stores:
            self.report(("exit-store", st.line, st.buffer), "warning", "store_unwaited_at_exit",
                        f"the block exits while the TMA store from {st.buffer}{at(st.line)}"
                        f"{iteration_of(st.iteration)} may still read shared memory: end with T.tma_store_wait()",
                        line=st.line)
        stuck = self.stuck
        for load in self.loads:
            if not load.reported and load.key not in stuck and (self.seen_of(load.key) < load.phase).all():
                name, slot = load.key
                self.report(("unwaited", load.event["stmt"], name, slot), "warning", "load_never_waited",
                            f"no thread ever waits for the TMA load into {load.buffer}"
                            f"{at(load.event['line'])}{iteration_of(load.event['iteration'])} (phase {load.phase} of "
                            f"{name}[{slot}]): its data is never known to have landed",
                            name, slot, None, load.event["line"], load.event)
        self.explain_deadlocks()
        if self.mode == "warn":
            for f in self.sim.findings:
                if f["severity"] == "error":
                    f["severity"], f["downgraded"] = "warning", True



def checker_factory(sim, artifact):
    """The simulation's observer factory for the checker: a :class:`Checker` in the mode the
    kernel's pass configs ask for, or None (off, or nothing asynchronous to follow)."""
    mode = mode_of(artifact)
    if mode == "off" or not has_async_memory(sim.func):
        return None
    return Checker(sim, mode)


__all__ = ["CHECKED_SOURCES", "CONFIG", "Checker", "MODES", "SOURCE", "TileworkbenchWarning", "checker_factory",
           "mode_of"]
