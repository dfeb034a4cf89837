"""Experiment: fragments read as slices ``F[k, ...]`` at random (``ir.layout.slice_layout``, and
``StackedLayout`` where the slices are read in loops over another fragment's rows). Each draw: a
``(splits, rows)`` fragment of per-split log-sum-exps, loaded from global memory, combined as MHA
inference's decoding does (its maximum over the splits, each split's slice read by a copy or by a
loop, the partial outputs of a ``(rows, dim)`` accumulator scaled by it), with the sizes, thread
counts, the slices' type and how the maximum is taken (a reduction over the splits, or a loop over
them) drawn. Both CPU interpreters against numpy; NVRTC for sm_90a on every fourth draw.

    PYTHONPATH=. python3 scripts/experiments/slice_layout_forms.py [draws]

The CI property ``tests/robustness/test_slice_layout_forms.py`` runs a slice of it.
"""

from __future__ import annotations

import random
import sys

import numpy as np

from tileworkbench.interpreter.threads import run_at_thread_level

from _sweep import kernel_from_source, outcome, refusals_together, sweep


def draw(rng: random.Random) -> tuple:
    return (rng.choice((1, 2, 3, 4)), rng.choice((16, 32, 64, 128)), rng.choice((32, 64, 128)),
            rng.choice((64, 128, 256)), rng.choice(("copy", "loop")), rng.choice(("reduce", "loop")),
            rng.choice(("float16", "float32")))


def kernel_source(splits, rows, dim, threads, read, top, dtype) -> str:
    take = (["T.copy(lse[k, :], lse_split)"] if read == "copy" else
            [f"for i in T.Parallel({rows}):", "    lse_split[i] = lse[k, i]"])
    maximum = (["T.reduce_max(lse, top, dim=0, clear=True)"] if top == "reduce" else
               ["T.fill(top, -T.infinity('float32'))", f"for k in T.serial({splits}):",
                f"    for i in T.Parallel({rows}):", "        top[i] = T.max(top[i], lse[k, i])"])
    lines = [
        f'acc = T.alloc_fragment(({rows}, {dim}), "float32")',
        f'lse = T.alloc_fragment(({splits}, {rows}), "{dtype}")',
        f'lse_split = T.alloc_fragment(({rows},), "float32")',
        f'logsum = T.alloc_fragment(({rows},), "float32")',
        f'top = T.alloc_fragment(({rows},), "float32")',
        "T.clear(logsum)", "T.clear(acc)", "T.copy(Lse, lse)", *maximum,
        f"for k in T.serial({splits}):", *("    " + t for t in take),
        f"    for i in T.Parallel({rows}):", "        logsum[i] += T.exp2(lse_split[i] - top[i])",
        f"for i in T.Parallel({rows}):", "    logsum[i] = T.log2(logsum[i]) + top[i]",
        f"for k in T.serial({splits}):", *("    " + t for t in take),
        f"    for i, j in T.Parallel({rows}, {dim}):",
        "        acc[i, j] += Parts[i, k, j] * T.exp2(lse_split[i] - logsum[i])",
        "T.copy(acc, Out)",
    ]
    body = "\n".join(" " * 12 + line for line in lines)
    return f"""import tileworkbench.language as T


@T.prim_func
def main(Lse: T.Tensor(({splits}, {rows}), "{dtype}"), Parts: T.Tensor(({rows}, {splits}, {dim}), "float32"),
         Out: T.Tensor(({rows}, {dim}), "float32")):
    with T.Kernel(1, threads={threads}):
{body}
"""


def reference(lse, parts) -> np.ndarray:
    lse = lse.astype(np.float64)
    logsum = np.log2(np.exp2(lse - lse.max(0)).sum(0)) + lse.max(0)
    return (parts.astype(np.float64) * np.exp2(lse - logsum).T[:, :, None]).sum(1)


def check(config, seed: int, nvrtc: bool) -> str:
    splits, rows, dim, dtype = config[0], config[1], config[2], config[-1]

    def run():
        main = kernel_from_source(kernel_source(*config), "slice_layouts")
        rng = np.random.default_rng(seed)
        lse = rng.standard_normal((splits, rows)).astype(dtype)
        parts = rng.standard_normal((rows, splits, dim)).astype(np.float32)
        want = reference(lse, parts)
        for runner in ("tile", "thread"):
            out = np.zeros((rows, dim), np.float32)
            if runner == "tile":
                import tileworkbench as tw

                tw.compile(main, target="cpu")(lse, parts, out)
            else:
                run_at_thread_level(main, lse, parts, out)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=runner)
        return main

    return outcome(run, nvrtc)


if __name__ == "__main__":
    sweep(draw, check, int(sys.argv[1]) if len(sys.argv) > 1 else 120, seed=19, key=refusals_together)
