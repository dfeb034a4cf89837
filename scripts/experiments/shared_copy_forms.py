"""Experiment: the fragment reads that go through a shared copy (``stage_fragment_operands``'
transposes, ``localize_read_fragments``' column and computed-index reads) at random shapes, on both
CPU interpreters against numpy, every fourth kernel compiled by NVRTC for sm_90a. Each kernel
compiles and matches, or is refused with a CompileError; a wrong number, an internal error or any
other exception is counted as a bug (and printed).

    PYTHONPATH=. python3 scripts/experiments/shared_copy_forms.py [draws]

The CI property ``tests/robustness/test_shared_copy_forms.py`` runs a slice of it. docs/experiments.md
("TileLang's examples, unchanged") has a run.
"""

from __future__ import annotations

import random
import sys

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import outcome, sweep

FORMS = ("transpose_read", "transpose_store", "column", "groups")


def kernel(form: str, R: int, C: int, g: int, threads: int, dtype: str):
    """(prim_func, reference of the input, output shape, output dtype) of one form."""
    if form == "transpose_read":  # Mamba's xt[i, j] = x[j, i] * ...
        @T.prim_func
        def main(X: T.Tensor((R, C), dtype), Y: T.Tensor((C, R), dtype)):
            with T.Kernel(1, threads=threads):
                x = T.alloc_fragment((R, C), dtype)
                y = T.alloc_fragment((C, R), dtype)
                T.copy(X, x)
                for i, j in T.Parallel(C, R):
                    y[i, j] = x[j, i] * 2
                T.copy(y, Y)

        return main, lambda X: X.T * 2, (C, R), dtype
    if form == "transpose_store":  # GDN backward's Q_t[k, s] = Q[s, k]
        @T.prim_func
        def main(X: T.Tensor((R, C), dtype), Y: T.Tensor((C, R), dtype)):
            with T.Kernel(1, threads=threads):
                x = T.alloc_fragment((R, C), dtype)
                y = T.alloc_fragment((C, R), dtype)
                T.copy(X, x)
                for i, j in T.Parallel(R, C):
                    y[j, i] = x[i, j] + 1
                T.copy(y, Y)

        return main, lambda X: X.T + 1, (C, R), dtype
    if form == "column":  # Mamba chunk state's scale[j], computed from another fragment
        @T.prim_func
        def main(X: T.Tensor((R, C), dtype), Y: T.Tensor((R, C), dtype)):
            with T.Kernel(1, threads=threads):
                x = T.alloc_fragment((R, C), dtype)
                d = T.alloc_fragment((C,), "float32")
                v = T.alloc_fragment((C,), "float32")
                T.copy(X, x)
                T.copy(X[0, :], d)
                for j in T.Parallel(C):
                    v[j] = d[j] * 3
                for i, j in T.Parallel(R, C):
                    x[i, j] = x[i, j] * v[j]
                T.copy(x, Y)

        return main, lambda X: X * (X[0:1, :] * 3), (R, C), dtype
    groups = C // g  # mHC pre's x[i, jj * 4 + j]

    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), Y: T.Tensor((R, g), "float32")):
        with T.Kernel(1, threads=threads):
            x = T.alloc_fragment((R, C), dtype)
            part = T.alloc_fragment((R, g), "float32")
            T.copy(X, x)
            T.clear(part)
            for jj in T.serial(groups):
                for i, j in T.Parallel(R, g):
                    part[i, j] += x[i, jj * g + j]
            T.copy(part, Y)

    return main, lambda X: X.reshape(R, groups, g).sum(axis=1), (R, g), "float32"


def draw(rng: random.Random) -> tuple:
    R, C = rng.choice([8, 16, 32, 64, 128]), rng.choice([8, 16, 32, 64, 128])
    return (rng.choice(FORMS), R, C, rng.choice([d for d in (1, 2, 4, 8) if C % d == 0]),
            rng.choice([32, 64, 128, 256]), rng.choice(["float32", "float16"]))


def check(config: tuple, seed: int, nvrtc: bool) -> str:
    """``"ok"`` or ``"refused: <why>"``; raises AssertionError on a wrong number."""
    form, R, C, g, threads, dtype = config

    def run_and_compare():
        main, reference, shape, out_dtype = kernel(*config)
        x = np.random.default_rng(seed).standard_normal((R, C)).astype(dtype)
        want = reference(x.astype(np.float64))
        tol = 8e-3 if "float16" in (dtype, out_dtype) else 4e-5
        for run in (lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level):
            y = np.zeros(shape, out_dtype)
            run(main, x, y)
            np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol, err_msg=str(config))
        return main

    return outcome(run_and_compare, nvrtc)


def main(draws: int):
    sweep(draw, check, draws, seed=3)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 120)
