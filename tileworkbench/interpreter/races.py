"""Races the CPU interpreter reports while it runs a block: a read of a shared tile before the
TMA load filling it is known to have landed there (``InFlight``: the load's box and the barrier
phase it lands with, against the phases the reading side has waited for), and a write of a tile
another role has read with no arrival of that role after the read waited for where the write is
issued (``Reader``). :class:`RaceRecords` is that part of ``machine.Block``."""

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
class Reader:
    """A read of a shared box by one side (a role of a warp-specialised block, a ``T.ws`` scope, or
    the block), with the barrier phases its later arrivals contribute to (``released``)."""

    buffer: ir.Buffer
    lo: tuple
    hi: tuple
    side: object
    line: int | None
    released: dict = field(default_factory=dict)  # (barrier, slot) -> phase


class RaceRecords:
    """Needs the block's ``in_flight``, ``readers``, ``seen``, ``side`` and ``line``."""

    def reading(self, buf, lo, hi):
        lo, hi = tuple(int(x) for x in lo), tuple(int(x) for x in hi)
        self.readers = [r for r in self.readers if not (r.buffer is buf and r.side == self.side and r.lo == lo
                                                         and r.hi == hi)]
        self.readers.append(Reader(buf, lo, hi, self.side, self.line))

    def writing(self, buf, lo, hi, what: str):
        """``what`` (a TMA load, threads' stores) overwrites ``buf``'s box [lo, hi]: a race where
        another side read it and no arrival of that side after the read has been waited for here."""
        keep = []
        for r in self.readers:
            if r.buffer is not buf or not all(a <= d and c <= b for a, b, c, d in zip(lo, hi, r.lo, r.hi)):
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
        for r in self.readers:
            if r.side == self.side and key not in r.released:
                r.released[key] = phase

    def check_landed(self, buf, lo, hi):
        """Reading ``buf``'s box [lo, hi] before a TMA load into it is known to have landed: a race."""
        for load in self.in_flight:
            if load.buffer is buf and all(a <= d and c <= b for a, b, c, d in zip(lo, hi, load.lo, load.hi)) \
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
