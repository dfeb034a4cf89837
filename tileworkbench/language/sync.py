"""Synchronisation: mbarrier arrive and wait, the TMA store wait, the block barrier."""

from __future__ import annotations

import builtins as _builtins

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.regions import as_barrier
from ..ir import nodes as ir

_py_bool = _builtins.bool


def barrier_arrive(barrier=None, mbarrier=None):
    _b.current().emit(ir.BarrierArrive(as_barrier(_one(barrier, mbarrier, "barrier_arrive"))))


def mbarrier_arrive(mbarrier=None, barrier=None):
    barrier_arrive(barrier, mbarrier)


def barrier_wait(barrier=None, parity=None, mbarrier=None):
    bar = as_barrier(_one(barrier, mbarrier, "barrier_wait"))
    if parity is None:
        raise error("T.barrier_wait needs a parity (usually k % 2 in a loop, 0 outside)")
    parity = _b.integer(parity, "T.barrier_wait: the parity")
    if ir.const_int(parity) not in (None, 0, 1):
        raise error(f"T.barrier_wait: the parity is 0 or 1 (the phase's last bit), got {ir.const_int(parity)}")
    _b.current().emit(ir.BarrierWait(bar, parity))


def mbarrier_wait_parity(mbarrier=None, parity=None, barrier=None):
    barrier_wait(barrier, parity, mbarrier)


def _one(a, b, fn):
    if (a is None) == (b is None):
        raise error(f"T.{fn} needs exactly one barrier")
    return a if a is not None else b


def tma_store_wait(read=False):
    _b.current().emit(ir.TmaStoreWait(_py_bool(read)))


def sync_threads(barrier_id=None, arrive_count=None):
    """``__syncthreads()``. TileLang's named form, ``T.sync_threads(barrier_id, arrive_count)``
    (``bar.sync id, count``: a barrier only ``arrive_count`` threads meet), is taken where the count
    is the threads running it: the whole block, or those of the ``if tx < C:`` or ``T.ws`` scope it
    stands in (the compiler numbers the scope's barrier itself); for another part of the block it
    is refused: the compiler places the barriers that order threads' shared-memory accesses
    itself, and which threads meet a barrier the program names is what its race and barrier
    checks cannot see."""
    if arrive_count is not None:
        count = _b.constant_int(arrive_count, "T.sync_threads: arrive_count", low=1)
        ident = _b.constant_int(barrier_id, "T.sync_threads: barrier_id", low=0) if barrier_id is not None else None
        threads = _b.launch("T.sync_threads(barrier_id, arrive_count)").threads
        scope = _b.current().thread_scope
        running = scope[1] if scope is not None else threads
        if count != running:
            where = f"the {running} threads of its scope" if scope is not None else f"the block's {threads} threads"
            raise error(f"T.sync_threads({ident}, {count}): a named barrier for {count} threads where {where} run "
                        "it is not supported; leave the barriers to the compiler (it orders shared-memory "
                        "accesses between threads itself) or use T.sync_threads()")
    elif barrier_id is not None:
        _b.constant_int(barrier_id, "T.sync_threads: barrier_id", low=0)
    _b.current().emit(ir.SyncThreads())


def sync_grid():
    """A barrier of every thread of every block (TileLang's persistent MLA decode: the partial
    results of all blocks are written before any block combines them). The kernel is then launched
    cooperatively: the driver refuses a grid whose blocks cannot all be resident at once (a
    ``KernelRuntimeError``), so no block waits for one that cannot start. Only at the kernel's top
    level: a barrier inside a loop or branch that some blocks or threads skip would never complete."""
    b = _b.current()
    _b.launch("T.sync_grid")
    if len(b.frames) != b.kernel_depth or b.thread_scope is not None:
        raise error("T.sync_grid stands at the kernel's top level only (not inside a loop, an `if` or a T.ws "
                    "scope): every thread of every block must reach each grid barrier, the same number of times")
    b.emit(ir.grid_sync())


def ptx_commit_group():
    """TileLang's ``cp.async.commit_group``: closes the group of copies a ``T.Parallel(...,
    prefer_async=True)`` loop issued. Here such a loop's copies are complete when the loop ends
    (``T.Parallel``: the stronger order), so there is no group to close: taken, nothing emitted."""


def ptx_wait_group(num=0):
    """TileLang's ``cp.async.wait_group num``: waits until at most ``num`` groups of copies are in
    flight. None is here (``ptx_commit_group``): taken (``num`` a constant from 0), nothing emitted."""
    _b.constant_int(num, "T.ptx_wait_group: num", low=0)


def fence_proxy_async():
    """``fence.proxy.async``: the threads' writes to shared memory before it are seen by wgmma and
    TMA (the async proxy) after it. The compiler puts one where its own passes need it; a program
    that hands a tile its threads wrote to another warpgroup's wgmma (FlashMLA's) fences itself."""
    _b.current().emit(ir.Evaluate(ir.Call("tw::fence_proxy_async", ())))
