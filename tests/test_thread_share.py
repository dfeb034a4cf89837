"""``rules.vector_runs.thread_share``: where a thread's ``it``-th share of a ``T.Parallel`` nest starts,
simplified so that a thread's unrolled shares differ by constants. Checked here against the plain
unravelling of ``flat = (it * threads + tid) * run`` at every thread and share, and for the form
NVVM folds (no division of a sum that has ``it`` in it)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tileworkbench.analysis.evaluate import evaluate
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.printer import expr_text
from tileworkbench.passes.rules.vector_runs import thread_share

CASES = [  # (threads, run, extents)
    (128, 8, (32, 512)),   # the fine-tuning sparse MLA forward's gathers: 16 shares of 2 rows
    (128, 8, (32, 64)),
    (256, 1, (8, 16)),
    (384, 1, (64, 64)),    # a share that is not a whole number of rows: no split, still exact
    (96, 4, (3, 5, 64)),   # three dimensions, a thread count that is not a power of two
    (128, 1, (10, 30)),    # a ragged last share (flat past the nest: the caller guards it)
]


def _check(threads, run, extents):
    it, tid = ir.Var("it"), ir.Var("tid")
    total = 1
    for e in extents:
        total *= e
    iters = -(-(total // run) // threads)
    indices = thread_share(it, iters, tid, threads, run, extents)
    for i, t in itertools.product(range(iters), range(threads)):
        flat = (i * threads + t) * run
        expected = []
        for e in reversed(extents[1:]):
            expected.append(flat % e)
            flat //= e
        expected.append(flat)
        assert [evaluate(x, {it: i, tid: t}) for x in indices] == expected[::-1], (i, t)


@pytest.mark.parametrize("threads,run,extents", CASES)
def test_each_share_starts_where_the_flat_index_says(threads, run, extents):
    _check(threads, run, extents)


@settings(max_examples=60, deadline=None)
@given(threads=st.sampled_from([32, 64, 96, 128, 256, 384]), run=st.sampled_from([1, 2, 4, 8]),
       extents=st.lists(st.integers(1, 24).map(lambda e: 2 * e), min_size=1, max_size=3))
def test_at_random_shapes_too(threads, run, extents):
    """Any thread count, run and nest (the innermost extent a multiple of the run, as the callers
    give): every share of every thread where plain unravelling puts it."""
    extents = extents[:-1] + [extents[-1] * run]
    _check(threads, run, tuple(extents))


def test_the_shares_of_a_thread_differ_by_constants():
    it, tid = ir.Var("it"), ir.Var("tid")
    row, col = thread_share(it, 16, tid, 128, 8, (32, 512))
    assert expr_text(row) == "it * 2 + tid * 8 // 512"
    assert "it" not in expr_text(col)
