"""How the barrier simulation runs ``T.ws`` scopes of different threads that follow one another
(``ir.ScopeRun``): on the GPU each thread range goes on without waiting for the others, so a
loader scope written after the scope that waits on its tiles runs ahead of it. Lockstep cannot
block, so the simulation picks a schedule a correct protocol allows: each range is a list of
steps (a statement, or one iteration of a loop with barrier operations), and the next step run is
the first range's (in program order) whose step starts with nothing or with a wait that can pass
now; when no range can go on, the first range's step runs and its wait is the finding (a deadlock
every schedule meets).

:class:`ScopeSchedule` is that part of the simulator (``simulation.Simulator``, beside
``schedule.Schedule``, whose ``run``, ``run_for``'s frames and ``protocol`` it uses).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import nodes as ir
from .evaluate import Unknown, as_int, evaluate
from .protocol import Frame, barrier_call
from .schedule import linear


@dataclasses.dataclass
class _Range:
    """One thread range of a scope run: its threads and the scope statements it has left."""

    mask: np.ndarray
    items: list  # (ThreadScope, statement) in program order
    loop: object = None  # the loop being run iteration by iteration: (ThreadScope, For, value, end)


class ScopeSchedule:
    """Needs the simulator's ``env``, ``tid``, ``protocol``, ``slots``, ``loops``, ``events`` and
    its ``run``."""

    def run_scope_run(self, scope_run: ir.ScopeRun, active, frame: Frame):
        ranges = []
        for (first, count), scopes in scope_run.sides:
            for sc in scopes:
                self.env[sc.var] = self.tid - sc.first
            items = [(sc, st) for sc in scopes for st in _stmts(sc.body)]
            ranges.append(_Range(active & (self.tid >= first) & (self.tid < first + count), items))
        while any(r.items or r.loop for r in ranges):
            going = [r for r in ranges if r.items or r.loop]
            ready = [r for r in going if self._can_start(r)]
            if ready:
                self._step(ready[0], frame)
                continue
            # Every range waits: a deadlock whatever the schedule. The first range's wait is the
            # finding (marked, so the diagnosis does not take the others' later arrivals for a way out).
            first = len(self.events)
            self._step(going[0], frame)
            blocked = next((e for e in self.events[first:] if e["kind"] == "wait" and not e["completes"]), None)
            if blocked is not None:
                blocked["circular"] = len(going)

    def _step(self, r: _Range, frame: Frame):
        if r.loop is None:
            sc, st = r.items.pop(0)
            inner = dataclasses.replace(frame, line=sc.loc.line if sc.loc is not None else frame.line)
            if not (isinstance(st, ir.For) and id(st) in self.protocol and self._enter(r, sc, st, inner)):
                self.run(st, r.mask, inner)
            return
        sc, loop, value, end = r.loop
        line = loop.loc.line if loop.loc is not None else frame.line
        self.env[loop.var] = value
        loops = frame.loops + ((loop, value),)  # frames as run_for gives a plain loop's
        iteration = frame.iteration if frame.stage != "body" else linear(loops)
        self.run(loop.body, r.mask, dataclasses.replace(frame, line=line, loops=loops, iteration=iteration))
        if value + 1 < end:
            r.loop = (sc, loop, value + 1, end)
        else:
            r.loop = None
            self.env.pop(loop.var, None)

    def _enter(self, r: _Range, sc, loop: ir.For, frame: Frame) -> bool:
        """Start running ``loop`` iteration by iteration (False: its bounds are unknown; it then
        runs whole, as ``run_for`` reports it)."""
        try:
            start = as_int(evaluate(loop.start, self.env))
            extent = as_int(evaluate(loop.extent, self.env))
        except Unknown:
            return False
        self.loops.append({"var": loop.var.name, "start": start, "extent": extent, "kind": "loop", "stages": None,
                           "line": loop.loc.line if loop.loc is not None else frame.line})
        if extent > 0:
            r.loop = (sc, loop, start, start + extent)
        return True

    def _can_start(self, r: _Range) -> bool:
        """Whether the range's next step starts with no wait, or a wait its slot lets pass now."""
        if r.loop is not None:
            sc, loop, value, _ = r.loop
            body = loop.body
            saved = self.env.get(loop.var)
            self.env[loop.var] = value
        else:
            body, saved, loop = r.items[0][1], None, None
            if isinstance(body, ir.For) and id(body) in self.protocol:
                try:
                    self.env[body.var] = as_int(evaluate(body.start, self.env))
                except Unknown:
                    return True
                loop, body = body, body.body
        try:
            wait = self._leading_barrier_op(body)
            return wait is None or self._passes(wait, r.mask)
        finally:
            if loop is not None:
                if saved is None:
                    self.env.pop(loop.var, None)
                else:
                    self.env[loop.var] = saved

    def _leading_barrier_op(self, stmt):
        """The first barrier operation ``stmt`` runs, if it is a wait (None otherwise)."""
        while stmt is not None:
            if isinstance(stmt, ir.SeqStmt):
                stmt = next((s for s in stmt.stmts if id(s) in self.protocol), None)
            elif isinstance(stmt, ir.For):
                stmt = stmt.body
            elif isinstance(stmt, ir.Evaluate):
                call = barrier_call(stmt)
                return call if call is not None and call.name == ".wait" else None
            else:
                return None
        return None

    def _passes(self, call: ir.Call, mask) -> bool:
        try:
            slot, parity = evaluate(call.args[0].index, self.env), evaluate(call.args[1], self.env)
        except Unknown:
            return True
        slot = int(slot[mask][0]) if isinstance(slot, np.ndarray) else int(slot)
        parity = int(parity[mask][0]) if isinstance(parity, np.ndarray) else int(parity)
        st = self.slots.get((call.args[0].buffer.name, slot))
        return st is None or st.phase % 2 != parity % 2


def _stmts(body) -> list:
    return list(body.stmts) if isinstance(body, ir.SeqStmt) else [body]
