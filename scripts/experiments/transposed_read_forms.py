"""Experiment: ``T.Parallel`` nests that read fragments at their loop variables in another order
(``stage_fragment_operands``: a nest storing no fragment and reading fragments in one other order
only runs in that order; one that also reads a fragment in its own order, or stores one, reads the
permuted one through a shared copy). Each draw: a fragment ``x`` (rows, cols) loaded from global
memory or computed (a reduction's rows, a fragment's elementwise update), read in a loop over
``(cols, rows)`` as ``x[i, j]`` with ``i`` the inner variable, the result stored to global memory
(``Y[j, i]``, or through a shared tile), with a row fragment (``x``'s row maxima) read beside it or
not, a second fragment read in the loop's own order or not; the sizes, thread counts and dtypes
drawn. Both CPU interpreters against numpy; NVRTC for sm_90a on every fourth draw.

    PYTHONPATH=. python3 scripts/experiments/transposed_read_forms.py [draws]

The CI property ``tests/robustness/test_transposed_read_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, sweep


def draw(rng: random.Random) -> tuple:
    return (rng.choice((8, 16, 32, 64)), rng.choice((16, 32, 64, 128)), rng.choice((32, 64, 128, 256)),
            rng.choice(("load", "scaled")), rng.choice(("global", "shared")), rng.choice((True, False)),
            rng.choice((True, False)), rng.choice(("float16", "float32")))


def label(config, result: str) -> str:
    """Counts by outcome and by whether the nest keeps its shared copy (a second fragment read in
    the loop's own order keeps it)."""
    if not result.startswith("ok"):
        return result if result.startswith("bug") else "refused"
    return "ok, read in place" if not config[6] else "ok, through a shared copy"


def kernel_source(rows, cols, threads, make, store, row_max, own_order, dtype) -> str:
    lines = [f'x = T.alloc_fragment(({rows}, {cols}), "float32")', "T.copy(X, x)"]
    if make == "scaled":
        lines += [f"for r, c in T.Parallel({rows}, {cols}):", "    x[r, c] = x[r, c] * 0.5 + 1.0"]
    if row_max:
        lines += [f'm = T.alloc_fragment(({rows},), "float32")', "T.reduce_max(x, m, dim=1)"]
    if own_order:
        lines += [f'z = T.alloc_fragment(({cols}, {rows}), "float32")', "T.copy(Z, z)"]
    value = "x[i, j] * 2.0" + (" - m[i]" if row_max else "") + (" + z[j, i]" if own_order else "")
    target = "Y[j, i]" if store == "global" else "y_shared[j, i]"
    if store == "shared":
        lines.append(f'y_shared = T.alloc_shared(({cols}, {rows}), "{dtype}")')
    lines += [f"for j, i in T.Parallel({cols}, {rows}):", f"    {target} = {value}"]
    if store == "shared":
        lines.append("T.copy(y_shared, Y)")
    body = "\n".join(" " * 8 + line for line in lines)
    return f"""import tileworkbench.language as T


@T.prim_func
def main(X: T.Tensor(({rows}, {cols}), "float32"), Z: T.Tensor(({cols}, {rows}), "float32"),
         Y: T.Tensor(({cols}, {rows}), "{dtype}")):
    with T.Kernel(1, threads={threads}):
{body}
"""


def reference(config, x, z) -> np.ndarray:
    make, row_max, own_order = config[3], config[5], config[6]
    x = x.astype(np.float64)
    if make == "scaled":
        x = x * 0.5 + 1.0
    y = x * 2.0
    if row_max:
        y = y - x.max(axis=1, keepdims=True)
    y = y.T
    if own_order:
        y = y + z
    return y


def check(config, seed: int, nvrtc: bool) -> str:
    rows, cols, dtype = config[0], config[1], config[-1]

    def run():
        main = kernel_from_source(kernel_source(*config), "transposed_reads")
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        z = rng.standard_normal((cols, rows)).astype(np.float32)
        want = reference(config, x, z)
        tolerance = 1e-2 if dtype == "float16" else 1e-5
        for runner in ("tile", "thread"):
            out = np.zeros((cols, rows), dtype)
            if runner == "tile":
                import tileworkbench as tw

                tw.compile(main, target="cpu")(x, z, out)
            else:
                run_at_thread_level(main, x, z, out)
            np.testing.assert_allclose(out.astype(np.float64), want, rtol=tolerance, atol=tolerance, err_msg=runner)
        return main

    return outcome(run, nvrtc)


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 120, seed=23, key=label)
