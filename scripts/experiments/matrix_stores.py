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


from _compare import race

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul, matmul_tma_copy

PAIRS = {tw.PassConfigKey.TW_DISABLE_MATRIX_STORES: True}
SPEC = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def programs(n):
    yield "ws 128x256 s3 fp16", matmul(n, n, n, 128, 256, 64, "float16", "float16", 3, 256), {}, "float16"
    yield "ws 128x256 s3 bf16", matmul(n, n, n, 128, 256, 64, "bfloat16", "bfloat16", 3, 256), {}, "bfloat16"
    for s in (2, 3):
        yield (f"matmul_tma_copy s{s}", matmul_tma_copy(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, s),
               SPEC, "float16")


def main(sizes=(4096, 8192)):
    for n in sizes:
        for name, program, configs, dtype in programs(n):
            print(name, flush=True)
            race({"stmatrix": tw.compile(program, out_idx=[2], pass_configs=configs),
                  "store_pair": tw.compile(program, out_idx=[2], pass_configs={**configs, **PAIRS})},
                 n, dtype, rounds=6, cublas=False)


if __name__ == "__main__":
    main()
