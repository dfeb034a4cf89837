"""Experiment: tile configs for the small square GEMMs (1024^3), where ours trailed cuBLAS most.

Measures: ``examples.matmul`` at each tile config below (block M x N x K, stages, threads), each
checked against float32, then timed beside cuBLAS (torch, and CuPy for fp16) in 7 rotating
rounds (``decode_tiles.race_configs``), fp16 and bf16; prints median TFLOP/s and the ratio to the
faster cuBLAS.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/small_square_tiles.py [MxNxK, default 1024x1024x1024]

Conclusion (H200, 2026-12-01; taken into the bench's candidates at 52768e4): at 1024^3 the stages
decide it. 64x128x64 tiles with 8 stages instead of 4 (128 blocks, half of K = 1024 in flight
from the start) go from 0.86x to 1.01x / 1.00x cuBLAS (fp16 / bf16), so the bench's candidates
(``bench/gemm.py``) and the autotuner's default space (``autotuner/space.py``) include 8 stages.

Why: until then the bench's best at 1024^3 was 64x128x64 tiles, 4 stages (128 blocks, 0.84-0.86x
cuBLAS). cuBLAS runs 128x64 tiles with 8 stages there (``cublas_kernels.py``: 128 blocks,
clusters of two). With K = 1024 a block runs only 16 k-steps, so how much of K is in flight from
the start, and how long a block takes to set up and drain, decide it.

Measured (median TFLOP/s of 7 rotating rounds, ratio to the faster cuBLAS; every config within
the float32 check), fp16 / bf16:

| tile (M x N x K, stages, threads) | 1024^3 | 2048^3 |
| --- | --- | --- |
| 64x128x64 s4 t128 (the bench's before) | 196.8 (0.86x) / 197.4 (0.86x) | 549.2 / 550.6 |
| **64x128x64 s8 t128** (now the bench's) | **230.6 (1.01x) / 229.8 (1.00x)** | 531.6 / 536.9 |
| 128x64x64 s4 / s6 / s8 t128 | 195.1 / 215.1 / 224.4 | 499.0 / 465.2 / 507.0 |
| 128x64x64 s8 t256 | 225.2 / 219.3 | 501.3 / 504.1 |
| 64x64x64 s8 / s12 t128 | 190.9 / 191.7 | 346.3 / 339.4 |
| 128x128x64 s6 t128 / t256 | 186.7 / 185.1 | 602.2 (0.99x) / 600.9; bf16 618.2 (1.00x) |
| 64x256x64 s4 t128 | 180.2 / 178.0 | 565.1 / 568.7 |

cuBLAS: 1024^3 228.3-229.8, 2048^3 607.7 fp16, 619.6 bf16. At 2048^3 the bench's 128x256x64 s4
(0.993x / 0.997x in its last run) and 128x128x64 s6 are level.
"""

import sys

from decode_tiles import race_configs

CONFIGS = [(64, 128, 64, 4, 128),  # the bench's best
           (64, 128, 64, 8, 128), (128, 64, 64, 4, 128), (128, 64, 64, 8, 128), (128, 64, 64, 6, 128),
           (64, 64, 64, 8, 128), (64, 64, 64, 12, 128), (128, 128, 64, 6, 128), (128, 128, 64, 6, 256),
           (64, 256, 64, 4, 128), (128, 64, 64, 8, 256)]

if __name__ == "__main__":
    M, N, K = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "1024x1024x1024").split("x"))
    race_configs(M, N, K, CONFIGS)
