"""The sides of a block that run side by side on the tile-level interpreter (``machine``): the
roles of a warp-specialised block, or the threads of a run of ``T.ws`` scopes. Each side is a
generator that runs up to its next wait that cannot complete yet (``Blocked``); all blocked at
once is a deadlock (the caller's to report)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .machine import Runner


@dataclass
class Blocked:
    """Why a side stopped: the wait it is in."""

    barrier: str
    slot: int
    parity: int
    line: int | None
    loops: tuple


class Side:
    """One side of a warp-specialised block (or the threads of a run of ``T.ws`` scopes): its
    statements as a generator, on its threads; ``label`` is who runs it for the race records."""

    def __init__(self, runner: Runner, body, keep: np.ndarray, label=None):
        b = runner.b
        self.label = label if label is not None else ("role", id(self))
        self.runner, self.threads = runner, b.active[keep]
        # its own variables: the per-thread ones narrowed to its threads
        self.vars = {v: (x[keep] if isinstance(x, np.ndarray) and x.shape == b.active.shape else x)
                     for v, x in b.vars.items()}
        self.gen = self._run(body)
        self.done = False
        self.blocked: Blocked | None = None

    def _run(self, body):
        b = self.runner.b
        b.active = self.threads
        yield from self.runner.run(body)


def run_sides(runner: Runner, sides):
    """Runs the sides in turn, each until its next blocked wait, until all are done; all blocked
    at once is a deadlock."""
    b = runner.b
    outer_active, outer_loops, outer_vars = b.active, list(b.loops), b.vars
    outer_seen, outer_side = b.seen, b.side
    states = {id(side): (side.threads, list(outer_loops), side.vars, dict(outer_seen), side.label) for side in sides}
    while not all(side.done for side in sides):
        progressed = False
        for side in sides:
            if side.done:
                continue
            b.active, b.loops, b.vars, b.seen, b.side = states[id(side)]
            try:
                event = next(side.gen)
            except StopIteration:
                side.done, event = True, None
            states[id(side)] = (b.active, b.loops, b.vars, b.seen, b.side)
            if event is None or not (side.blocked is not None and _same_wait(side.blocked, event)):
                progressed = True
            side.blocked = event
        if not progressed:
            waits = [side.blocked for side in sides if not side.done]
            yield waits[0]  # the caller decides: another side outside may still complete it
    b.active, b.loops, b.vars = outer_active, outer_loops, outer_vars
    for state in states.values():  # after the block's sides join, what either waited for is known
        for key, phase in state[3].items():
            outer_seen[key] = max(outer_seen.get(key, 0), phase)
    b.seen, b.side = outer_seen, outer_side


def _same_wait(a: Blocked, b) -> bool:
    return isinstance(b, Blocked) and (a.barrier, a.slot, a.parity, a.loops) == (b.barrier, b.slot, b.parity, b.loops)
