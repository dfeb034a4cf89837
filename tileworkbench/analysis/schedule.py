"""How the barrier simulation walks a lowered kernel: one thread block (block indices 0), every
thread at once ("lockstep"), loops with barrier operations unrolled with concrete loop
variables, so slot and parity expressions are evaluated exactly as the generated code evaluates
them. ``if`` narrows the set of threads: ``tw::shuffle_elect<N>()`` keeps one thread of each
group of ``N``, other conditions are evaluated per thread (:mod:`.evaluate`).

Warp-specialised code (``WarpSpecialize``: a producer and a consumer side running their own
loops at the same time) is run with one schedule a correct protocol allows: the statements before
each side's loop, then the two loops' iterations interleaved (producer iteration *k*, consumer
iteration *k*, ...), then what follows each loop (:class:`RolePath` finds those parts). In a
persistent kernel each side's role loop sits in a tile loop: block 0 of a one-block grid stands
for every block, and :data:`SIMULATED_TILES` tiles are run, each as above (so the stage counter,
the barriers' phases and the epilogue tile are followed from one tile into the next).

:class:`Schedule` is that part of the simulator (``simulation.Simulator``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import nodes as ir
from ..ir.visitor import collect
from .evaluate import Unknown, as_int, evaluate
from .protocol import ELECT, Frame

SIMULATED_TILES = 2  # tiles of a persistent kernel's tile loop that the simulation runs


def distinct(values: np.ndarray) -> list:
    """The distinct values of a small integer array, ascending (as ``np.unique`` gives them).
    ``np.unique`` asks ``np.ma`` whether the array is masked, and that import cost every process's
    first simulation 10-25 ms, overlapping NVRTC; the arrays here have at most a block's threads."""
    return sorted(set(values.tolist()))


@dataclasses.dataclass
class RolePath:
    """One side of a ``WarpSpecialize``, in the parts the schedule runs it in: the statements
    before the role loop, the conditions around it (the producer's one warp), the persistent tile
    loop around it (or None) with the statements before and after the role loop inside it, the role
    loop itself (None where the side has none), and the statements after."""

    before: list
    conditions: list
    tiles: ir.For | None
    inner_before: list
    loop: ir.For | None
    inner_after: list
    after: list


def role_path(side) -> RolePath:
    """The :class:`RolePath` of one side of a ``WarpSpecialize``: the loop (or a persistent
    kernel's tile loop around it) stands in the side's sequence or inside an ``if``, there possibly
    after scalar declarations (``carry_stage_counters``), which run as statements before the loop."""
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
            if isinstance(u, ir.For) and _role(u):
                return RolePath(stmts[:i], conds, None, under[:j], u, under[j + 1:], stmts[i + 1:])
            if isinstance(u, ir.For) and u.annotations.get(ir.TILE_LOOP):
                body = list(u.body.stmts) if isinstance(u.body, ir.SeqStmt) else [u.body]
                for k, b in enumerate(body):
                    if isinstance(b, ir.For) and _role(b):
                        return RolePath(stmts[:i] + under[:j], conds, u, body[:k], b, body[k + 1:],
                                        under[j + 1:] + stmts[i + 1:])
    return RolePath(stmts, [], None, [], None, [], [])


@dataclasses.dataclass
class _Side:
    """One side of a ``WarpSpecialize`` as the schedule runs it: its path and its threads."""

    path: RolePath
    mask: np.ndarray

    @property
    def tiles(self):
        return self.path.tiles

    @property
    def loop(self):
        return self.path.loop


def _role(loop: ir.For) -> str | None:
    return loop.pipeline.role if loop.pipeline is not None else None


def _steady(loop: ir.For) -> bool:
    return loop.pipeline is not None and loop.pipeline.steady


def linear(loops) -> int:
    """Execution count of the innermost body over the enclosing loops (0-based)."""
    count = 0
    for loop, value in loops:
        extent = ir.const_int(loop.extent) or 1
        count = count * extent + (value - (ir.const_int(loop.start) or 0))
    return count


