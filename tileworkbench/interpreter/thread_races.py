"""Who touched what, for the thread-level interpreter's race checks.

Between two block barriers each byte of shared memory remembers the thread that wrote it (and
whether by atomics) and the thread that read it (or that several did). A thread reading a byte
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

if TYPE_CHECKING:
    from .thread_memory import Space

NONE, SEVERAL = -1, -2


class SharedRecords:
    """Per byte of shared memory, since the last block barrier: the writing thread (``SEVERAL``:
    threads that stored the same bytes, or updated them atomically), whether by atomics, the
    reading thread (``SEVERAL``: more than one), the lines; and the thread whose TMA store still
    reads the byte."""

    def __init__(self, nbytes: int):
        self.writer = np.full(nbytes, NONE, np.int32)
        self.atomic = np.zeros(nbytes, bool)
        self.reader = np.full(nbytes, NONE, np.int32)
        self.wline = np.zeros(nbytes, np.int32)
        self.rline = np.zeros(nbytes, np.int32)
        self.tma = np.full(nbytes, NONE, np.int32)
        self.tma_line = np.zeros(nbytes, np.int32)

    def barrier(self, members: np.ndarray | None = None):
        """A block barrier forgets every access; a named barrier (``members``: which threads meet
        at it) those its threads made (and those of several threads at once, whose threads are not
        kept: a race between them and another scope's threads may go unreported)."""
        if members is None:
            self.writer.fill(NONE)
            self.atomic.fill(False)
            self.reader.fill(NONE)
            return
        for who in (self.writer, self.reader):
            known = who >= 0
            forget = (who == SEVERAL) | (known & members[np.where(known, who, 0)])
            who[forget] = NONE
        self.atomic[self.writer == NONE] = False


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
        w = r.writer[pos]
        bad = (w != NONE) & (w != tids)
        if bad.any():
            k = np.argwhere(bad)[0]
            b = int(pos[tuple(k)])
            who = "several threads" if w[tuple(k)] == SEVERAL else f"thread {int(w[tuple(k)])}"
            self._race(sp, b, f"thread {int(tids[tuple(k)])} reads", f"{who} wrote", int(r.wline[b]))
        p, lo, hi = _groups(pos.ravel(), tids.ravel())
        old = r.reader[p]
        r.reader[p] = np.where((lo == hi) & ((old == NONE) | (old == lo)), lo, SEVERAL)
        r.rline[p] = line if line is not None else (self.where.line or 0)

    def _shared_write(self, sp: Space, pos: np.ndarray, act: np.ndarray, raw: np.ndarray | None, atomic=False):
        r = self.records
        tids = np.broadcast_to(act[:, None], pos.shape)
        pending = r.tma[pos] != NONE
        if pending.any():
            b = int(pos[tuple(np.argwhere(pending)[0])])
            self._race(sp, b, "a thread writes", f"the TMA store issued by thread {int(r.tma[b])} still reads",
                       int(r.tma_line[b]), "before that thread waits on it (tma_store_wait)")
        rd = r.reader[pos]
        bad = (rd != NONE) & (rd != tids)
        if bad.any():
            k = tuple(np.argwhere(bad)[0])
            who = "several threads" if rd[k] == SEVERAL else f"thread {int(rd[k])}"
            self._race(sp, int(pos[k]), f"thread {int(tids[k])} writes", f"{who} read", int(r.rline[int(pos[k])]))
        w = r.writer[pos]
        other = (w != NONE) & (w != tids)
        if atomic:
            other &= ~r.atomic[pos]
        else:
            other &= ~((self.arena[pos] == raw) & ~r.atomic[pos])  # the same bytes stored again: benign
        if other.any():
            k = tuple(np.argwhere(other)[0])
            who = "several threads" if w[k] == SEVERAL else f"thread {int(w[k])}"
            self._race(sp, int(pos[k]), f"thread {int(tids[k])} writes", f"{who} wrote", int(r.wline[int(pos[k])]))
        groups = _groups(pos.ravel(), tids.ravel(), None if atomic else raw.ravel())
        p, lo, hi = groups[:3]
        if not atomic and (groups[3] != groups[4]).any():  # one store, threads writing different values
            b = int(p[np.flatnonzero(groups[3] != groups[4])[0]])
            self._race(sp, b, "threads write different values at once to", "", None)
        old = r.writer[p]
        keep = (lo == hi) & ((old == NONE) | (old == lo))
        r.writer[p] = np.where(keep, lo, SEVERAL)
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
        old, issuer = r.reader[sel], r.tma[sel]
        r.reader[sel] = np.where((old == NONE) | (old == issuer), issuer, SEVERAL)
        r.rline[sel] = r.tma_line[sel]
        r.tma[sel] = NONE
