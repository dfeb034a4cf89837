"""Experiment: a ``T.view`` over its tile's bytes (``share_view_storage``) at random. Each kernel
keeps a (2, 128) float16 tile ``s`` and a float32 view ``v`` of 128 elements over it, and runs a few
rounds of statements through either name: a write of the tile from ``X`` at a shifted column, a
write of the view from the round's value, a read of either into ``Y``'s round row (at a shifted
column too), some under ``if tx < m`` and some user barriers between. The thread-level interpreter
runs each compiled kernel on the shared-memory plan the compiler made (the view at the tile's
offset where it lies over it) with its race records on: a barrier the compiler left out between
the two names is a KernelRuntimeError; its result is compared with numpy run statement by
statement (each name its own array: what a program may rely on). Or the kernel is refused with a
CompileError (``verify_shared_views``: a read through one name of what the other wrote last).
Anything else is a bug (printed, counted).

    PYTHONPATH=. python3 scripts/experiments/shared_view_forms.py [draws]

Session 39: 300 draws (seeds 9 and 10): 275 ok, 25 refused, no bug; with the sync pass not told
of the sharing, 25 races in 60 draws.
"""

from __future__ import annotations

import random
import sys

import numpy as np

from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, refusals_together, sweep

N = 128
ROUNDS = 3
KINDS = ("write_s", "write_v", "read_s", "read_v", "sync")


def draw(rng: random.Random) -> tuple:
    """Statements in which each name is first written whole (every thread, so every column) before
    it is read: no read of bytes nothing wrote this launch."""
    statements, written = [], set()
    while len(statements) < rng.randint(2, 6):
        kind = rng.choice(KINDS)
        name = kind[-1]
        if kind.startswith("read") and name not in written:
            continue
        m = N if kind.startswith("write") and name not in written else rng.choice((N, N, 40, 100))
        if kind.startswith("write"):
            written.add(name)
        statements.append((kind, rng.randint(0, N - 1), m))
    return tuple(statements)


def kernel_source(statements: tuple) -> str:
    lines = []
    for kind, shift, m in statements:
        col = f"(tx + {shift}) % N"
        if kind == "sync":
            lines.append("T.sync_threads()")
            continue
        stmt = {"write_s": f"s[0, {col}] = X[r, tx]",
                "write_v": f"v[{col}] = T.Cast(\"float32\", r) + X[r, tx] * 2.0",
                "read_s": f"Y[r, tx] = Y[r, tx] + T.Cast(\"float32\", s[0, {col}])",
                "read_v": f"Y[r, tx] = Y[r, tx] + v[{col}]"}[kind]
        lines += [stmt] if m == N else [f"if tx < {m}:", f"    {stmt}"]
    body = "\n".join(" " * 16 + line for line in lines)
    return f"""import tileworkbench.language as T

N = {N}


@T.prim_func
def main(X: T.Tensor(({ROUNDS}, N), "float16"), Y: T.Tensor(({ROUNDS}, N), "float32")):
    with T.Kernel(1, threads=N):
        tx = T.get_thread_binding()
        s = T.alloc_shared((2, N), "float16")
        v = T.view(s, shape=[N], dtype="float32")
        for r in T.serial({ROUNDS}):
{body}
"""


def reference(x: np.ndarray, statements: tuple) -> np.ndarray:
    """Statement by statement over all threads at once, each name its own array (a kernel reads a
    name only after writing it whole through that name, or is refused)."""
    s = np.zeros(N, np.float32)
    v = np.zeros(N, np.float32)
    y = np.zeros((ROUNDS, N), np.float32)
    tx = np.arange(N)
    for r in range(ROUNDS):
        for kind, shift, m in statements:
            if kind == "sync":
                continue
            run = tx < m
            col = (tx + shift) % N
            if kind == "write_s":
                s[col[run]] = x[r, tx[run]].astype(np.float32)
            elif kind == "write_v":
                v[col[run]] = np.float32(r) + x[r, tx[run]].astype(np.float32) * np.float32(2.0)
            elif kind == "read_s":
                y[r, run] += s[col[run]].astype(np.float16).astype(np.float32)
            else:
                y[r, run] += v[col[run]]
    return y


def check(statements, seed: int, nvrtc: bool) -> str:
    def run():
        main = kernel_from_source(kernel_source(statements), "views")
        x = np.random.default_rng(seed).standard_normal((ROUNDS, N)).astype(np.float16)
        y = np.zeros((ROUNDS, N), np.float32)
        run_at_thread_level(main, x, y)  # race records on: a missing barrier is an error
        np.testing.assert_allclose(y, reference(x, statements), rtol=1e-6, atol=1e-6)
        return main

    return outcome(run, nvrtc)


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 200, seed=9, key=refusals_together)
