"""Experiment: the halves of a shared double buffer (``insert_thread_syncs``' first-index rule,
tests/test_buffer_halves.py) at random. Each kernel keeps a (2, 128) shared tile and runs a few
rounds of statements, each a read of one half at a shifted column and a write of one half at the
thread's own, the halves named ``r % 2``, ``(r % 2) ^ 1``, ``(r + 1) % 2``, ``0`` or ``1`` (``r``
the round), some under ``if tx < m`` (a condition that differs between threads) and some user
barriers between. The thread-level interpreter runs each compiled kernel with its race records on
(a barrier the compiler left out where two threads touch one element is a KernelRuntimeError) and
its result is compared with numpy run statement by statement; or the kernel is refused with a
CompileError (a hazard inside the variant ``if``). Anything else is a bug (printed, counted).

    PYTHONPATH=. python3 scripts/experiments/buffer_halves_forms.py [draws]

The CI property ``tests/robustness/test_buffer_halves_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, refusals_together, sweep

N = 128
HALVES = ("r % 2", "(r % 2) ^ 1", "(r + 1) % 2", "0", "1")


def half(name: str, r: int) -> int:
    """The half ``name`` names in round ``r``."""
    return {"r % 2": r % 2, "(r % 2) ^ 1": (r % 2) ^ 1, "(r + 1) % 2": (r + 1) % 2, "0": 0, "1": 1}[name]


def draw(rng: random.Random) -> tuple:
    statements = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("move", "move", "move_if", "move_if", "sync"))
        statements.append((kind, rng.choice(HALVES), rng.choice(HALVES), rng.randint(0, N - 1),
                           float(rng.randint(1, 3)), rng.choice((40, 100, 127))))
    return rng.randint(1, 4), tuple(statements)


def kernel_source(rounds: int, statements: tuple) -> str:
    """The kernel's source, its statements spelt out (the DSL builds no Python loop over them)."""
    lines = []
    for n, (kind, src, dst, shift, add, m) in enumerate(statements):
        read, write = f"s[{src}, (tx + {shift}) % N]", f"s[{dst}, tx]"
        if kind == "sync":
            lines.append("T.sync_threads()")
        elif kind == "move":
            lines += [f"v{n} = {read}", f"{write} = v{n} + {add}"]
        else:
            lines += [f"if tx < {m}:", f"    v{n} = {read}", f"    {write} = v{n} + {add}"]
    body = "\n".join(" " * 16 + line for line in lines)
    return f"""import tileworkbench.language as T

N = {N}


@T.prim_func
def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((2, N), "float32")):
    with T.Kernel(1, threads=N):
        tx = T.get_thread_binding()
        s = T.alloc_shared((2, N), "float32")
        s[0, tx] = X[tx]
        s[1, tx] = X[(tx + 1) % N] * 2.0
        for r in T.serial({rounds}):
{body}
        Y[0, tx] = s[0, tx]
        Y[1, tx] = s[1, tx]
"""


def kernel(rounds: int, statements: tuple):
    """The kernel, from its source written to a file of its own (the front end reads the source)."""
    return kernel_from_source(kernel_source(rounds, statements), "halves")


def reference(x: np.ndarray, rounds: int, statements: tuple) -> np.ndarray:
    """Statement by statement over all threads at once (every hazard ordered)."""
    s = np.stack([x, np.roll(x, -1) * 2]).astype(np.float32)
    tx = np.arange(N)
    for r in range(rounds):
        for kind, src, dst, shift, add, m in statements:
            if kind == "sync":
                continue
            running = tx < (m if kind == "move_if" else N)
            v = s[half(src, r), (tx + shift) % N]
            s[half(dst, r), running] = v[running] + np.float32(add)
    return s


def check(config, seed: int, nvrtc: bool) -> str:
    rounds, statements = config

    def run():
        main = kernel(rounds, statements)
        x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        y = np.zeros((2, N), np.float32)
        run_at_thread_level(main, x, y)  # race records on: a missing barrier is an error
        np.testing.assert_array_equal(y, reference(x, rounds, statements))
        return main

    return outcome(run, nvrtc)


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 200, seed=5,
          key=refusals_together)
