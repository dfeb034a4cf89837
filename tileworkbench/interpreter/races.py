"""Races the CPU interpreter reports while it runs a block: a read of a shared tile before the
TMA load filling it is known to have landed there (``InFlight``: the load's box and the barrier
phase it lands with, against the phases the reading side has waited for), a write of a tile
another side has read with no arrival of that side after the read waited for where the write is
issued, and a read of a tile another side's threads wrote with no arrival of theirs
after the write waited for where the read is (TileLang's hand-written MLA kernels'
second consumer reading the first's ``sum_exp_shared``, which nothing orders). A side is the
block, a role of a warp-specialised block or a ``T.ws`` scope; accesses within one side are
``insert_thread_syncs``' business. :class:`RaceRecords` is that part of ``machine.Block``."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import KernelRuntimeError
from ..ir import nodes as ir


@dataclass
class InFlight:
    """A TMA load into shared memory: its box, and the barrier phase that says it has landed."""

    buffer: ir.Buffer
    lo: tuple
    hi: tuple
    key: tuple  # (barrier buffer name, slot)
    phase: int  # it has landed once the slot has completed this many phases
    line: int | None


@dataclass
class Access:
    """A read (``readers``) or a write (``writers``: a store, a tile operation, the landing of its
    thread copies) of a shared box by one side (a role of a warp-specialised block, a ``T.ws``
    scope, or the block), with the barrier phases its later arrivals contribute to (``released``)."""

    buffer: ir.Buffer
    lo: tuple
    hi: tuple
    side: object
    line: int | None
    released: dict = field(default_factory=dict)  # (barrier, slot) -> phase


def _meets(lo, hi, other_lo, other_hi) -> bool:
    return all(a <= d and c <= b for a, b, c, d in zip(lo, hi, other_lo, other_hi))


def describe_side(side) -> str:
    if side == "block":
        return "the block"
    if isinstance(side, tuple) and side[0] == "ws":
        return f"threads {side[1]}-{side[1] + side[2] - 1} (a T.ws scope)"
    return "a role of the warp-specialised block"


class RaceRecords:
    """Needs the block's ``in_flight``, ``readers``, ``writers``, ``seen``, ``side`` and ``line``."""

    def reading(self, buf, lo, hi):
        lo, hi = tuple(int(x) for x in lo), tuple(int(x) for x in hi)
        for w in self.writers:
            if w.buffer is buf and w.side != self.side and _meets(lo, hi, w.lo, w.hi) and \
                    not any(self.seen.get(k, 0) >= p for k, p in w.released.items()):
                at = f" at line {self.line}" if self.line else ""
                frm = f" at line {w.line}" if w.line else ""
                raise KernelRuntimeError(
                    f"race: the read of {buf.name}{at} by {describe_side(self.side)} may come before the write of "
                    f"it{frm} by {describe_side(w.side)}: no arrival of the writers after that write is waited for "
                    "before the read (arrive on a barrier after the write and wait on it before the read)")
        self.readers = [r for r in self.readers if not (r.buffer is buf and r.side == self.side and r.lo == lo
                                                         and r.hi == hi)]
        self.readers.append(Access(buf, lo, hi, self.side, self.line))

    def written(self, buf, lo, hi):
        """This side's threads wrote ``buf``'s box [lo, hi] (what another side reads of it must be
        ordered after an arrival of theirs): replaces this side's records the box covers."""
        lo, hi = tuple(int(x) for x in lo), tuple(int(x) for x in hi)
        self.writers = [w for w in self.writers if not (w.buffer is buf and w.side == self.side and all(
            a <= c and d <= b for a, b, c, d in zip(lo, hi, w.lo, w.hi)))]
        self.writers.append(Access(buf, lo, hi, self.side, self.line))

    def writing(self, buf, lo, hi, what: str):
        """``what`` (a TMA load, threads' stores) overwrites ``buf``'s box [lo, hi]: a race where
        another side read it and no arrival of that side after the read has been waited for here."""
        keep = []
        for r in self.readers:
            if r.buffer is not buf or not _meets(lo, hi, r.lo, r.hi):
                keep.append(r)
                continue
            if r.side != self.side and not any(self.seen.get(k, 0) >= p for k, p in r.released.items()):
                at = f" at line {self.line}" if self.line else ""
                frm = f" at line {r.line}" if r.line else ""
                raise KernelRuntimeError(
                    f"race: {what}{at} overwrites {buf.name} while the read of it{frm} by another role may still "
                    f"be running: no arrival after that read is waited for before the write")
        self.readers = keep

    def arrived(self, key, phase):
        for r in (*self.readers, *self.writers):
            if r.side == self.side and key not in r.released:
                r.released[key] = phase

    def check_landed(self, buf, lo, hi):
        """Reading ``buf``'s box [lo, hi] before a TMA load into it is known to have landed: a race."""
        for load in self.in_flight:
            if load.buffer is buf and _meets(lo, hi, load.lo, load.hi) \
                    and self.seen.get(load.key, 0) < load.phase:
                at = f" at line {self.line}" if self.line else ""
                frm = f" at line {load.line}" if load.line else ""
                raise KernelRuntimeError(
                    f"race: the read of {buf.name}{at} comes before the TMA load into it{frm} is known to have "
                    f"landed: wait on {load.key[0]}[{load.key[1]}] for its phase {load.phase - 1} (parity "
                    f"{(load.phase - 1) % 2}) first")

    def land(self, buf, lo, hi, key, phase, line):
        """A TMA load into ``buf``'s box [lo, hi], landing with ``phase`` of barrier slot ``key``."""
        self.in_flight = [x for x in self.in_flight
                          if not (x.buffer is buf and x.lo == tuple(lo) and x.hi == tuple(hi))]
        self.in_flight.append(InFlight(buf, tuple(lo), tuple(hi), key, phase, line))
