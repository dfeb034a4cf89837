"""Experiment: the persistent GEMM on one block per multiprocessor (132) or on the fewest blocks
that need as few rounds of tiles (``backend.runtime.balanced_blocks``: 128 for 512 tiles), and
with the register split CUTLASS's warp-specialised kernels use (producer 40, consumers 232)
instead of ours (24 / 240).

Measures: variants of the compiler's persistent kernel (128x256x64, 3 stages), launcher or
source edited by hand; checked bit for bit against it, then timed beside cuBLAS in 9 rotating
rounds (``_compare.race_persistent_variants``), fp16 and bf16.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/persistent_grid_size.py [sizes, default 4096,8192]

Conclusion (H200, 2026-12-01, commit 088deb9): 128 blocks run 0.5-0.8% faster than 132 at
4096^3 and the same at 8192^3, so the runtime launches ``balanced_blocks(tiles, resident)``
blocks; the register split changes nothing. Measured before the runtime launched
``balanced_blocks`` (so the compiler's kernel ran on 132 blocks; median TFLOP/s, same bits):

    size  dtype  cuBLAS  132 blocks (then the compiler's)  128 blocks  registers 40/232
    4096  fp16   740.3   741.1 (738.5-742.9)               744.7 (742.9-747.1)  741.0
    4096  bf16   763.8   760.8 (759.2-763.6)               766.6 (764.9-768.4)  761.2
    8192  fp16   668.8   686.7                             686.4                688.6
    8192  bf16   702.8   727.6                             725.3                720.6

128 blocks: +0.5% / +0.8% at 4096^3, every round above or equal to the best round on 132; no
change at 8192^3 (2048 tiles: 16 rounds either way, 16 tiles a block on 128 against 15 or 16 on
132). Repeated after the change (BENCHMARKS.md): 4096^3 fp16 747.8 -> 750.8, bf16 766.5 -> 771.9.

Why: every large GEMM here runs at the H200's power limit (``cublas_kernels.py``: ~650 W, SM
clock 1425-1540 MHz, far under its top), so energy per tile decides its time more than how many
multiprocessors are busy. At 4096^3 our 512 tiles on 132 blocks leave 16 blocks idle for the
last quarter of the run; on 128 blocks every block runs exactly 4 tiles, 4 multiprocessors idle
throughout and their power goes to the others' clock. Either way the run takes 4 rounds. Today
the compiler's kernel runs on ``balanced_blocks``, so "one block per multiprocessor" is the
variant and "persistent" the change.
"""

import re
import sys

from _compare import race_persistent_variants
from _edited import edited_kernel

GRID_CALL = re.compile(r"rt\.persistent_blocks\(KERNEL, (\d+), BLOCK, SMEM_BYTES\)")


def one_block_per_multiprocessor(kernel):
    """``kernel`` launched on min(tiles, multiprocessors) blocks, as the runtime did before."""
    import cupy

    multiprocessors = cupy.cuda.Device().attributes["MultiProcessorCount"]
    host = kernel.record["host_source"]
    tiles = int(GRID_CALL.search(host).group(1))
    return edited_kernel(kernel, kernel.record["device_source"],
                         host_source=GRID_CALL.sub(str(min(tiles, multiprocessors)), host))


def register_split(kernel, producer: int, consumer: int):
    source = kernel.record["device_source"]
    assert "setmaxnreg_dec<24>" in source and "setmaxnreg_inc<240>" in source
    source = source.replace("setmaxnreg_dec<24>", f"setmaxnreg_dec<{producer}>")
    source = source.replace("setmaxnreg_inc<240>", f"setmaxnreg_inc<{consumer}>")
    return edited_kernel(kernel, source)


if __name__ == "__main__":
    race_persistent_variants(lambda pers: {
        "one block per multiprocessor": one_block_per_multiprocessor(pers),
        "registers 40/232": register_split(pers, 40, 232)}, sys.argv)
