"""Warp votes and ``__syncwarp`` over the lanes of each warp (``ir/warp_votes.py``), for both
interpreters: the running threads' masks and predicates in, each running thread's result out.
A ``_sync`` call's mask must name the calling lane and every lane it names (of the block's
threads) must run the call, as CUDA requires; otherwise a ``KernelRuntimeError``."""

from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError
from ..ir import nodes as ir

WARP = 32
_SPELLED = {ir.ANY_SYNC: "T.any_sync", ir.ALL_SYNC: "T.all_sync", ir.BALLOT_SYNC: "T.ballot_sync",
            ir.SYNCWARP: "T.sync_warp"}
_LANE_BITS = np.uint64(1) << np.arange(WARP, dtype=np.uint64)


def _words(flags: np.ndarray) -> np.ndarray:
    """One 32-bit word a warp (as uint64) of per-thread flags, bit n for lane n."""
    return (flags.reshape(-1, WARP).astype(np.uint64) * _LANE_BITS).sum(axis=1, dtype=np.uint64)


def vote(name: str, running: np.ndarray, args: list, block_threads: int, where: str = "") -> np.ndarray:
    """The result of call ``name`` in each of the ``running`` threads (ascending indices), its
    evaluated ``args`` (scalars or one value a running thread); ``where`` ends messages."""
    running = np.asarray(running, np.int64)
    size = -(-block_threads // WARP) * WARP
    runs = np.zeros(size, bool)
    runs[running] = True
    warp, lane = running // WARP, running % WARP
    ran = _words(runs)[warp]
    if name == ir.ACTIVEMASK:
        return ran
    exists = _words(np.arange(size) < block_threads)[warp]
    mask = np.broadcast_to(np.asarray(args[0]), running.shape).astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    own = (mask >> lane.astype(np.uint64)) & np.uint64(1)
    if not own.all():
        k = int(np.flatnonzero(own == 0)[0])
        raise KernelRuntimeError(f"{_SPELLED[name]} with mask {int(mask[k]):#x} in thread {int(running[k])}: the mask does not "
                                 f"name the calling lane {int(lane[k])}{where}")
    missing = mask & exists & ~ran
    if missing.any():
        k = int(np.flatnonzero(missing)[0])
        absent = (int(missing[k]) & -int(missing[k])).bit_length() - 1  # the lowest
        raise KernelRuntimeError(f"{_SPELLED[name]} with mask {int(mask[k]):#x}: lane {absent} of warp {int(warp[k])} (thread "
                                 f"{int(warp[k]) * WARP + absent}) does not run it{where}")
    if name == ir.SYNCWARP:
        return np.zeros(running.shape, np.int64)
    holds = np.zeros(size, bool)
    holds[running] = np.broadcast_to(np.asarray(args[1]) != 0, running.shape)
    chosen = _words(holds)[warp] & mask
    if name == ir.BALLOT_SYNC:
        return chosen
    if name == ir.ANY_SYNC:
        return (chosen != 0).astype(np.int64)
    return (chosen == (mask & exists)).astype(np.int64)
