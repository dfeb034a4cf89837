"""Experiment: which tile configuration serves each attention row best (ours), before the attention
suite picks a configuration per head dimension.

For each row (1 x 16 x SEQ, SEQ 8192 unless given, head dim 128 and 64, causal and not) and each
configuration that fits (block_M, block_N, num_stages, threads; the ones that do not compile are
reported and skipped): the kernel is checked against a float32 reference on random inputs, then all of the
row's kernels are timed in 3 alternating rounds of ``profiler.do_bench`` (median ms, L2 flushed).

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/attention_configs.py [DIM ...] [seq=SEQ]   (default: 128 64)

Findings: docs/experiments.md, "Attention tile configurations".
"""

from __future__ import annotations

import statistics
import sys

from tileworkbench.bench.attention import check, compile_mha, reference
from tileworkbench.profiler import do_bench

CONFIGS = {
    128: [(128, 128, 2, 256), (128, 176, 2, 256), (128, 192, 2, 256), (128, 160, 2, 256), (128, 128, 1, 256),
          (64, 128, 2, 128)],
    64: [(128, 128, 2, 256), (128, 192, 2, 256), (128, 256, 2, 256), (128, 128, 3, 256), (192, 128, 2, 384),
         (64, 256, 2, 128)],
}


def main(dims, seq: int = 8192) -> None:
    import torch

    for dim in dims:
        configs = CONFIGS[dim]
        for causal in (False, True):
            torch.manual_seed(0)
            q, k, v = (torch.randn(1, 16, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
            want = reference(torch, q, k, v, causal)
            kernels = {}
            row = f"d{dim} {'causal' if causal else 'full'}"
            for bm, bn, stages, threads in configs:
                name = f"{bm}x{bn} s{stages} t{threads}"
                kernel = checked_kernel(f"{row} {name}", lambda: compile_mha(
                    1, 16, seq, dim, causal, block_M=bm, block_N=bn, num_stages=stages, threads=threads),
                    torch, (q, k, v), want)
                if kernel is not None:
                    kernels[name] = kernel
            flops = 4 * 16 * seq * seq * dim / (2 if causal else 1)
            for name, ms in alternating_medians(kernels, q, k, v).items():
                print(f"d{dim} {'causal' if causal else 'full':6s} {name:22s} {ms:.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s",
                      flush=True)


def checked_kernel(label: str, make, torch, inputs, want):
    """``make()``'s kernel if it compiles and its result on ``inputs`` matches ``want`` (the float32
    reference, ``bench.attention.check``), else None, with what went wrong printed after ``label``."""
    try:
        kernel = make()
        result = check(torch, kernel(*inputs), want)
    except Exception as exc:  # noqa: BLE001 - reported, the row goes on
        print(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", flush=True)
        return None
    if not result["correct"]:
        print(f"{label}: WRONG {result}", flush=True)
        return None
    return kernel


def alternating_medians(kernels: dict, q, k, v, rounds: int = 3) -> dict:
    """name -> median ms of each kernel over ``rounds`` rounds in which every kernel takes a turn
    (``do_bench``: median of its runs, L2 flushed), so that a clock that drifts charges all alike."""
    times = {name: [] for name in kernels}
    for _ in range(rounds):
        for name, kernel in kernels.items():
            times[name].append(do_bench(lambda kernel=kernel: kernel(q, k, v), warmup=25, rep=100,
                                        return_mode="median"))
    return {name: statistics.median(samples) for name, samples in times.items()}


if __name__ == "__main__":
    args = sys.argv[1:]
    seqs = [int(a.split("=", 1)[1]) for a in args if a.startswith("seq=")]
    main([int(d) for d in args if not d.startswith("seq=")] or list(CONFIGS), *seqs[-1:])
