"""Experiment: tile configs for the decode-like GEMM (16 x 4096 x 4096), where ours trailed cuBLAS.

Measures: ``examples.matmul`` at each tile config in ``CONFIGS`` (block M x N x K, stages,
threads), each checked against float32, then timed beside cuBLAS (torch and CuPy) in 7 rotating
rounds, fp16 and bf16; prints median TFLOP/s and the ratio to the faster cuBLAS.
``race_configs`` is shared with ``small_square_tiles.py``.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/decode_tiles.py [MxNxK, default 16x4096x4096]

Conclusion (H200, 2026-12-01): the bytes in flight per block decide it. 16x32x64 tiles (128
blocks) with 12 stages took the decode shape from 0.66x / 0.68x (64x64x64 s4, the bench's best
before) to 0.94x / 0.98x cuBLAS (fp16 / bf16; bench candidate from 3eda11b); with 20 stages (80
KB of B in flight a block) 0.97x / 0.99x against 0.95x / 0.97x for 12 in the same run, so the
bench's candidate for M <= 64 is 16x32x64 with 20 stages (8a895c5, ``bench/gemm.py``).

Why: with the bench's small-M tiles (64 columns and more) the 16 x 4096 output has at most 64
tiles for 132 multiprocessors, each streaming its 4096-deep slice of B with a few 8 KB stages in
flight. Narrower tiles give more blocks, deeper K tiles and more stages more bytes in flight.

Measured on the H200 (2026-12-01, 16x4096x4096, median TFLOP/s of 7 rotating rounds, every
config within the float32 check), ratio to the faster cuBLAS, fp16 / bf16:

| tile (M x N x K, stages, threads) | fp16 | bf16 |
| --- | --- | --- |
| 64x64x64 s4 t128 (the bench's best before) | 19.2 (0.66x) | 19.2 (0.68x) |
| 16x32x64 s8 t128 | 25.2 (0.86x) | 25.1 (0.89x) |
| **16x32x64 s12 t128** (the bench candidate until s20) | **27.5 (0.94x)** | **27.7 (0.98x)** |
| 16x32x32 s12 t128 | 20.0 | 20.0 |
| 16x32x64 s8 t64 | 25.5 | 25.3 |
| 16x16x64 s12 t64 | 23.4 | 23.4 |
| 16x64x64 s8 t128 | 24.9 | 24.9 |
| 32x32x64 s8 t128 | 24.7 | 24.5 |

cuBLAS: 28.6-29.2 fp16, 28.3 bf16. Deeper K tiles (128, 256) with 4-6 stages were slower (16-18).
The bytes in flight per block decide it: 12 stages x (16x64 + 64x32) x 2 B = 72 KB.

Again with more stages (same day, a later session; cuBLAS 29.1 fp16 torch, 28.5 bf16):

| tile | fp16 | bf16 |
| --- | --- | --- |
| 16x32x64 s8 t128 | 25.4 (0.87x) | 25.3 (0.89x) |
| 16x32x64 s10 t128 | 26.9 (0.93x) | 27.2 (0.95x) |
| 16x32x64 s12 t128 | 27.7 (0.95x) | 27.8 (0.97x) |
| 16x32x64 s16 t128 | 28.1 (0.97x) | 27.9 (0.98x) |
| 16x32x64 s16 t64 | 28.1 (0.97x) | 28.0 (0.98x) |
| **16x32x64 s20 t128** (now the bench candidate) | **28.3 (0.97x)** | **28.1 (0.99x)** |

Each stage more keeps helping, less each time: 20 stages (120 KB of shared memory) replaced 12.
"""

import statistics
import sys

import tileworkbench as tw
from tileworkbench.examples import matmul

CONFIGS = [(64, 64, 64, 4, 128),  # the bench's best before
           (16, 32, 64, 8, 128), (16, 32, 64, 12, 128), (16, 32, 32, 12, 128), (16, 32, 64, 8, 64),
           (16, 16, 64, 12, 64), (16, 64, 64, 8, 128), (32, 32, 64, 8, 128),
           (16, 32, 64, 16, 128), (16, 32, 64, 10, 128), (16, 32, 64, 16, 64), (16, 32, 64, 20, 128)]


def main():
    M, N, K = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "16x4096x4096").split("x"))
    race_configs(M, N, K, CONFIGS)


def race_configs(M, N, K, configs):
    """``examples.matmul`` at each (block_M, block_N, block_K, stages, threads) of ``configs``,
    checked against float32, then timed beside cuBLAS (torch, and CuPy for fp16) in 7 rotating
    rounds, fp16 and bf16; prints each median TFLOP/s and its ratio to the faster cuBLAS."""
    import cupy
    import torch

    from tileworkbench.backend.timing import Timer, rel_err

    flops = 2.0 * M * N * K
    for dtype in ("float16", "bfloat16"):
        tdt = getattr(torch, dtype)
        a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(K, N, device="cuda", dtype=tdt)
        ref = a.float() @ b.float()
        c = torch.empty(M, N, device="cuda", dtype=tdt)
        fns = {"cublas (torch)": lambda: torch.matmul(a, b, out=c)}
        if dtype == "float16":  # CuPy has no bfloat16
            ca, cb = cupy.asarray(a), cupy.asarray(b)
            fns["cublas (cupy)"] = lambda: cupy.matmul(ca, cb)
        for cfg in configs:
            kernel = tw.compile(matmul(M, N, K, *cfg[:3], dtype, dtype, cfg[3], cfg[4]), out_idx=[2])
            out = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
            kernel(a, b, out)
            assert rel_err(out, ref) < (1e-2 if dtype == "bfloat16" else 2e-3), f"{cfg} computes something else"
            fns["x".join(map(str, cfg[:3])) + f" s{cfg[3]} t{cfg[4]}"] = lambda k=kernel: k(a, b, c)
        timer, names = Timer(), list(fns)
        times = {n: [] for n in names}
        for r in range(7):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(timer.time(fns[name], 5, 50).tflops(flops))
        for name, v in times.items():
            best_cublas = max(statistics.median(times[n]) for n in times if n.startswith("cublas"))
            print(f"{M}x{N}x{K} {dtype} {name:22s} {statistics.median(v):6.1f} TFLOP/s "
                  f"({statistics.median(v) / best_cublas:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
