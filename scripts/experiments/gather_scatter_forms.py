"""Experiment: rows gathered and scattered through an index table, at random, where the table's own
index is known only at run time (session 35's two changes: a guarded run moved whole with its row
index read once, ``rules.vector_runs``; a store's or atomic's check testing the index table's
bounds before reading it, ``guard_global_accesses``).

Each kernel reads ``Idx[k + i]`` for a start ``k`` read from a tensor (so ``k + i`` may fall
outside ``Idx``: negative, or past its end), the row found there may fall outside the data
(``-3 .. ROWS + 3``), and does one of:

* ``gather``: ``s[i, j] = X[Idx[k + i], j]`` into a shared tile, written out (zeros where a row
  is out of range, TileLang's reading);
* ``gather_scaled``: the same with the value doubled (not a plain copy: element by element);
* ``scatter_add``: ``T.atomic_add(Out[Idx[k + i], j], X[i, j])`` (float32: runs of four);
* ``scatter``: ``Out[Idx[k + i], j] = X[i, j]`` with the table a permutation (no two rows onto one);
* ``copy_rows``: ``T.copy(X[Idx[k + i], 0:COLS], s[i, 0:COLS])`` row by row in a serial loop (a tile
  copy's own check, ``rules.copies``: a row outside reads zeros at either end).

Draws vary the element type, the row's width (whole 16-byte runs or not), the rows, the threads and
``k``. Every kernel runs on both CPU interpreters (the thread level checks every access lies inside
its tensor) against numpy; every fourth is compiled by NVRTC for sm_90a. Anything but "ok" (a wrong
number, an out-of-bounds access, an internal error) is a bug.

    PYTHONPATH=. python3 scripts/experiments/gather_scatter_forms.py [draws]

The CI property ``tests/robustness/test_gather_scatter_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

import tileworkbench as tw
from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, sweep

DATA_ROWS = 40
TABLE = 48  # the index table's length


def draw(rng: random.Random) -> tuple:
    form = rng.choice(("gather", "gather_scaled", "scatter_add", "scatter", "copy_rows"))
    dtype = "float32" if form == "scatter_add" else rng.choice(("float16", "float32"))
    return (form, dtype, rng.choice((8, 16, 32, 64, 12)), rng.choice((4, 8, 16, 32)), rng.choice((64, 128, 256)),
            rng.choice((0, 5, TABLE - 20, TABLE - 3, -6)))


def kernel_source(form, dtype, cols, rows, threads, start) -> str:
    body = {
        "gather": ["for i, j in T.Parallel(ROWS, COLS):", "    s[i, j] = X[Idx[k + i], j]",
                   "for i, j in T.Parallel(ROWS, COLS):", "    Y[i, j] = s[i, j]"],
        "gather_scaled": ["for i, j in T.Parallel(ROWS, COLS):", "    s[i, j] = X[Idx[k + i], j] * 2",
                          "for i, j in T.Parallel(ROWS, COLS):", "    Y[i, j] = s[i, j]"],
        "scatter_add": ["for i, j in T.Parallel(ROWS, COLS):", "    T.atomic_add(Y[Idx[k + i], j], X[i, j])"],
        "scatter": ["for i, j in T.Parallel(ROWS, COLS):", "    Y[Idx[k + i], j] = X[i, j]"],
        "copy_rows": ["for i in T.serial(ROWS):", "    T.copy(X[Idx[k + i], 0:COLS], s[i, 0:COLS])",
                      "T.copy(s, Y)"],
    }[form]
    reads_rows = form.startswith("gather") or form == "copy_rows"
    out_rows = "ROWS" if reads_rows else "DATA"
    lines = "\n".join(" " * 8 + line for line in body)
    return f"""import tileworkbench.language as T

ROWS, COLS, DATA, TABLE = {rows}, {cols}, {DATA_ROWS}, {TABLE}


@T.prim_func
def main(X: T.Tensor(({'DATA' if reads_rows else 'ROWS'}, COLS), "{dtype}"),
         Idx: T.Tensor((TABLE,), "int32"), Start: T.Tensor((1,), "int32"),
         Y: T.Tensor(({out_rows}, COLS), "{dtype}")):
    with T.Kernel(1, threads={threads}):
        s = T.alloc_shared((ROWS, COLS), "{dtype}")
        k = Start[0]
{lines}
"""


def inputs(config, seed: int):
    form, dtype, cols, rows, threads, start = config
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((DATA_ROWS if form.startswith("gather") or form == "copy_rows" else rows, cols)).astype(dtype)
    if form == "scatter":  # no two rows onto one: a permutation of the data's rows, some past its ends
        idx = (rng.permutation(TABLE) - 4).astype(np.int32)
    else:
        idx = rng.integers(-3, DATA_ROWS + 3, TABLE).astype(np.int32)
    return x, idx, np.array([start], np.int32)


def reference(config, x, idx, start) -> np.ndarray:
    form, dtype, cols, rows, threads, k = config
    at = np.arange(rows) + k
    table_ok = (at >= 0) & (at < TABLE)
    row = np.where(table_ok, idx[np.clip(at, 0, TABLE - 1)], -1)
    inside = table_ok & (row >= 0) & (row < DATA_ROWS)
    if form.startswith("gather") or form == "copy_rows":
        # an index past the table reads as 0 (the load's own guard): row 0 of the data
        row = np.where(table_ok, row, 0)
        inside = (row >= 0) & (row < DATA_ROWS)
        got = np.where(inside[:, None], x[np.clip(row, 0, DATA_ROWS - 1)], 0).astype(x.dtype)
        return got * x.dtype.type(2) if form == "gather_scaled" else got
    y = np.zeros((DATA_ROWS, cols), np.float64 if form == "scatter_add" else x.dtype)
    for i in range(rows):
        if inside[i]:
            if form == "scatter_add":
                y[row[i]] += x[i]
            else:
                y[row[i]] = x[i]
    return y


def check(config, seed: int, nvrtc: bool) -> str:
    form, dtype, cols, rows = config[:4]

    def run():
        main = kernel_from_source(kernel_source(*config), "gather_scatter")
        x, idx, start = inputs(config, seed)
        want = reference(config, x, idx, start)
        for runner in (lambda *a: tw.compile(main, target="cpu")(*a), lambda *a: run_at_thread_level(main, *a)):
            y = np.zeros(want.shape, dtype)
            runner(x, idx, start, y)
            if form == "scatter_add":
                np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(y, want)
        return main

    return outcome(run, nvrtc)


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 120, seed=35)
