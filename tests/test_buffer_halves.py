"""Halves of a shared buffer that ``insert_thread_syncs`` tells apart: accesses whose first index
is the same for every thread and provably different (``s[r ^ 1, pos]`` written where ``s[r, i]`` is
read, ``s[k]`` and ``s[k + 1]``) touch different elements and need no barrier between them, so
TileLang's top-k selector's double buffer of candidates, filled and drained under an ``if`` that
differs between threads, compiles. At a loop's back edge the halves swap, so what one iteration
wrote is a hazard for the next; an index that differs between threads, or a variable the kernel
re-assigns, proves nothing."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError

from tests.test_thread_syncs import _loop_bodies
from tests.tilelang_compat.interpreters import on_both_interpreters

N, ROUNDS = 128, 3


def filter_rounds(half=lambda r, tx: r % 2):
    """Candidates (indices into X) kept in one half of ``s`` while the survivors of each round's
    threshold are appended to the other half, their places taken with ``return_prev`` atomics:
    the top-k selector's tail. ``half`` gives the round's current half."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Thresholds: T.Tensor((ROUNDS,), "float32"),
             Out: T.Tensor((N,), "int32"), Count: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            s = T.alloc_shared((2, N), "int32")
            n = T.alloc_shared((2,), "int32")
            s[0, tx] = tx
            if tx == 0:
                n[0] = N
            for r in T.serial(ROUNDS):
                cur = half(r, tx)
                T.sync_threads()
                if tx == 0:
                    n[cur ^ 1] = 0
                T.sync_threads()
                m = n[cur]
                if tx < m:
                    v = s[cur, tx]
                    if X[v] > Thresholds[r]:
                        pos = T.atomic_add(n[cur ^ 1], 1, return_prev=True)
                        s[cur ^ 1, pos] = v
            T.sync_threads()
            last = ROUNDS % 2
            if tx < n[last]:
                Out[tx] = s[last, tx]
            if tx == 0:
                Count[0] = n[last]
    return main


def inputs(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N).astype(np.float32)
    return x, np.sort(rng.uniform(-1.5, 0.5, ROUNDS)).astype(np.float32)


@on_both_interpreters
@pytest.mark.parametrize("seed", [0, 1])
def test_the_halves_of_a_double_buffer_under_a_thread_variant_if(run, seed):
    x, thresholds = inputs(seed)
    out, count = np.full(N, -1, np.int32), np.zeros(1, np.int32)
    run(filter_rounds(), x, thresholds, out, count)
    want = np.flatnonzero(x > thresholds.max())
    assert count[0] == len(want)
    assert sorted(out[:count[0]].tolist()) == want.tolist()


def test_the_halves_need_no_barrier_inside_the_if(nvrtc_check):
    source = tw.lower(filter_rounds(), target="sm_90a").device_source
    body = _loop_bodies(source)["r"]
    assert body.count("__syncthreads") == 2  # the user's two, none added
    nvrtc_check(source, "sm_90a")


def test_a_half_that_differs_between_threads_proves_nothing():
    with pytest.raises(CompileError, match="may differ between the threads of a block"):
        tw.lower(filter_rounds(half=lambda r, tx: (r + tx) % 2), target="sm_90a")


def swap_halves(other=lambda r: (r % 2) ^ 1):
    """Each round reads one half and writes the other (``other(r)``): the round after reads what
    this one wrote, so a barrier at each back edge, and none between a round's read and its write."""
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            s = T.alloc_shared((2, N), "float32")
            s[0, tx] = X[tx]
            for r in T.serial(4):
                v = s[r % 2, (tx + 1) % N]
                s[other(r), tx] = v + 1.0
            Y[tx] = s[0, tx]
    return main


@on_both_interpreters
def test_the_halves_swap_at_the_back_edge(run):
    x = np.random.default_rng(2).standard_normal(N).astype(np.float32)
    y = np.zeros(N, np.float32)
    run(swap_halves(), x, y)
    np.testing.assert_allclose(y, np.roll(x, -4) + 4.0, rtol=1e-6)


def test_one_barrier_a_round_where_the_halves_swap():
    body = _loop_bodies(tw.lower(swap_halves(), target="sm_90a").device_source)["r"]
    assert body.count("__syncthreads") == 1



def test_halves_a_constant_apart_modulo_two_need_no_barrier():
    """``s[(r + 1) % 2]`` and ``s[r % 2]`` differ as ``r ^ 1`` and ``r`` do."""
    body = _loop_bodies(tw.lower(swap_halves(other=lambda r: (r + 1) % 2), target="sm_90a").device_source)["r"]
    assert body.count("__syncthreads") == 1
