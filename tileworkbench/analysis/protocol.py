"""The mbarrier state rules the barrier simulation follows (the PTX rules, per slot):

* ``init(count)`` sets the pending arrival count of phase 0 and a transaction count of 0;
* ``expect_transaction(bytes)`` raises the transaction count of the current phase;
* a TMA load that signals the slot lowers it by the bytes it moves (modelled as landing
  at once: the protocol, not the timing, is what the simulation checks);
* ``arrive()`` lowers the pending count by the number of threads that execute it (so does
  ``arrive_after_copies()``, modelled as if the thread's copies had landed);
* the phase completes when both reach 0: the phase number advances and the counts reset;
* ``wait(parity)`` returns once the phase with that parity has completed, i.e. when the
  parity of the current (incomplete) phase differs from ``parity``. A wait whose phase has not
  completed when it is reached can never complete (every thread that could arrive is itself at
  the wait): an event with a ``finding``.

:class:`ProtocolRules` is the part of the simulator (``simulation.Simulator``) that applies them
to the lowered barrier calls; :class:`SlotState` and :class:`Frame` are what it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import nodes as ir

BARRIER_OPS = (".init", ".arrive", ".arrive_after_copies", ".expect_transaction", ".arrive_and_expect_tx", ".wait")
TMA_LOAD = "tw::tma_load"
ELECT = ir.SHUFFLE_ELECT


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


def barrier_call(stmt):
    """The Call of a barrier operation or of a TMA load that signals a barrier, else None."""
    if not isinstance(stmt, ir.Evaluate) or not isinstance(stmt.call, ir.Call):
        return None
    call = stmt.call
    if call.name in BARRIER_OPS or call.name.startswith("."):
        return call if call.args and isinstance(call.args[0], ir.BarrierRef) else None
    if call.name == TMA_LOAD and any(isinstance(a, ir.BarrierRef) for a in call.args):
        return call
    return None


class ProtocolRules:
    """The barrier operations, slot by slot (module doc). Needs the simulator's ``slots``,
    ``declared``, ``descriptors``, ``params``, ``observers``, ``threads`` and its ``emit``,
    ``finding``, ``groups``, ``scope`` and ``value``."""

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

    def run_call(self, stmt: ir.Evaluate, active, frame: Frame):
        call = barrier_call(stmt)
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
            if call.name in (".arrive", ".arrive_after_copies", ".arrive_and_expect_tx"):
                self.arrive(stmt, name, slot, st, n, scope, frame, who)
            elif call.name == ".wait":
                self.wait(stmt, call, name, slot, st, who, scope, frame)
            elif call.name != ".expect_transaction":
                self.finding(("op", call.name), "warning", "unknown_op",
                             f"barrier operation {call.name} is not simulated", name, slot, frame)

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
        for o in self.observers:
            o.on_init(name=name, slot=slot, frame=frame, event=event, state=self.slots[(name, slot)])

    def expect(self, stmt, call, name, slot, st: SlotState, who, scope, frame):
        n = int(who.sum())
        total = self.value(call.args[1], who, stmt, frame) * n
        event = self.emit(stmt, frame, name, slot, "expect_tx", scope, bytes=total, count=n, phase=st.phase)
        st.tx += total
        for o in self.observers:
            o.on_expect(name=name, slot=slot, who=who, frame=frame, event=event, state=st, nbytes=total)

    def complete(self, stmt, name, slot, st: SlotState, scope, frame, cause: str):
        if st.pending == 0 and st.tx == 0:
            self.emit(stmt, frame, name, slot, "phase_complete", scope, line_kind=cause, phase=st.phase)
            st.phase += 1
            st.pending = st.count

    def arrive(self, stmt, name, slot, st: SlotState, n, scope, frame, who=None):
        event = self.emit(stmt, frame, name, slot, "arrive", scope, count=n, phase=st.phase)
        for o in self.observers:
            o.on_arrive(name=name, slot=slot, who=who, frame=frame, event=event, state=st)
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
            for o in self.observers:
                o.on_tma_load(name=name, slot=slot, who=who, frame=frame, event=event, state=st,
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
        for o in self.observers:
            o.on_wait(name=name, slot=slot, who=who, frame=frame, event=event, state=st)
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
