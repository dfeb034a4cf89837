"""Experiment: which GEMM tiles warp specialisation speeds up, and which it slows down.

Measures: ``examples.matmul`` at each of the bench's general tile configs (block M x N x K,
stages, threads), fp16, at the sizes given, compiled as the compiler decides (warp-specialised,
persistent) and with ``tl.disable_warp_specialized``; each checked against float32 on random
inputs, then the two timed in 5 alternating rounds (``profiler.do_bench``, median ms); prints
TFLOP/s and the ratio ws / plain.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/ws_by_tile.py [4096,8192]

Findings: docs/experiments.md, "Warp specialisation by tile".
"""

from __future__ import annotations

import statistics
import sys

import tileworkbench as tw
from tileworkbench.bench.gemm import GENERAL_TILES
from tileworkbench.examples import matmul
from tileworkbench.profiler import do_bench

PLAIN = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def main(sizes) -> None:
    import torch

    for size in sizes:
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        for tile in GENERAL_TILES:
            kernels = {}
            for label, configs in (("ws", None), ("plain", PLAIN)):
                k = tw.compile(matmul(size, size, size, **tile.as_kwargs()), out_idx=[2], pass_configs=configs)
                err = ((k(a, b).float() - ref).norm() / ref.norm()).item()
                assert err < 2e-3, (tile.name, label, err)
                kernels[label] = k
            ms = {label: [] for label in kernels}
            for _ in range(5):
                for label, k in kernels.items():
                    ms[label].append(do_bench(lambda k=k: k(a, b), warmup=10, rep=50, return_mode="median"))
            med = {label: statistics.median(v) for label, v in ms.items()}
            applied = "producer warpgroup" in kernels["ws"].get_kernel_source()
            tf = {label: 2 * size**3 / m / 1e9 for label, m in med.items()}
            print(f"{size} {tile.name:22s} ws {tf['ws']:6.1f}  plain {tf['plain']:6.1f} TFLOP/s  "
                  f"ws/plain {med['plain'] / med['ws']:.3f}  (ws applied: {applied})", flush=True)


if __name__ == "__main__":
    main([int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "4096,8192").split(",")])
