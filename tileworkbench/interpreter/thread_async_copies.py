"""``cp.async`` at the thread level, a part of ``thread_block.ThreadBlock``.

``tw::cp_async<N>(dst, src, valid)`` reads its N bytes of global memory when a thread issues it
(nothing where ``valid`` is false: those bytes are zeros, the instruction's zero fill) and holds
them in the thread's open group; ``tw::cp_async_commit()`` closes each running thread's group;
``tw::cp_async_wait<n>()`` lands, for each running thread, every group of its own but the newest
``n`` in shared memory. For the race records the write is that thread's, at its wait: on the GPU it
lands somewhere between the issue and the wait, so a read by another thread before the wait and a
barrier after it is a race either way, and a read before the wait sees the old elements here. Both
ends naturally aligned, as ``tw::copy_vec``'s (a misaligned one is a ``KernelRuntimeError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..ir import nodes as ir
from .values import evaluate

CP_ASYNC = re.compile(r"^tw::cp_async<(\d+)>$")


def is_async_copy_call(name: str) -> bool:
    return bool(CP_ASYNC.match(name)) or ir.cp_async_waited(name) is not None or name == ir.CP_ASYNC_COMMIT


@dataclass
class HeldCopies:
    """The copies one ``cp_async`` call issued, not landed yet: row ``k`` is ``threads[k]``'s
    ``values[k]`` for the elements ``cols[k]`` of ``space``, in that thread's group ``group[k]``."""

    space: object
    cols: np.ndarray
    threads: np.ndarray
    values: np.ndarray
    group: np.ndarray

    def rows(self, keep: np.ndarray) -> "HeldCopies":
        return HeldCopies(self.space, self.cols[keep], self.threads[keep], self.values[keep], self.group[keep])


class AsyncCopies:
    """Needs the block's ``act``, ``mask``, ``lanes``, ``mem``, ``pointer`` and ``aligned``, and
    ``held`` (a list) and ``committed`` (each thread's count of closed groups) from its ``__init__``."""

    def async_copy(self, call):
        name = call.name
        if (m := CP_ASYNC.match(name)) is not None:
            self.issue(call, int(m.group(1)))
        elif name == ir.CP_ASYNC_COMMIT:
            self.committed[self.act] += 1
        else:
            self.land(ir.cp_async_waited(name))

    def issue(self, call, nbytes: int):
        act = self.act
        valid = np.broadcast_to(np.asarray(evaluate(call.args[2], self), bool), self.lanes.shape)[act]
        dst, d_off, dn = self.pointer(call.args[0], nbytes, "cp.async-writes")
        self.aligned(dst, d_off, nbytes, act)
        raw = np.zeros((act.size, nbytes), np.uint8)
        if valid.any():  # only the threads whose copy is valid read (another's address may lie outside)
            saved = self.mask
            self.mask = np.isin(self.lanes, act[valid])
            try:
                src, s_off, sn = self.pointer(call.args[1], nbytes, "reads")
                self.aligned(src, s_off, nbytes, self.act)
                raw[valid] = np.ascontiguousarray(self.mem.read(src, s_off[:, None] + np.arange(sn), self.act)) \
                    .view(np.uint8).reshape(-1, nbytes)
            finally:
                self.mask = saved
        self.held.append(HeldCopies(dst, d_off[:, None] + np.arange(dn), act.copy(),
                                    raw.view(dst.dtype).reshape(act.size, dn), self.committed[act].copy()))

    def land(self, newest_left: int):
        running = np.zeros(self.lanes.shape, bool)
        running[self.act] = True
        still = []
        for copies in self.held:
            due = running[copies.threads] & (copies.group < self.committed[copies.threads] - newest_left)
            if due.any():
                self.mem.write(copies.space, copies.cols[due], copies.threads[due], copies.values[due])
            if not due.all():
                still.append(copies.rows(~due))
        self.held = still
