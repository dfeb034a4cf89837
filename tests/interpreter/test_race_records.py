"""The thread-level interpreter's record of who touched a byte of shared memory since the last
block barrier (``interpreter.thread_races.Accesses``), as named barriers order accesses: a scope's
barrier orders what its threads did before all of them, and before no other thread. (Before, an
access of several threads at once was forgotten at any named barrier: a scope's collective store
met by another scope's read with no block barrier between went unreported.)"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tileworkbench.language as T
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.interpreter.thread_races import Accesses
from tileworkbench.interpreter.threads import ThreadKernel, run_at_thread_level
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect

BYTE = np.array([0])


def touched(acc: Accesses, lo: int, hi: int | None = None) -> Accesses:
    hi = lo if hi is None else hi
    acc.add(BYTE, np.array([lo]), np.array([hi]))
    return acc


def conflicts(acc: Accesses, tid: int) -> bool:
    return bool(acc.conflicts(BYTE, np.array([tid]))[0])


def test_one_threads_access_conflicts_with_every_other_thread_until_a_barrier():
    acc = touched(Accesses(1), 5)
    assert not conflicts(acc, 5) and conflicts(acc, 6)
    acc.clear()
    assert not conflicts(acc, 6)


def test_a_scopes_barrier_orders_its_threads_collective_access_before_them_only():
    acc = touched(Accesses(1), 0, 63)  # threads 0-63 stored it together
    assert conflicts(acc, 10)
    acc.named_barrier(0, 63)
    assert not conflicts(acc, 10) and not conflicts(acc, 63)
    assert conflicts(acc, 64) and conflicts(acc, 100)  # another scope's threads met no barrier with them


def test_another_scopes_barrier_orders_nothing_it_did_not_make():
    acc = touched(Accesses(1), 0, 63)
    acc.named_barrier(64, 127)
    assert conflicts(acc, 70) and conflicts(acc, 10)


def test_a_barrier_of_threads_that_saw_it_passes_it_on():
    acc = touched(Accesses(1), 0, 63)
    acc.named_barrier(0, 63)
    acc.named_barrier(32, 127)  # threads 32-63 saw it and meet 64-127 here
    assert not conflicts(acc, 100) and not conflicts(acc, 5)
    acc.named_barrier(200, 255)  # none of them saw it
    assert conflicts(acc, 210)


def test_a_new_access_after_the_barrier_is_its_threads_alone():
    acc = touched(Accesses(1), 0, 63)
    acc.named_barrier(0, 63)
    touched(acc, 7)  # thread 7 reads it again: the others of 0-63 are not ordered after that
    assert not conflicts(acc, 7) and conflicts(acc, 8)
    acc.named_barrier(0, 63)
    assert not conflicts(acc, 8) and conflicts(acc, 64)


@T.prim_func
def scopes_sharing_a_store(X: T.Tensor((4,), "float32"), Y: T.Tensor((256,), "float32")):
    """All of scope 0's threads store s[0] (one value: an access of several threads) and meet at
    their named barrier; scope 1 reads s[0]."""
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        s = T.alloc_shared((4,), "float32")
        if tx < 128:
            s[0] = X[0]
            T.sync_threads(1, 128)
            Y[tx] = s[0]
        else:
            Y[tx] = s[0] * 2.0


def test_another_scope_reads_the_store_after_a_block_barrier():
    """``insert_thread_syncs`` puts a block barrier between the scopes (scope 0's own barrier orders
    its store before its threads only), so the program runs race-free at the thread level."""
    x, y = np.arange(1, 5, dtype=np.float32), np.zeros(256, np.float32)
    run_at_thread_level(scopes_sharing_a_store, x, y)
    np.testing.assert_array_equal(y, np.r_[np.full(128, 1.0), np.full(128, 2.0)].astype(np.float32))


def _without_block_barriers(func):
    """The lowered kernel with its block barriers between the scopes taken out."""
    for seq in collect(func.body, ir.SeqStmt):
        seq.stmts[:] = [x for x in seq.stmts if not (isinstance(x, ir.SyncThreads) and x.threads is None)]
    return func


def test_without_that_barrier_the_read_is_a_race_at_the_thread_level():
    """The record the interpreter keeps: before, an access of several threads was forgotten at a
    named barrier, and this read went unreported."""
    kernel = ThreadKernel.of(scopes_sharing_a_store)
    func = _without_block_barriers(copy.deepcopy(kernel.func))
    x, y = np.arange(1, 5, dtype=np.float32), np.zeros(256, np.float32)
    with pytest.raises(KernelRuntimeError, match=r"race on s \(element 0\): thread 128 reads it .* threads before "
                                                 r"a barrier that only threads 0-127 met wrote"):
        ThreadKernel(func, kernel.out_idx, kernel.name)(x, y)
