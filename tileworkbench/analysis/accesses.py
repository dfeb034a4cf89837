"""The protocol checker's data rules: which shared elements TMA loads write and on which phase
they land, which elements threads, gemms and TMA stores read and write, and the findings that
follow (``read_before_landed``, ``overwrite_in_use``, ``overwrite_in_flight``,
``store_source_reused``). :class:`DataRules` is that part of the checker."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .diagnosis import at, frm, iteration_of
from .footprints import WHOLE


@dataclass
class Read:
    """Shared elements some threads read since the last block barrier (per thread [lo, hi])."""

    buffer: str
    lo: np.ndarray
    hi: np.ndarray
    threads: np.ndarray
    what: str
    line: int | None
    iteration: int | None
    stmt: int  # id of the reading statement
    released: dict = field(default_factory=dict)  # (slot key, phase) -> readers that arrived since


@dataclass
class Load:
    """A TMA load that not every thread has observed yet."""

    buffer: str
    lo: int
    hi: int
    key: tuple  # (barrier, slot)
    phase: int  # the phase its bytes count towards
    issuer: np.ndarray
    event: dict
    reported: bool = False  # a finding names it already (no "never waited" on top)


@dataclass
class Store:
    """A TMA store whose shared source may still be read (no store wait by its issuer yet)."""

    buffer: str
    lo: int
    hi: int
    issuer: np.ndarray
    line: int | None
    iteration: int | None


def overlap(lo, hi, a: int, b: int):
    return (lo <= b) & (hi >= a)


class DataRules:
    """Needs the checker's ``loads``, ``reads``, ``stores``, ``stuck``, ``last_wait``,
    ``seen_of`` and ``report``."""

    def live(self, buf):
        """The loads into ``buf`` worth checking against (not on a deadlocked slot)."""
        return [ld for ld in self.loads if ld.buffer == buf.name and ld.key not in self.stuck]

    def read(self, stmt, buf, lo, hi, who, frame, line, what: str, store=False):
        for load in self.live(buf):
            hit = who & overlap(lo, hi, load.lo, load.hi)
            if (hit & (self.seen_of(load.key) < load.phase)).any():
                self.read_before_landed(stmt, buf, load, frame, line, what)
        if store:
            self.stores.append(Store(buf.name, int(lo[who].min()), int(hi[who].max()), who.copy(), line,
                                      frame.iteration))
            return
        for rec in self.reads:  # the same statement again on the same elements: one record
            both = who & rec.threads
            if rec.stmt == id(stmt) and rec.buffer == buf.name and \
                    (lo[both] == rec.lo[both]).all() and (hi[both] == rec.hi[both]).all():
                rec.lo = np.minimum(rec.lo, np.where(who, lo, rec.lo))
                rec.hi = np.maximum(rec.hi, np.where(who, hi, rec.hi))
                rec.threads, rec.iteration, rec.released = rec.threads | who, frame.iteration, {}
                return
        empty_lo, empty_hi = np.where(who, lo, WHOLE), np.where(who, hi, -1)  # non-readers: nothing
        self.reads.append(Read(buf.name, empty_lo, empty_hi, who.copy(), what, line, frame.iteration, id(stmt)))

    def read_before_landed(self, stmt, buf, load: Load, frame, line, what):
        name, slot = load.key
        wait = self.last_wait.get(load.key)
        wait = wait if wait is not None and wait["seq"] > load.event["seq"] else None
        if wait is not None:
            why = (f"the wait on {name}[{slot}]{at(wait['line'])}{iteration_of(wait['iteration'])} waits for "
                   f"parity {wait['parity']}, which returns on phase {wait['phase']}, before the load's phase "
                   f"{load.phase} completes")
            where, mark = wait["line"], wait
        else:
            why = f"no wait on {name}[{slot}] observes the phase the load completes (phase {load.phase}) first"
            where, mark = line, load.event
        load.reported = True
        self.report(("raw", id(stmt), load.event["stmt"]), "error", "read_before_landed",
                    f"{what} reads {buf.name}{at(line)}{iteration_of(frame.iteration)} before the TMA load"
                    f"{frm(load.event['line'])}{iteration_of(load.event['iteration'])} has landed: {why}",
                    name, slot, frame, where, mark)

    def ordered(self, rec: Read, issuer) -> bool:
        """Whether some arrive/wait pair orders ``rec`` (by readers other than ``issuer``)
        before what ``issuer`` does now."""
        need = rec.threads & ~issuer
        for (key, phase), arrived in rec.released.items():
            if not (need & ~arrived).any() and (self.seen_of(key)[issuer] >= phase).all():
                return True
        return False

    def store_reused(self, stmt, buf, lo, hi, frame, line, by: str):
        for st in self.stores:
            if st.buffer == buf.name and overlap(np.asarray(lo), np.asarray(hi), st.lo, st.hi).any():
                self.report(("reuse", id(stmt), st.line), "warning", "store_source_reused",
                            f"{by} {buf.name}{at(line)}{iteration_of(frame.iteration)} while the TMA "
                            f"store from it{at(st.line)}{iteration_of(st.iteration)} may still be reading it: "
                            "call T.tma_store_wait(read=True) before reusing the buffer", frame=frame, line=line)

    def write(self, stmt, buf, lo, hi, who, frame, line):
        """Threads write shared elements."""
        for load in self.live(buf):
            hit = who & overlap(lo, hi, load.lo, load.hi) & (self.seen_of(load.key) < load.phase)
            if hit.any():
                name, slot = load.key
                self.report(("waw", id(stmt), load.event["stmt"]), "error", "overwrite_in_flight",
                            f"threads write {buf.name}{at(line)}{iteration_of(frame.iteration)} while the TMA load "
                            f"into it{frm(load.event['line'])}{iteration_of(load.event['iteration'])} may still "
                            f"be writing: wait on {name}[{slot}] for phase {load.phase} first",
                            name, slot, frame, line, load.event)
        self.store_reused(stmt, buf, lo[who], hi[who], frame, line, "threads overwrite")

    def tma_write(self, stmt, buf, lo: int, hi: int, issuer, key, phase, event, frame):
        name, slot = key
        line = event["line"]
        for rec in self.reads:
            if rec.buffer != buf.name:
                continue
            hit = rec.threads & ~issuer & overlap(rec.lo, rec.hi, lo, hi)
            if hit.any() and not self.ordered(rec, issuer):
                self.report(("war", id(stmt), rec.line), "error", "overwrite_in_use",
                            f"the TMA load{at(line)}{iteration_of(frame.iteration)} overwrites {buf.name} while "
                            f"{rec.what}{at(rec.line)}{iteration_of(rec.iteration)} may still read it: no block "
                            "barrier (or arrive/wait pair) orders that read before the load is issued",
                            name, slot, frame, line, event)
        self.store_reused(stmt, buf, lo, hi, frame, line, "a TMA load overwrites")
        kept = []
        for load in self.loads:
            if load.buffer == buf.name and load.lo <= hi and load.hi >= lo:
                if load.key not in self.stuck and (self.seen_of(load.key)[issuer] < load.phase).any():
                    self.report(("tma-waw", id(stmt), load.event["stmt"]), "error", "overwrite_in_flight",
                                f"the TMA load{at(line)}{iteration_of(frame.iteration)} writes {buf.name} while "
                                f"the TMA load{frm(load.event['line'])}{iteration_of(load.event['iteration'])} "
                                f"into the same elements has not been waited for (phase {load.phase} of "
                                f"{load.key[0]}[{load.key[1]}])", name, slot, frame, line, event)
                continue  # the newer load supersedes it
            kept.append(load)
        self.loads = kept + [Load(buf.name, lo, hi, key, phase, issuer.copy(), event)]
