"""How the barrier simulation runs ``T.ws`` scopes of different threads that follow one another
(``ir.ScopeRun``): on the GPU each thread range goes on without waiting for the others, so a
loader scope written after the scope that waits on its tiles runs ahead of it. Lockstep cannot
block, so the simulation picks a schedule a correct protocol allows: each range keeps a cursor
(the statements it has left, inside the loops and uniform branches around them, which it enters
iteration by iteration: FlashMLA's consumers wait on several barriers in one iteration of two
nested loops), and the next statement run is the first range's (in program order) whose next
statement is not a wait, or a wait that can pass now; when no range can go on, the first range's
wait runs and is the finding (a deadlock every schedule meets).

:class:`ScopeSchedule` is that part of the simulator (``simulation.Simulator``, beside
``schedule.Schedule``, whose ``run``, ``run_for``'s frames and ``protocol`` it uses).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import nodes as ir
from .evaluate import Unknown, as_int, evaluate
from .protocol import ELECT, Frame, barrier_call
from .schedule import linear


@dataclasses.dataclass
class _Level:
    """Statements a range is running through, each with the frame it runs in; for a loop entered
    iteration by iteration, the loop, its variable's value and where it ends."""

    stmts: list  # (statement, frame)
    index: int = 0
    loop: ir.For | None = None
    value: int = 0
    end: int = 0
    frame: Frame | None = None  # the frame around the loop


@dataclasses.dataclass
class _Range:
    """One thread range of a scope run: its threads and its cursor (levels, innermost last)."""

    mask: np.ndarray
    levels: list


class ScopeSchedule:
    """Needs the simulator's ``env``, ``tid``, ``protocol``, ``slots``, ``loops``, ``events`` and
    its ``run``."""

    def run_scope_run(self, scope_run: ir.ScopeRun, active, frame: Frame):
        ranges = []
        for (first, count), scopes in scope_run.sides:
            stmts = []
            for sc in scopes:
                self.env[sc.var] = self.tid - sc.first
                inner = dataclasses.replace(frame, line=sc.loc.line if sc.loc is not None else frame.line)
                stmts += [(st, inner) for st in _stmts(sc.body)]
            ranges.append(_Range(active & (self.tid >= first) & (self.tid < first + count), [_Level(stmts)]))
        while True:
            going = [r for r in ranges if self._next(r) is not None]
            if not going:
                return
            ready = [r for r in going if self._can_start(r)]
            if ready:
                self._step(ready[0])
                continue
            # Every range waits: a deadlock whatever the schedule. The first range's wait is the
            # finding (marked, so the diagnosis does not take the others' later arrivals for a way out).
            first = len(self.events)
            self._step(going[0])
            blocked = next((e for e in self.events[first:] if e["kind"] == "wait" and not e["completes"]), None)
            if blocked is not None:
                blocked["circular"] = len(going)

    def _next(self, r: _Range):
        """The range's next statement to run whole, (statement, frame), entering the sequences,
        loops and uniform branches with barrier operations in front of it; None when it is done."""
        while r.levels:
            level = r.levels[-1]
            if level.index == len(level.stmts):
                if level.loop is not None and level.value + 1 < level.end:
                    self._iterate(r, level, level.value + 1)
                    continue
                if level.loop is not None:
                    self.env.pop(level.loop.var, None)
                r.levels.pop()
                continue
            stmt, frame = level.stmts[level.index]
            entered = self._enter(r, stmt, frame)
            if entered is None:
                return stmt, frame
            level.index += 1
            if entered:
                r.levels.append(entered)
        return None

    def _enter(self, r: _Range, stmt, frame: Frame):
        """The level ``stmt`` opens (False: one with nothing to run), or None where it runs whole."""
        if id(stmt) not in self.protocol:
            return None
        if isinstance(stmt, ir.SeqStmt):
            return _Level([(s, frame) for s in stmt.stmts])
        if isinstance(stmt, ir.For):
            try:
                start = as_int(evaluate(stmt.start, self.env))
                extent = as_int(evaluate(stmt.extent, self.env))
            except Unknown:
                return None  # run whole: run_for reports it
            line = stmt.loc.line if stmt.loc is not None else frame.line
            self.loops.append({"var": stmt.var.name, "start": start, "extent": extent, "kind": "loop",
                               "stages": None, "line": line})
            if extent <= 0:
                return False
            level = _Level([], loop=stmt, end=start + extent, frame=dataclasses.replace(frame, line=line))
            self._iterate(r, level, start)
            return level
        if isinstance(stmt, ir.IfThenElse) and not (isinstance(stmt.cond, ir.Call) and ELECT.match(stmt.cond.name)):
            try:
                value = evaluate(stmt.cond, self.env)
            except Unknown:
                return None
            taken = value[r.mask] if isinstance(value, np.ndarray) else np.array([value])
            if taken.size and not (taken.all() or not taken.any()):
                return None  # differs between the range's threads: run whole
            body = stmt.then_body if taken.size and taken[0] else stmt.else_body
            inner = dataclasses.replace(frame, line=stmt.loc.line if stmt.loc is not None else frame.line)
            return _Level([(s, inner) for s in _stmts(body)]) if body is not None else False
        return None

    def _iterate(self, r: _Range, level: _Level, value: int):
        loop, frame = level.loop, level.frame
        self.env[loop.var] = value
        loops = frame.loops + ((loop, value),)  # frames as run_for gives a plain loop's
        iteration = frame.iteration if frame.stage != "body" else linear(loops)
        inner = dataclasses.replace(frame, loops=loops, iteration=iteration)
        level.value, level.index = value, 0
        level.stmts = [(s, inner) for s in _stmts(loop.body)]

    def _step(self, r: _Range):
        stmt, frame = self._next(r)
        r.levels[-1].index += 1
        self.run(stmt, r.mask, frame)

    def _can_start(self, r: _Range) -> bool:
        """Whether the range's next statement is no wait, or a wait its slot lets pass now."""
        stmt, _ = self._next(r)
        call = barrier_call(stmt) if isinstance(stmt, ir.Evaluate) else None
        if call is None or call.name != ".wait":
            return True
        return self._passes(call, r.mask)

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
    if body is None:
        return []
    return list(body.stmts) if isinstance(body, ir.SeqStmt) else [body]
