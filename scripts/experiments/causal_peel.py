"""Experiment: causal attention with its diagonal tile peeled off the loop, with and without the
two-gemm overlap.

Causal attention masks its scores with a branch on whether the key tile is left of, on or right of
the diagonal (``split_uniform_selects``); only the last iteration of a query block's loop is on
it. ``peel_last_iteration`` runs that iteration after the loop, and the loop without the branch.
With the branch in the loop the overlap (``tw.gemm_overlap``, FlashAttention-3's intra-warpgroup
schedule) ran causal attention at 0.970x of the plain schedule, so causal kernels keep the plain
one by default. This compiles our causal forward kernel four ways (plain / overlap, each with and
without the peel: the pass taken out of the codegen list for the "no peel" ones), checks each
against a float32 reference on random inputs, and times them in alternating rounds.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/causal_peel.py [SEQxDIM ...]   (default 4096x128 8192x128 8192x64)
"""

import sys

from _compare import alternating_medians


def compile_variant(seq, dim, overlap: bool, peel: bool):
    from tileworkbench.bench.attention import compile_mha
    from tileworkbench.passes import pipeline

    saved = list(pipeline.CODEGEN)
    if not peel:
        pipeline.CODEGEN.remove("peel_last_iteration")
    try:
        return compile_mha(1, 16, seq, dim, True, pass_configs={"tw.gemm_overlap": overlap})
    finally:
        pipeline.CODEGEN[:] = saved


def main(rows):
    import os

    import torch

    from tileworkbench.bench.attention import check, reference

    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # the variants differ by a pass the cache key does not see
    for row in rows:
        seq, dim = (int(x) for x in row.split("x"))
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 16, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
        want = reference(torch, q, k, v, True)
        kernels = {}
        for overlap in (False, True):
            for peel in (False, True):
                name = f"{'overlap' if overlap else 'plain'}{' + peel' if peel else ''}"
                kernels[name] = compile_variant(seq, dim, overlap, peel)
                result = check(torch, kernels[name](q, k, v), want)
                print(f"{row} {name}: {result}", flush=True)
                assert result["correct"], name
        medians = alternating_medians({name: (lambda f=kern: f(q, k, v)) for name, kern in kernels.items()})
        flops = 4 * 16 * seq * seq * dim / 2
        base = medians["plain"]
        for name, ms in medians.items():
            print(f"{row} causal {name}: {flops / ms / 1e9:.0f} TFLOP/s, {base / ms:.3f}x plain", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["4096x128", "8192x128", "8192x64"])
