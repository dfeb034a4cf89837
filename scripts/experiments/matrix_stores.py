"""Experiment: accumulators to the epilogue's shared tile with stmatrix (tw::store_matrix_x4, the
default since 2026-12-01) against one 32-bit store per pair (tw.disable_matrix_stores).

    PYTHONPATH=. python3 scripts/experiments/matrix_stores.py

Kernels: the persistent warp-specialised 128x256x64 GEMM (fp16, bf16) and the spec's
matmul_tma_copy (2 and 3 stages, warp specialisation off), 4096^3 and 8192^3, outputs checked,
timed in interleaved rounds (medians).

Measured on the H200, 2026-12-01 (TFLOP/s, stmatrix / store_pair): 4096^3 ws fp16 738.3 / 737.5,
bf16 759.9 / 760.0, matmul_tma_copy s2 592.1 / 590.2, s3 606.2 / 603.6; 8192^3 ws fp16 688.8 /
688.9, bf16 715.8 / 714.5, matmul_tma_copy s2 606.6 / 601.5, s3 622.3 / 600.0. Never slower;
what it buys is compile time (NVRTC of the spec GEMM 0.21 -> 0.16 s on the CPU machine: a
quarter of the unrolled address arithmetic).
"""

import statistics

import torch

import tileworkbench as tw
from tileworkbench.bench.timing import Timer, rel_err
from tileworkbench.examples.gemm import matmul, matmul_tma_copy

PAIRS = {tw.PassConfigKey.TW_DISABLE_MATRIX_STORES: True}
SPEC = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def programs(n):
    yield "ws 128x256 s3 fp16", matmul(n, n, n, 128, 256, 64, "float16", "float16", 3, 256), {}, torch.float16
    yield "ws 128x256 s3 bf16", matmul(n, n, n, 128, 256, 64, "bfloat16", "bfloat16", 3, 256), {}, torch.bfloat16
    for s in (2, 3):
        yield (f"matmul_tma_copy s{s}", matmul_tma_copy(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, s),
               SPEC, torch.float16)


def main(sizes=(4096, 8192)):
    timer = Timer()
    for n in sizes:
        flops = 2.0 * n ** 3
        for name, program, configs, tdt in programs(n):
            kernels = {"stmatrix": tw.compile(program, out_idx=[2], pass_configs=configs),
                       "store_pair": tw.compile(program, out_idx=[2], pass_configs={**configs, **PAIRS})}
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = a.float() @ b.float()
            c = torch.empty(n, n, device="cuda", dtype=tdt)
            for k in kernels.values():
                out = torch.full((n, n), float("nan"), device="cuda", dtype=tdt)
                k(a, b, out)
                assert rel_err(out, ref) < (1e-2 if tdt == torch.bfloat16 else 2e-3)
            times = {key: [] for key in kernels}
            for r in range(6):
                for key in (list(kernels) if r % 2 == 0 else list(reversed(kernels))):
                    times[key].append(timer.time(lambda: kernels[key](a, b, c), 3, 10).tflops(flops))
            med = {key: statistics.median(v) for key, v in times.items()}
            print(f"{n} {name:22s} stmatrix {med['stmatrix']:6.1f}  store_pair {med['store_pair']:6.1f}  "
                  f"ratio {med['stmatrix'] / med['store_pair']:.3f}", flush=True)


if __name__ == "__main__":
    main()