def enter_scope(node: ir.ThreadScope, tid, env: dict, active):
    """The threads of a ``T.ws`` scope among ``active`` (``tid``: every thread's index); binds the
    scope's thread index in ``env``."""
    env[node.var] = tid - node.first
    return active & (tid >= node.first) & (tid < node.first + node.count)


class Schedule:
    """The walk (module doc). Needs the simulator's ``env``, ``tid``, ``threads``, ``relevant``,
    ``protocol``, ``declared``, ``loops``, ``observers`` and its ``finding`` and ``run_call``."""

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
        for v in distinct(value[active]):
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
        leaderless = [g for g in distinct(groups[active]) if not taken[groups == g].any()]
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
                for o in self.observers:
                    o.scan(stmt, active, frame)
        elif isinstance(stmt, ir.Allocate):
            if stmt.buffer.scope == "barrier":
                self.declared[stmt.buffer.name] = stmt.buffer
        elif id(stmt) not in self.relevant:
            return
        elif id(stmt) not in self.protocol:  # touches what an observer follows, no barrier inside
            for o in self.observers:
                o.scan(stmt, active, frame)
        elif isinstance(stmt, ir.WarpSpecialize):
            self.run_split(stmt, active, frame)
        elif isinstance(stmt, ir.ThreadScope):
            line = stmt.loc.line if stmt.loc is not None else frame.line
            self.run(stmt.body, enter_scope(stmt, self.tid, self.env, active), dataclasses.replace(frame, line=line))
        elif isinstance(stmt, ir.For):
            self.run_for(stmt, active, frame)
        elif isinstance(stmt, ir.IfThenElse):
            self.run_if(stmt, active, frame)
        elif isinstance(stmt, ir.While):
            line = stmt.loc.line if stmt.loc is not None else frame.line
            self.finding(("loop", id(stmt)), "warning", "not_evaluated",
                         f"the while loop on {stmt.cond} runs a number of times only the GPU knows; its "
                         f"barrier operations are not simulated", frame=frame, line=line)
        elif isinstance(stmt, ir.Evaluate):
            self.run_call(stmt, active, frame)

    def run_seq(self, stmts, active, frame: Frame):
        stmts = ir.scope_runs(stmts) if any(isinstance(s, ir.ThreadScope) for s in stmts) else stmts
        for i, s in enumerate(stmts):
            if isinstance(s, ir.ScopeRun):  # scopes of different threads (scope_schedule)
                self.run_scope_run(s, active, frame)
            elif isinstance(s, ir.Comment) and s.text.startswith("prologue"):
                # inject_software_pipeline's prologue; simplify may have unrolled its loop away.
                k0 = next((ir.const_int(x.start) for x in stmts[i + 1:]
                           if isinstance(x, ir.For) and _steady(x)), 0)
                frame = dataclasses.replace(frame, stage="prologue", iteration=k0 or 0)
            elif isinstance(s, ir.For) and _steady(s) and frame.stage == "prologue":
                frame = dataclasses.replace(frame, stage="body", iteration=None)
            self.run(s, active, frame)

    def run_for(self, loop: ir.For, active, frame: Frame):
        line = loop.loc.line if loop.loc is not None else frame.line
        bounds = _bounds(self, loop, frame, f"the loop over {loop.var.name} has", "not simulated")
        if bounds is None:
            return
        start, extent = bounds
        stages = loop.pipeline.stages if loop.pipeline is not None and loop.pipeline.part != "prologue" else None
        kind = "prologue" if loop.pipeline is not None and loop.pipeline.part == "prologue" else \
            "pipelined" if _steady(loop) else "loop"
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
                                            linear(loops))
            self.run(loop.body, active, inner)
        self.env.pop(loop.var, None)

    def run_split(self, node: ir.WarpSpecialize, active, frame: Frame):
        """Both sides of a warp-specialised block, their role loops interleaved (module doc)."""
        first = node.consumer_threads
        sides = []
        for body, mask in ((node.producer, active & (self.tid >= first)), (node.consumer, active & (self.tid < first))):
            path = role_path(body)
            self.run_seq(path.before, mask, frame)
            for cond in path.conditions:  # the ifs around the loop (the producer's one warp)
                value = evaluate(cond, self.env)
                mask = mask & (value.astype(bool) if isinstance(value, np.ndarray) else bool(value))
            sides.append(_Side(path, mask))
        loops = [side.loop for side in sides if side.loop is not None]
        tile_loops = [side.tiles for side in sides if side.tiles is not None]
        if len(loops) != 2 or len(tile_loops) not in (0, 2):
            self.finding(("split", id(node)), "warning", "not_evaluated",
                         "a warp-specialised side has no role loop; its sides run one after the other",
                         frame=frame)
            for side in sides:
                for part in (side.tiles or side.loop, side.path.after):
                    self.run(ir.seq(part) if isinstance(part, list) else part, side.mask, frame)
            return
        if tile_loops:
            count = min(SIMULATED_TILES, tile_loops[0].annotations[ir.TILE_LOOP])
            for side in sides:
                self.loops.append({"var": side.tiles.var.name, "start": 0, "extent": count, "kind": "tiles",
                                   "line": side.tiles.loc.line if side.tiles.loc is not None else frame.line,
                                   "role": _role(side.loop)})
            for value in range(count):
                tile_frames = []
                for side in sides:
                    self.env[side.tiles.var] = value
                    tile_frame = dataclasses.replace(frame, loops=frame.loops + ((side.tiles, value),))
                    self.run_seq(side.path.inner_before, side.mask, tile_frame)
                    tile_frames.append(tile_frame)
                self.interleave(sides, tile_frames)
                for side, tile_frame in zip(sides, tile_frames):
                    self.run_seq(side.path.inner_after, side.mask, tile_frame)
            for side in sides:
                self.env.pop(side.tiles.var, None)
        else:
            for side in sides:
                self.run_seq(side.path.inner_before, side.mask, frame)
            self.interleave(sides, [frame, frame])
            for side in sides:
                self.run_seq(side.path.inner_after, side.mask, frame)
        for side in sides:
            self.run_seq(side.path.after, side.mask, frame)

    def interleave(self, sides, frames):
        """The two role loops, iteration by iteration: producer k, consumer k, producer k + 1, ..."""
        loops = [side.loop for side in sides]
        bounds = _bounds(self, loops[0], frames[0], f"the warp-specialised loops over {loops[0].var.name} have",
                             "their barrier protocol is not simulated")
        if bounds is None:  # a trip count of sizes only the call knows (T.dynamic)
            return
        start, extent = bounds
        stages = loops[0].pipeline.stages
        for loop, frame in zip(loops, frames):
            self.loops.append({"var": loop.var.name, "start": start, "extent": extent, "kind": "pipelined",
                               "stages": stages, "line": loop.loc.line if loop.loc is not None else frame.line,
                               "role": _role(loop)})
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
        match = ELECT.match(cond.name) if isinstance(cond, ir.Call) else None
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

    def value(self, expr, who, stmt, frame) -> int:
        try:
            v = evaluate(expr, self.env)
            return int(v[who][0]) if isinstance(v, np.ndarray) else int(v)
        except Unknown as why:
            self.finding(("value", id(stmt)), "warning", "not_evaluated",
                         f"cannot evaluate {expr} ({why}); taken as 0", frame=frame)
            return 0


def _bounds(schedule, loop: ir.For, frame: Frame, what: str, consequence: str):
    """(start, extent) of ``loop``, or None, said as a finding (``what`` names the loop and its verb),
    where they are not constants."""
    try:
        return as_int(evaluate(loop.start, schedule.env)), as_int(evaluate(loop.extent, schedule.env))
    except Unknown as why:
        schedule.finding(("loop", id(loop)), "warning", "not_evaluated",
                         f"{what} no constant extent ({why}); {consequence}", frame=frame,
                         line=loop.loc.line if loop.loc is not None else frame.line)
        return None
