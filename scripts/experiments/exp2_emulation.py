"""Experiment: what ``tw.exp2_emulation`` (passes/emulate_exp2.py: one exponential in k computed
on the FMA pipe instead of the MUFU) does to our FlashAttention forward, against the same kernel
without it.

For each row (1 x 16 x SEQ, SEQ 8192 unless given, head dims 64 and 128 unless given, causal and
not) our kernel at its configuration for the head dimension is compiled plain and with k = 4, 8
and 16, each checked against a float32 reference on random inputs (``bench.attention.check``),
then all timed in 3 alternating rounds of ``profiler.do_bench`` (median ms, L2 flushed).

Run on the GPU:

    PYTHONPATH=. python3 scripts/experiments/exp2_emulation.py [DIM ...] [seq=SEQ] [k=4,8,16]

Written in session 44 (docs/experiments.md), not yet run: at head dim 64 the exponentials keep
the MUFU as busy as the tensor cores, so this is where it could pay.
"""

from __future__ import annotations

import sys

from attention_configs import alternating_medians, checked_kernel  # this folder's: the tile survey's check and timing

from tileworkbench.bench.attention import compile_mha, reference


def main(dims, seq: int, ks) -> None:
    import torch

    for dim in dims:
        for causal in (False, True):
            row = f"d{dim} {'causal' if causal else 'full'}"
            torch.manual_seed(0)
            q, k, v = (torch.randn(1, 16, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
            want = reference(torch, q, k, v, causal)
            kernels = {}
            for every in [None, *ks]:
                name = "plain" if every is None else f"k={every}"
                configs = {} if every is None else {"tw.exp2_emulation": every}
                kernel = checked_kernel(f"{row} {name}", lambda: compile_mha(1, 16, seq, dim, causal, pass_configs=configs),
                                        torch, (q, k, v), want)
                if kernel is not None:
                    kernels[name] = kernel
            flops = 4 * 16 * seq * seq * dim / (2 if causal else 1)
            medians = alternating_medians(kernels, q, k, v)
            plain = medians.get("plain")
            for name, ms in medians.items():
                ratio = f"{plain / ms:.3f}x plain" if plain else ""
                print(f"{row:12s} {name:6s} {ms:.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s {ratio}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    seqs = [int(a.split("=", 1)[1]) for a in args if a.startswith("seq=")]
    ks = [int(x) for a in args if a.startswith("k=") for x in a.split("=", 1)[1].split(",")] or [4, 8, 16]
    dims = [int(a) for a in args if a.isdigit()] or [64, 128]
    main(dims, seqs[-1] if seqs else 8192, ks)
