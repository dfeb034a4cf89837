"""Experiment: ``if tx < C:`` thread scopes (``frontend.statements``: C whole warps, fewer than the
block's threads) at random block sizes, scope sizes and lengths, on both CPU interpreters against
numpy, every fourth kernel compiled by NVRTC for sm_90a. The forms: a fill and copy of a shared tile,
a ``T.Parallel`` loop, a fragment reduced in the scope, a shared scan ordered by the scope's named
barrier (``T.sync_threads(id, C)``), and an ``if``/``else`` whose branches do different tile work
(``tx < C``, and ``tx >= C``: the last threads' scope first), an ``if``/``elif``/``else`` chain of
three scopes (``elif tx >= C and tx < C + 32``, as FlashMLA writes it);
and tile work under a condition that is no whole warps (``tx < C - 16``), which must be refused. Each kernel compiles and matches, or is refused with a CompileError; a wrong number, an
internal error or any other exception is counted as a bug (and printed).

    PYTHONPATH=. python3 scripts/experiments/thread_scope_forms.py [draws]

The CI property ``tests/robustness/test_thread_scope_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import outcome, sweep

FORMS = ("fill_copy", "parallel", "reduce", "scan", "if_else", "at_least", "chain", "part_of_warp")


def kernel(form: str, threads: int, C: int, N: int):
    """``(prim_func, reference(x) -> (y, z))``: ``x`` float32 of N elements in, ``y`` and ``z`` out."""
    if form == "fill_copy":
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=threads):
                tx = T.get_thread_binding()
                s = T.alloc_shared((N,), "float32")
                if tx < C:
                    T.fill(s, 3.0)
                    T.copy(s, Y)
                    T.copy(X, s)
                    T.copy(s, Z)

        return main, lambda x: (np.full(N, 3.0), x)
    if form == "part_of_warp":  # 16 threads short of whole warps: must be refused
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=threads):
                tx = T.get_thread_binding()
                if tx < C - 16:
                    for i in T.Parallel(N):
                        Y[i] = X[i]

        return main, None
    if form == "parallel":
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=threads):
                tx = T.get_thread_binding()
                xs = T.alloc_shared((N,), "float32")
                T.copy(X, xs)
                if tx < C:
                    for i in T.Parallel(N):
                        Y[i] = xs[N - 1 - i] * 2.0 + 1.0
                    for i in T.Parallel(N):
                        Z[i] = xs[i] - xs[N - 1 - i]

        return main, lambda x: (x[::-1] * 2 + 1, x - x[::-1])
    if form == "reduce":
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=threads):
                tx = T.get_thread_binding()
                xs = T.alloc_shared((N,), "float32")
                T.copy(X, xs)
                if tx < C:
                    f = T.alloc_fragment((N,), "float32")
                    total = T.alloc_fragment((1,), "float32")
                    T.copy(xs, f)
                    T.reduce_sum(f, total, dim=0)
                    for i in T.Parallel(N):
                        Y[i] = total[0]
                    T.reduce_max(f, total, dim=0)
                    for i in T.Parallel(N):
                        Z[i] = f[i] - total[0]

        return main, lambda x: (np.full(N, x.sum()), x - x.max())
    if form == "scan":  # N == C: one element a thread of the scope
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=threads):
                tx = T.get_thread_binding()
                s = T.alloc_shared((N,), "float32")
                val = T.alloc_local((1,), "float32")
                if tx < C:
                    s[tx] = X[tx]
                    for k in T.serial(N.bit_length() - 1):
                        T.sync_threads(1, C)
                        if tx >= (1 << k):
                            val[0] = s[tx] + s[tx - (1 << k)]
                        T.sync_threads(1, C)
                        if tx >= (1 << k):
                            s[tx] = val[0]
                    T.sync_threads(1, C)
                    Y[tx] = s[tx]
                    Z[tx] = s[N - 1 - tx]

        return main, lambda x: (np.cumsum(x), np.cumsum(x)[::-1])

    @T.macro
    def halves(xs, Y):
        for i in T.Parallel(N):
            Y[i] = xs[i] * 0.5

    @T.macro
    def squares(xs, Z):
        f = T.alloc_fragment((N,), "float32")
        T.copy(xs, f)
        for i in T.Parallel(N):
            f[i] = f[i] * f[i]
        T.copy(f, Z)

    C2 = C + 32  # the chain's second branch: the next warp, where the block has one more after it

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads):
            xs = T.alloc_shared((N,), "float32")
            T.copy(X, xs)
            if form == "chain":  # FlashMLA's if / elif / else on the thread index: three scopes
                tx = T.get_thread_binding()
                spare = T.alloc_shared((N,), "float32")
                if C2 < threads:
                    if tx < C:
                        halves(xs, Y)
                    elif tx >= C and tx < C2:
                        squares(xs, Z)
                    else:
                        T.fill(spare, 1.0)
                else:
                    if tx < C:
                        halves(xs, Y)
                    elif tx >= C:
                        squares(xs, Z)
            elif form == "at_least":  # `if tx >= C:` the last threads' scope, its `else` the first C
                if T.get_thread_binding() >= C:
                    squares(xs, Z)
                else:
                    halves(xs, Y)
            elif T.get_thread_binding() < C:
                halves(xs, Y)
            else:
                squares(xs, Z)

    return main, lambda x: (x * 0.5, x * x)


def draw(rng: random.Random) -> tuple:
    threads = rng.choice([64, 96, 128, 160, 256])
    C = rng.choice(range(32, threads, 32))
    form = rng.choice(FORMS)
    N = C if form == "scan" and C & (C - 1) == 0 else rng.choice([32, 64, 128, 256])
    if form == "scan" and N != C:
        form = "parallel"  # the scan takes one element per thread of a power-of-two scope
    return form, threads, C, N


def check(config: tuple, seed: int, nvrtc: bool) -> str:
    """``"ok"`` or ``"refused: <why>"``; raises AssertionError on a wrong number, or on tile work
    under part of a warp that was not refused."""
    form, threads, C, N = config

    def run_and_compare():
        main, reference = kernel(form, threads, C, N)
        if reference is None:
            tw.lower(main, target="sm_90a")
            raise AssertionError(f"{config}: tile work under a condition of part of a warp was not refused")
        x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        want_y, want_z = reference(x.astype(np.float64))
        for run in (lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level):
            y, z = np.zeros(N, np.float32), np.zeros(N, np.float32)
            run(main, x, y, z)
            for got, want, name in ((y, want_y, "Y"), (z, want_z, "Z")):
                np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"{config} {name}")
        return main

    return outcome(run_and_compare, nvrtc)


def main(draws: int):
    sweep(draw, check, draws, seed=5, key=lambda config, result: f"{config[0]}: {result.split(':')[0]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
