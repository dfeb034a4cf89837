"""What the tile-level interpreter (``machine``) does to values many threads update at once:
atomic updates of an element (``T.atomic_add`` / max / min, all at once, or one thread after another
where each gets the element's value before its update: ``return_prev=True``), and a kernel
variable some of the running threads assigned under an ``if`` (the others keep theirs)."""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .values import loaded, stored

ATOMIC_OPS = {ir.ATOMIC_ADD: np.add, "atomicMax": np.maximum, "atomicMin": np.minimum,
              "tw::atomic_max": np.maximum, "tw::atomic_min": np.minimum}


def update_all(arr: np.ndarray, buf: ir.Buffer, name: str, idx: tuple, values):
    """The update ``name`` of ``arr`` (``buf``'s memory) at ``idx`` by ``values``, all at once."""
    work = loaded(arr, buf.dtype).copy()
    ATOMIC_OPS[name].at(work, idx, values)
    arr[...] = stored(work, buf.dtype)


def update_in_turn(arr: np.ndarray, buf: ir.Buffer, name: str, idx: list, values: np.ndarray) -> np.ndarray:
    """The update ``name`` by each thread in turn (``idx``: one index array a dimension, a thread
    an entry); each thread's element before its own update."""
    work = loaded(arr, buf.dtype).copy()
    prev = np.empty(values.shape[0], work.dtype)
    for k in range(values.shape[0]):
        where = tuple(int(i[k]) for i in idx)
        prev[k] = work[where]
        work[where] = ATOMIC_OPS[name](work[where], values[k])
    arr[...] = stored(work, buf.dtype)
    return prev


def merged(outer, inside, keep: np.ndarray):
    """A variable the threads ``keep`` holds for assigned ``inside`` (the others keep ``outer``),
    over all the running threads (one value if they agree)."""
    outer, inside = np.asarray(outer), np.asarray(inside)
    out = np.array(np.broadcast_to(outer, keep.shape), dtype=np.result_type(outer, inside))
    out[keep] = np.broadcast_to(inside, (int(keep.sum()),))
    if out.ndim == 1 and out.size and (out == out[0]).all():
        return out[0]
    return out


def vars_after_branch(saved: dict, entry: dict, inner: dict, keep: np.ndarray, masked: bool) -> dict:
    """The kernel variables after the threads ``keep`` (of the running ones) ran one branch of an
    ``if``: ``saved`` as they were before it, ``entry`` as the branch began (narrowed to its
    threads), ``inner`` as it ended. A variable those threads assigned is ``merged``, one they did
    not is as it was, and one bound inside (a let) ends with the branch. Under a uniform ``if``
    (``masked``: every thread takes the branch, some masked off) an assignment stands."""
    out = {}
    for var, value in saved.items():
        inside = inner.get(var)
        if inside is not entry.get(var) and not masked:  # assigned by the threads that ran
            out[var] = merged(value, inside, keep)
        elif isinstance(value, np.ndarray) and value.shape == keep.shape:
            out[var] = value
        else:
            out[var] = inside
    return out
