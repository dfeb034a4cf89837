"""Experiment: what the persistent grid buys the warp-specialised GEMM (issue 4's 4096^3 target).

For a few tile configs, the compiler's persistent kernel (default) and the same kernel with
``tw.disable_persistent`` (one block per tile), next to cuBLAS, timed in interleaved rounds
(median TFLOP/s of 5 rounds). Every kernel's output is checked against a float32 reference
first, and the two kernels against each other bit for bit.

    PYTHONPATH=. python3 scripts/experiments/persistent_ws.py [sizes, default 4096,8192]

First measured with a hand-edited persistent version of the generated source (2026-12-01,
128x256x64, 3 stages): 4096^3 fp16 714 -> 740 (cuBLAS 743), bf16 729 -> 755 (762); 8192^3 fp16
665 -> 688 (665), bf16 725 -> 742 (732).
"""

import statistics
import sys

import torch

import tileworkbench as tw
from tileworkbench.backend.timing import Timer, rel_err
from tileworkbench.examples.gemm import matmul

CONFIGS = [(128, 256, 64, 3, 256), (128, 256, 64, 2, 256), (256, 128, 64, 3, 256), (128, 128, 64, 4, 128)]
ONE_BLOCK_PER_TILE = {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}


def main():
    sizes = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "4096,8192").split(",")]
    timer = Timer()
    for n in sizes:
        for dtype, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
            flops = 2.0 * n ** 3
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = a.float() @ b.float()
            c = torch.empty(n, n, device="cuda", dtype=tdt)
            cublas = statistics.median(timer.time(lambda: torch.matmul(a, b, out=c), 3, 10).tflops(flops)
                                       for _ in range(3))
            print(f"{n}^3 {dtype}: cuBLAS {cublas:.1f}", flush=True)
            for cfg in CONFIGS:
                program = matmul(n, n, n, *cfg[:3], dtype, dtype, cfg[3], cfg[4])
                kernels = {"persistent": tw.compile(program, out_idx=[2]),
                           "per tile": tw.compile(program, out_idx=[2], pass_configs=ONE_BLOCK_PER_TILE)}
                outs = {}
                for name, k in kernels.items():
                    outs[name] = torch.full((n, n), float("nan"), device="cuda", dtype=tdt)
                    k(a, b, outs[name])
                same = torch.equal(outs["persistent"], outs["per tile"])
                err = rel_err(outs["persistent"], ref)
                times = {name: [] for name in kernels}
                for _ in range(5):
                    for name, k in kernels.items():
                        times[name].append(timer.time(lambda: k(a, b, c), 3, 10).tflops(flops))
                med = {name: statistics.median(v) for name, v in times.items()}
                applied = kernels["persistent"].get_host_source().count("persistent_blocks") > 0
                print(f"  {cfg}: per tile {med['per tile']:6.1f} ({med['per tile'] / cublas:.2f}x) | persistent "
                      f"{med['persistent']:6.1f} ({med['persistent'] / cublas:.2f}x){'' if applied else ' (not applied)'}"
                      f" | err {err:.1e}, equal bits {same}", flush=True)


if __name__ == "__main__":
    main()
