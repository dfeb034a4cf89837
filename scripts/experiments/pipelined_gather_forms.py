"""Experiment: gathers in ``T.Pipelined`` loops (``inject_software_pipeline``'s gather producers,
``rules.vector_runs``' ``cp.async`` runs) at random. Each kernel gathers ``BI`` rows of ``X`` by the
indices ``Idx[k * BI + i]`` (some out of range: zeros) into a shared tile every iteration ``k``, in
a loop of 1-3 stages, and writes out what it finds there; the draws vary the element type (16-byte
runs of 8 halves or 4 floats, or no runs where the row is no whole number of them), the tile's size,
the loop's length, a shift of the row read from a name bound before the loop (issuable ahead) or
from a value the loop computes (not), a statement reading the tile before the gather (the last
iteration's rows, from the second iteration on: not issuable), and one writing the tile after the loop's reader (not issuable).
Every kernel runs on both CPU interpreters (the thread level with its race records and its model of
``cp.async``: copies land at their group's wait) against numpy run iteration by iteration; every
fourth is compiled by NVRTC for sm_90a. The counts say how many were issued ahead (``ahead``) and
how many ran in place; anything else (a wrong number, a race, an internal error) is a bug.

    PYTHONPATH=. python3 scripts/experiments/pipelined_gather_forms.py [draws]

The CI property ``tests/robustness/test_pipelined_gather_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

import tileworkbench as tw
from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, refusals_together, sweep

SOURCE_ROWS = 50


def draw(rng: random.Random) -> tuple:
    dtype = rng.choice(("float16", "float32"))
    cols = rng.choice((8, 16, 32, 64, 12, 6))
    return (dtype, cols, rng.choice((4, 8, 16, 32)), rng.randint(1, 5), rng.choice((1, 2, 2, 3)),
            rng.choice(("none", "none", "let", "in_loop")), rng.random() < 0.25, rng.random() < 0.2)


def kernel_source(dtype, cols, rows, chunks, stages, shift, reader_first, writes_tile) -> str:
    row = {"none": "Idx[k * BI + i]", "let": "Idx[k * BI + i] + off", "in_loop": "Idx[k * BI + i] + moved[0]"}[shift]
    lines = []
    if reader_first:
        lines += ["for i, d in T.Parallel(BI, COLS):", "    if k > 0:", "        Y[k, 0, i, d] = s[i, d]"]
    if shift == "in_loop":
        lines += ["moved[0] = k % 3"]
    lines += ["for i, d in T.Parallel(BI, COLS):", f"    s[i, d] = X[{row}, d]",
              "for i, d in T.Parallel(BI, COLS):", "    Y[k, 1, i, d] = s[i, (d + 1) % COLS] * 2"]
    if writes_tile:
        lines += ["for i, d in T.Parallel(BI, COLS):", "    s[i, d] = s[i, d] + 1"]
    body = "\n".join(" " * 12 + line for line in lines)
    return f"""import tileworkbench.language as T

BI, COLS, CHUNKS, SRC = {rows}, {cols}, {chunks}, {SOURCE_ROWS}


@T.prim_func
def main(X: T.Tensor((SRC, COLS), "{dtype}"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
         Y: T.Tensor((CHUNKS, 2, BI, COLS), "{dtype}")):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((BI, COLS), "{dtype}")
        moved = T.alloc_local((1,), "int32")
        off = Idx[0] % 2
        for k in T.Pipelined(CHUNKS, num_stages={stages}):
{body}
"""


def kernel(config):
    return kernel_from_source(kernel_source(*config), "gathers")


def reference(x, idx, config) -> np.ndarray:
    dtype, cols, rows, chunks, stages, shift, reader_first, writes_tile = config
    s = np.zeros((rows, cols), x.dtype)
    y = np.zeros((chunks, 2, rows, cols), x.dtype)
    off = idx[0] % 2
    for k in range(chunks):
        if reader_first and k > 0:
            y[k, 0] = s
        at = idx[k * rows:(k + 1) * rows] + {"none": 0, "let": off, "in_loop": k % 3}[shift]
        inside = (at >= 0) & (at < SOURCE_ROWS)
        s = np.where(inside[:, None], x[np.clip(at, 0, SOURCE_ROWS - 1)], 0).astype(x.dtype)
        y[k, 1] = np.roll(s, -1, axis=1) * x.dtype.type(2)
        if writes_tile:
            s = s + x.dtype.type(1)
    return y


def issued_ahead(main) -> bool:
    return any("s" in p["buffers"] for p in tw.lower(main, target="sm_90a").func.attrs.get("pipelines", []))


def check(config, seed: int, nvrtc: bool) -> str:
    dtype, cols, rows, chunks = config[:4]

    label = []  # issued ahead or not, of the kernel that ran

    def run():
        main = kernel(config)
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((SOURCE_ROWS, cols)).astype(dtype)
        idx = rng.integers(-3, SOURCE_ROWS + 3, chunks * rows).astype(np.int32)
        want = reference(x, idx, config)
        for runner in (lambda *a: tw.compile(main, target="cpu")(*a), lambda *a: run_at_thread_level(main, *a)):
            y = np.zeros((chunks, 2, rows, cols), dtype)  # Y[k, 0] stays 0 where nothing reads before the gather
            runner(x, idx, y)
            np.testing.assert_array_equal(y, want)
        label.append("ahead" if issued_ahead(main) else "in place")
        return main

    result = outcome(run, nvrtc)
    return f"ok, {label[0]}" if result == "ok" else result


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 200, seed=11,
          key=refusals_together)
