"""Who touched what, for the thread-level interpreter's race checks.

Between two block barriers each byte of shared memory remembers the threads that wrote it (and
whether by atomics) and those that read it, and which threads a named barrier (a scope's) has
ordered those accesses before (``Accesses``). A thread reading a byte
another thread wrote since the barrier, or writing one another thread read or wrote, is a
``KernelRuntimeError`` naming the buffer, the threads and both lines, unless both wrote the same
bytes (threads storing one value alike) or both updated it atomically; threads of one store writing
different values to one element are a race too. A TMA store reads its tile until the issuing thread
waits on it (``tma_store_wait``): a write to the tile before that is a race, and after it the tile
counts as read by that thread. Across blocks (run one after another) a block reading, or
overwriting with another value, a global element an earlier block wrote is a race: blocks are not
ordered on the GPU (atomic updates excepted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import KernelRuntimeError
from .values import Unsupported

if TYPE_CHECKING:
    from .thread_memory import Space

NONE = -1


class Accesses:
    """Per byte of shared memory, who accessed it (written, or read) since the last block barrier,
    as two ranges of thread indices: ``u`` (``u_lo``..``u_hi``) the threads whose accesses no barrier
    has ordered yet (one thread where ``u_lo == u_hi``; else some threads of the range), ``s``
    (``s_lo``..``s_hi``) the threads a named barrier has ordered the earlier accesses before (so
    those threads, and only they, may touch the byte again). ``NONE`` where a range is empty."""

    def __init__(self, nbytes: int):
        self.u_lo, self.u_hi = np.full(nbytes, NONE, np.int32), np.full(nbytes, NONE, np.int32)
        self.s_lo, self.s_hi = np.full(nbytes, NONE, np.int32), np.full(nbytes, NONE, np.int32)

    def conflicts(self, pos: np.ndarray, tids: np.ndarray) -> np.ndarray:
        """Where thread ``tids`` touching byte ``pos`` is not ordered after an access recorded there."""
        u_lo, u_hi, s_lo, s_hi = self.u_lo[pos], self.u_hi[pos], self.s_lo[pos], self.s_hi[pos]
        unordered = (u_lo != NONE) & ~((u_lo == u_hi) & (u_lo == tids))
        unseen = (s_lo != NONE) & ((tids < s_lo) | (tids > s_hi))
        return unordered | unseen

    def who(self, b: int) -> str:
        """Who accessed byte ``b``, for a message."""
        lo, hi = int(self.u_lo[b]), int(self.u_hi[b])
        if lo == NONE:
            return f"threads before a barrier that only threads {int(self.s_lo[b])}-{int(self.s_hi[b])} met"
        return f"thread {lo}" if lo == hi else f"some of threads {lo}-{hi}"

    def add(self, p: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        """Threads ``lo``..``hi`` accessed bytes ``p`` (one store or load: each position once)."""
        empty = self.u_lo[p] == NONE
        self.u_lo[p] = np.where(empty, lo, np.minimum(self.u_lo[p], lo))
        self.u_hi[p] = np.where(empty, hi, np.maximum(self.u_hi[p], hi))

    def only(self, p: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        """Threads ``lo``..``hi`` wrote bytes ``p``, ordered after whatever was recorded there (a
        write supersedes: a thread not ordered after the earlier writes is not after this one either)."""
        self.u_lo[p], self.u_hi[p] = lo, hi
        self.s_lo[p] = self.s_hi[p] = NONE

    def empty(self) -> np.ndarray:
        return (self.u_lo == NONE) & (self.s_lo == NONE)

    def clear(self):
        for a in (self.u_lo, self.u_hi, self.s_lo, self.s_hi):
            a.fill(NONE)

    def named_barrier(self, first: int, last: int):
        """Threads ``first``..``last`` met at a named barrier: the accesses they alone made, unordered
        so far, and those ordered before threads that meet them there, are ordered before all of
        them now. An access of another thread stays as it was (it is not ordered before anyone)."""
        u_none, s_none = self.u_lo == NONE, self.s_lo == NONE
        inside = ~u_none & (self.u_lo >= first) & (self.u_hi <= last)
        meets = ~s_none & (self.s_lo <= last) & (self.s_hi >= first)
        grow = u_none & meets  # seen by some of them, who pass it on to the rest
        settle = inside & (s_none | meets)
        self.s_lo[grow] = np.minimum(self.s_lo[grow], first)
        self.s_hi[grow] = np.maximum(self.s_hi[grow], last)
        self.s_lo[settle], self.s_hi[settle] = first, last
        self.u_lo[settle] = self.u_hi[settle] = NONE


class SharedRecords:
    """Per byte of shared memory, since the last block barrier: who wrote it (whether by atomics) and
    who read it (``Accesses``), the lines; and the thread whose TMA store still reads the byte."""

    def __init__(self, nbytes: int):
        self.writes = Accesses(nbytes)
        self.atomic = np.zeros(nbytes, bool)
        self.reads = Accesses(nbytes)
        self.wline = np.zeros(nbytes, np.int32)
        self.rline = np.zeros(nbytes, np.int32)
        self.tma = np.full(nbytes, NONE, np.int32)
        self.tma_line = np.zeros(nbytes, np.int32)

    def barrier(self, members: np.ndarray | None = None):
        """A block barrier forgets every access; a named barrier (``members``: which threads meet
        at it, a run of consecutive threads as every scope's are) orders those its threads made
        before all of them (``Accesses.named_barrier``). Members not consecutive order nothing here
        (a race may then be reported that a finer record would not)."""
        if members is None:
            self.writes.clear()
            self.reads.clear()
            self.atomic.fill(False)
            return
        ids = np.flatnonzero(members)
        if ids.size and ids[-1] - ids[0] + 1 == ids.size:
            for record in (self.writes, self.reads):
                record.named_barrier(int(ids[0]), int(ids[-1]))
        self.atomic[self.writes.empty()] = False


def _groups(pos: np.ndarray, tids: np.ndarray, extra: np.ndarray | None = None):
    """The distinct positions and, per position, the lowest and highest thread touching it (and of
    ``extra``, the lowest and highest value)."""
    order = np.argsort(pos, kind="stable")
    p, t = pos[order], tids[order]
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    out = [p[starts], np.minimum.reduceat(t, starts), np.maximum.reduceat(t, starts)]
    if extra is not None:
        e = extra[order]
        out += [np.minimum.reduceat(e, starts), np.maximum.reduceat(e, starts)]
    return out


class RaceRecords:
    """The checks (module doc), a part of ``thread_memory.BlockMemory``: it has ``records``, the
    shared ``arena``, ``global_writers`` / ``global_atomic`` (tensor name -> per element: the block
    that last wrote it, by atomics or not), the running ``block`` number and ``where`` (the line)."""

    def _shared_read(self, sp: Space, pos: np.ndarray, act: np.ndarray, line: int | None = None):
        r = self.records
        tids = np.broadcast_to(act[:, None], pos.shape)
        bad = r.writes.conflicts(pos, tids)
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            b = int(pos[k])
            self._race(sp, b, f"thread {int(tids[k])} reads", f"{r.writes.who(b)} wrote", int(r.wline[b]))
        p, lo, hi = _groups(pos.ravel(), tids.ravel())
        r.reads.add(p, lo, hi)
        r.rline[p] = line if line is not None else (self.where.line or 0)

    def _shared_write(self, sp: Space, pos: np.ndarray, act: np.ndarray, raw: np.ndarray | None, atomic=False):
        r = self.records
        tids = np.broadcast_to(act[:, None], pos.shape)
        pending = r.tma[pos] != NONE
        if pending.any():
            b = int(pos[tuple(np.argwhere(pending)[0])])
            self._race(sp, b, "a thread writes", f"the TMA store issued by thread {int(r.tma[b])} still reads",
                       int(r.tma_line[b]), "before that thread waits on it (tma_store_wait)")
        bad = r.reads.conflicts(pos, tids)
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            b = int(pos[k])
            self._race(sp, b, f"thread {int(tids[k])} writes", f"{r.reads.who(b)} read", int(r.rline[b]))
        other = r.writes.conflicts(pos, tids)
        if atomic:
            other &= ~r.atomic[pos]
        else:
            other &= ~((self.arena[pos] == raw) & ~r.atomic[pos])  # the same bytes stored again: benign
        if other.any():
            k = tuple(np.argwhere(other)[0])
            b = int(pos[k])
            self._race(sp, b, f"thread {int(tids[k])} writes", f"{r.writes.who(b)} wrote", int(r.wline[b]))
        groups = _groups(pos.ravel(), tids.ravel(), None if atomic else raw.ravel())
        p, lo, hi = groups[:3]
        if not atomic and (groups[3] != groups[4]).any():  # one store, threads writing different values
            b = int(p[np.flatnonzero(groups[3] != groups[4])[0]])
            self._race(sp, b, "threads write different values at once to", "", None)
        if atomic:  # updates accumulate: every thread that made one is a writer
            r.writes.add(p, lo, hi)
        else:
            r.writes.only(p, lo, hi)
        r.atomic[p] = atomic
        r.wline[p] = self.where.line or 0

    def _race(self, sp: Space, byte: int, this: str, other: str, other_line, tail: str = ""):
        element = (byte - sp.base) // sp.itemsize
        there = f" at line {other_line}" if other_line else ""
        them = f", where {other}{there}," if other else ""
        raise KernelRuntimeError(f"shared-memory race on {sp.buf.name} (element {element}): {this} it{self._at()}"
                                 f"{them} with no block barrier (T.sync_threads) between {tail}".rstrip())

    def barrier(self, members: np.ndarray | None = None):
        self.records.barrier(members)

    # ---- races: global memory across blocks --------------------------------------------------
    def _global_read(self, sp: Space, cols: np.ndarray, act: np.ndarray):
        writers = self.global_writers.get(sp.buf.name)
        if writers is None:
            return
        w = writers[cols]
        bad = (w != NONE) & (w != self.block)
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            raise KernelRuntimeError(f"race between blocks on {sp.buf.name} (element {int(cols[k])}): block "
                                     f"{self.block} (thread {int(act[k[0]])}) reads it{self._at()}, which block "
                                     f"{int(w[k])} wrote (blocks run in no fixed order on the GPU)")

    def _global_write(self, sp: Space, cols: np.ndarray, act: np.ndarray, values, atomic=False):
        name = sp.buf.name
        if name not in self.global_writers:
            self.global_writers[name] = np.full(sp.extent, NONE, np.int32)
            self.global_atomic[name] = np.zeros(sp.extent, bool)
        writers, atomics = self.global_writers[name], self.global_atomic[name]
        w = writers[cols]
        bad = (w != NONE) & (w != self.block)
        if atomic:
            bad &= ~atomics[cols]
        else:
            same = sp.array[cols].view(np.uint8).reshape(cols.shape + (-1,)) == \
                np.asarray(values, sp.dtype).view(np.uint8).reshape(cols.shape + (-1,))
            bad &= ~(same.all(-1) & ~atomics[cols])
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            raise KernelRuntimeError(f"race between blocks on {name} (element {int(cols[k])}): block {self.block} "
                                     f"(thread {int(act[k[0]])}) writes it{self._at()}, which block {int(w[k])} "
                                     "wrote (blocks run in no fixed order on the GPU)")
        writers[cols] = self.block
        atomics[cols] = atomic

    # ---- TMA stores ---------------------------------------------------------------------------
    def tma_read(self, sp: Space, cols: np.ndarray, issuer: int) -> np.ndarray:
        """The tile elements ``cols`` (any shape) a TMA store issued by ``issuer`` reads: checked as
        the issuer's reads, and pending until the issuer waits (``tma_waited``)."""
        if sp.buf.packed_in_memory:
            raise Unsupported(f"a TMA store from packed FP4 {sp.buf.name}: the thread-level interpreter does not "
                              f"run it{self.where.describe()}")
        flat = cols.reshape(1, -1)
        pos = self._bytes(sp, flat)
        self._shared_read(sp, pos, np.array([issuer]))
        self.records.tma[pos] = issuer
        self.records.tma_line[pos] = self.where.line or 0
        return self.arena[pos].reshape(-1, sp.itemsize).view(sp.dtype).reshape(cols.shape)

    def tma_waited(self, threads: np.ndarray):
        """The TMA stores of ``threads`` have read their tiles: those reads count as the issuers'
        since the last barrier (another thread may overwrite the tile only after the next one)."""
        r = self.records
        sel = np.isin(r.tma, threads)
        if not sel.any():
            return
        p, issuer = np.flatnonzero(sel), r.tma[sel]
        r.reads.add(p, issuer, issuer)
        r.rline[sel] = r.tma_line[sel]
        r.tma[sel] = NONE
