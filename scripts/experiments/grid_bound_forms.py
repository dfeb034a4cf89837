"""Experiment: ``guard_global_accesses``' proof from the grid at random. A size known only at
launch (``rows``, ``T.dynamic``) bounds a block index through the grid's extent (``bx < rows * c``
so ``bx // c < rows``); where that proves an access inside the tensor its check is left out. Each
draw: a grid along x of ``rows * c + e`` blocks (``e`` in -1, 0, 1: the grid may overhang the rows
by a block) or ``T.ceildiv(rows, c)``, a row index ``bx // c``, ``bx * c + i`` or ``(bx + 1) // c``
(through a name bound to it, or not), each block reading its row of ``X`` and writing it doubled to
``Y``, at row counts that leave partial blocks. Both CPU interpreters against numpy (the thread
level checks every access against the tensor's bounds, so a check left out wrongly is an error
there); every kernel compiled by NVRTC for sm_90a (its source says whether the checks went, so the
``nvrtc`` draws of the other sweeps are all of them here). The counts say how many kernels kept no
check on the rows (``proven``) and how many kept one.

    PYTHONPATH=. python3 scripts/experiments/grid_bound_forms.py [draws]

The CI property ``tests/robustness/test_grid_bound_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

from tileworkbench.frontend.eager import parse_eager
from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, refusals_together, sweep

COLS = 32


def draw(rng: random.Random) -> tuple:
    c = rng.choice((1, 2, 3, 4))
    grid = rng.choice(("times", "times", "ceildiv"))
    extra = rng.choice((-1, 0, 0, 1)) if grid == "times" else 0
    index = rng.choice(("div", "div", "block_rows", "shifted_div"))
    return c, grid, extra, index, rng.random() < 0.5, rng.choice((2, 5, 7))  # a grid of one block at least


def kernel_source(c, grid, extra, index, named, rows_at_run) -> str:
    extent = f"rows * {c} + {extra}" if grid == "times" else f"T.ceildiv(rows, {c})"
    row = {"div": f"bx // {c}", "block_rows": f"bx * {c} + i", "shifted_div": f"(bx + 1) // {c}"}[index]
    lines = ["for i in T.serial(%d):" % (c if index == "block_rows" else 1)]
    if named:
        lines += [f"    r = {row}", "    for j in T.Parallel(COLS):", "        Y[r, j] = X[r, j] * 2"]
    else:
        lines += ["    for j in T.Parallel(COLS):", f"        Y[{row}, j] = X[{row}, j] * 2"]
    body = "\n".join(" " * 12 + line for line in lines)
    return f"""import tileworkbench as tw
import tileworkbench.language as T

COLS = {COLS}


@tw.jit
def main(X, Y):
    rows = T.dynamic("rows")
    X: T.Tensor[(rows, COLS), T.float32]
    Y: T.Tensor[(rows, COLS), T.float32]
    with T.Kernel({extent}, threads=32) as bx:
{body}
"""


def kernel(config):
    return kernel_from_source(kernel_source(*config), "grid_bounds")


def blocks(c, grid, extra, rows) -> int:
    return rows * c + extra if grid == "times" else -(-rows // c)


def reference(x, y, config) -> np.ndarray:
    c, grid, extra, index, named, rows = config
    out = y.copy()
    for bx in range(blocks(c, grid, extra, rows)):
        for i in range(c if index == "block_rows" else 1):
            r = {"div": bx // c, "block_rows": bx * c + i, "shifted_div": (bx + 1) // c}[index]
            if 0 <= r < rows:  # a row outside the tensor: its check skips the store
                out[r] = x[r] * 2
    return out


def proven(compiled) -> bool:
    """No check against ``rows`` left in the compiled kernel's accesses of X and Y."""
    return "< rows" not in compiled.get_kernel_source().split("// ---- kernel ----")[1]


def check(config, seed: int, nvrtc: bool) -> str:
    rows = config[-1]

    label = []  # the rows' checks left out or not, of the kernel that ran

    def run():
        main = kernel(config)
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((rows, COLS)).astype(np.float32)
        want = reference(x, np.zeros_like(x), config)
        program = parse_eager(main.fn, {})
        for runner in ("tile", "thread"):
            y = np.zeros_like(x)
            if runner == "tile":
                import tileworkbench as tw

                tw.jit(target="cpu")(main.fn)(x, y)
            else:
                run_at_thread_level(program, x, y)  # every access checked against the tensor's bounds
            np.testing.assert_array_equal(y, want)
        # NVRTC compiles it for sm_90a (a CompileError if not); its source says whether the checks went
        label.append("proven" if proven(main.compile()) else "checked")

    result = outcome(run, False)
    return f"ok, {label[0]}" if result == "ok" else result


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 200, seed=13,
          key=refusals_together)
