"""Experiment: fragment views (``T.reshape`` of a fragment, ``frontend.fragment_views``) at random.
Each draw: an ``(R, G * H)`` fragment loaded from ``A``, seen as ``(R, G, H)``; a ``T.Parallel``
loop over the view's dimensions, in their order or another (merged into one over the fragment's by
``merge_parallel_dims``)
applies a weight of each (group, head), from a fragment or from global memory; one of the view's
reductions (sum, max, min, absmax; along its last dimension, runs of ``H``; with ``clear=False``
into a result loaded first, or not); the result stored in order (``T.copy``) or transposed, or the
view itself stored back through a loop over the fragment. Sizes and thread counts vary (a group
of 1 makes the reduction a whole row's; heads of 1, 3 or 5 make runs shorter than a warp's lanes).
Both CPU interpreters against numpy; NVRTC for sm_90a on every fourth draw.

    PYTHONPATH=. python3 scripts/experiments/fragment_view_forms.py [draws]

The CI property ``tests/robustness/test_fragment_view_forms.py`` runs a slice of it. (The register
path of runs of a tensor-core accumulator's rows needs a gemm, which the thread-level interpreter
does not run: its slot arithmetic is checked element by element in
``tests/tilelang_compat/test_fragment_reshape.py``.)
"""

from __future__ import annotations

import random
import sys

import numpy as np

from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, refusals_together, sweep

KINDS = {"sum": np.sum, "max": np.max, "min": np.min, "absmax": lambda x, axis: np.abs(x).max(axis=axis)}


def draw(rng: random.Random) -> tuple:
    rows = rng.choice((8, 16, 64))
    groups = rng.choice((1, 2, 3, 4))
    heads = rng.choice((1, 3, 5, 8, 16, 32))
    threads = rng.choice((32, 64, 128))
    weight = rng.choice(("fragment", "global", "none"))
    kind = rng.choice(tuple(KINDS))
    clear = rng.random() < 0.7
    store = rng.choice(("copy", "transposed", "view"))
    order = rng.choice(("rgh", "rgh", "grh", "hrg"))  # the weighting loop's dimensions, in this order
    return rows, groups, heads, threads, weight, kind, clear, store, order


def kernel_source(rows, groups, heads, threads, weight, kind, clear, store, order="rgh") -> str:
    factor = {"fragment": " * w[g, h]", "global": " * W[g, h]", "none": ""}[weight]
    lines = [
        f's = T.alloc_fragment(({rows}, {groups * heads}), "float32")',
        f"v = T.reshape(s, ({rows}, {groups}, {heads}))",
        f'out = T.alloc_fragment(({rows}, {groups}), "float32")',
        "T.copy(A, s)",
    ]
    if weight == "fragment":
        lines += [f'w = T.alloc_fragment(({groups}, {heads}), "float32")', "T.copy(W, w)"]
    extent = {"r": rows, "g": groups, "h": heads}
    lines += [f"for {', '.join(order)} in T.Parallel({', '.join(str(extent[d]) for d in order)}):",
              f"    v[r, g, h] = v[r, g, h]{factor} + 0.5"]
    if not clear:
        lines += ["T.copy(Start, out)"]
    lines += [f"T.reduce_{kind}(v, out, dim=-1, clear={clear})"]
    if store == "copy":
        lines += ["T.copy(out, Out)"]
    elif store == "transposed":
        lines += [f"for g, r in T.Parallel({groups}, {rows}):", "    OutT[g, r] = out[r, g]"]
    else:
        lines += [f"for r, g, h in T.Parallel({rows}, {groups}, {heads}):", "    V[r, g, h] = v[r, g, h] * 2"]
    body = "\n".join(" " * 8 + line for line in lines)
    return f"""import tileworkbench.language as T


@T.prim_func
def main(A: T.Tensor(({rows}, {groups * heads}), "float32"), W: T.Tensor(({groups}, {heads}), "float32"),
         Start: T.Tensor(({rows}, {groups}), "float32"), Out: T.Tensor(({rows}, {groups}), "float32"),
         OutT: T.Tensor(({groups}, {rows}), "float32"), V: T.Tensor(({rows}, {groups}, {heads}), "float32")):
    with T.Kernel(1, threads={threads}):
{body}
"""


def reference(a, w, start, config) -> dict:
    rows, groups, heads, threads, weight, kind, clear, store = config[:8]
    v = a.astype(np.float64).reshape(rows, groups, heads)
    v = v * (w if weight != "none" else 1) + 0.5
    out = KINDS[kind](v, axis=2)
    if not clear:
        out = start + out if kind == "sum" else (np.maximum if kind in ("max", "absmax") else np.minimum)(start, out)
    return {"copy": ("Out", out), "transposed": ("OutT", out.T), "view": ("V", v * 2)}[store]


def check(config, seed: int, nvrtc: bool) -> str:
    rows, groups, heads = config[:3]

    def run():
        main = kernel_from_source(kernel_source(*config), "fragment_views")
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((rows, groups * heads)).astype(np.float32)
        w = rng.standard_normal((groups, heads)).astype(np.float32)
        start = rng.standard_normal((rows, groups)).astype(np.float32)
        name, want = reference(a, w, start, config)
        for runner in ("tile", "thread"):
            outs = {"Out": np.zeros((rows, groups), np.float32), "OutT": np.zeros((groups, rows), np.float32),
                    "V": np.zeros((rows, groups, heads), np.float32)}
            args = (a, w, start, outs["Out"], outs["OutT"], outs["V"])
            if runner == "tile":
                import tileworkbench as tw

                tw.compile(main, target="cpu")(*args)
            else:
                run_at_thread_level(main, *args)
            np.testing.assert_allclose(outs[name], want, rtol=1e-5, atol=1e-5, err_msg=runner)
        return main

    return outcome(run, nvrtc)


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 200, seed=17, key=refusals_together)
