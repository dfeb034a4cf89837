"""Experiment: a stream-K last wave for the persistent GEMM (issue 4's 4096^3 gap: it does not close it).

512 tiles of 128x256 on 132 multiprocessors leave the persistent kernel's fourth wave 12% empty,
3% of the kernel's time; at 8192^3, 2048 tiles leave the sixteenth wave 48% empty, also 3%.
``_hand_stream_k.cu`` is the compiler's persistent kernel (128x256x64, 3 stages) rewritten by hand
so that the tiles of that partial wave are shared out by K iterations (its header says how). Here:
the compiler's persistent kernel and hand-written variants, each checked against float32 (and the
stream-K outputs checked to be the same bits on every launch, their flags being reset by the
owners), then timed beside cuBLAS in rotating rounds.

    PYTHONPATH=. python3 scripts/experiments/stream_k.py [sizes, default 4096] [--timeline]

Measured on the H200 (2026-12-01, median TFLOP/s of 7 rounds, fp16 / bf16):

| n | cuBLAS | persistent | stream-K first | stream-K last |
| --- | --- | --- | --- | --- |
| 4096 | 746 / 755 | 746 / 753 | 708 / 720 | 724 / 735 |
| 8192 | 654 / 682 | 673 / 701 | 719 / 746 | 700 / 725 |

- At 4096^3 there is nothing to win. The timeline (stream-K last) shows why: the three
  data-parallel waves end at 133-135 us and the stream-K pieces (56 iterations a block instead of
  64) still take 40-45 us: one 128 KB partial written and one read per block, a second epilogue,
  the flag waits (median 0.3, max 2.9 us). That is what the partial fourth wave took.
- At 8192^3 the fixup is small beside 1.4 ms and stream-K gains 4-7%, but 8192^3 already meets
  the target. Building it into the compiler (a workspace and flags the host allocates, the
  checker and the barrier simulation taught about them) is left.
- Before the pieces were ordered head first, the blocks ran through all of K at once and L2 could
  not serve them: 590 TFLOP/s at 4096^3.
- A finding for anyone writing wgmma loops: the same kernel with the main loop written as
  ``for (k = k0; k < k1; ++k)`` ran 17% slower (621 instead of 752 TFLOP/s at 4096^3 bf16, 579
  instead of 696 at 8192^3), even with every tile data-parallel, decided at run time. Written as
  a do-while (every unit has an iteration) it is as fast as the compiler's kernel. Instruction for
  instruction the loop's SASS is the same; what differs is a path on which the loop runs zero
  times. The GEMM main loops the compiler emits have constant trip counts, so its GEMMs do not meet this;
  where a trip count is not constant but provably at least one, the code generator now writes a
  do-while (zero_trip_loops.py).
"""

import re
import sys
from pathlib import Path

from _compare import race
from _edited import edited_kernel, headers_of

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul

HAND = Path(__file__).with_name("_hand_stream_k.cu").read_text()
SLOTS = 132  # the H200's multiprocessors: the persistent grid, one workspace slot per block


def stream_k_source(compiled_source: str, n: int, *flags: str) -> str:
    """The hand kernel for an ``n``^3 GEMM, with the compiler's headers and wgmma functor and
    ``flags`` defined (the switches the .cu file's header lists)."""
    panel = int(re.search(r"tiles visited in panels of (\d+)", compiled_source).group(1))
    elem = re.search(r"(tw::\w+)\* __restrict__ A", compiled_source).group(1)
    wgmma = re.search(r"tw_wgmma_m64n256k16_\w+", compiled_source).group(0)
    defines = {"ELEM": elem, "WGMMA": wgmma, "TILES_M": n // 128, "TILES_N": n // 256, "K_ITERS": n // 64,
               "PANEL": panel, "SK_SLOTS": SLOTS}
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + "".join(f"#define {f}\n" for f in flags)
    return headers_of(compiled_source) + head + HAND


def print_timeline(kernel, a, b, n):
    """One launch of an SK_TIMES build: when each block's units ended and how long it waited."""
    import cupy
    import numpy as np

    kernel(a, b)
    cupy.cuda.runtime.deviceSynchronize()
    address = kernel._runtime.module.module_for(0).get_global_var("tw_sk_times")  # a device address
    memory = cupy.cuda.UnownedMemory(address, SLOTS * 8 * 8, kernel)
    times = cupy.ndarray((SLOTS, 8), dtype=cupy.uint64, memptr=cupy.cuda.MemoryPointer(memory, 0)).get()
    times = times.astype(np.int64)
    start = times[:, 0].min()
    ends = np.where(times[:, 1:7] > 0, (times[:, 1:7] - start) / 1e3, np.nan)
    print(f"{n}: unit end times in us after the first block started (median / max over blocks); "
          f"flag waits median {np.median(times[:, 7]) / 1e3:.1f} max {times[:, 7].max() / 1e3:.1f} us")
    for i in range(6):
        col = ends[:, i]
        if np.isfinite(col).any():
            print(f"  unit {i}: {np.nanmedian(col):7.1f} / {np.nanmax(col):7.1f}")
    tiles, k_iters = (n // 128) * (n // 256), n // 64
    sk_iters = (tiles % SLOTS) * k_iters
    for blk in np.argsort(-np.nanmax(ends, axis=1))[:4].tolist() + [0, 1, 2]:
        lo, hi = blk * sk_iters // SLOTS, (blk + 1) * sk_iters // SLOTS
        print(f"  block {blk:3d}: SK iterations {lo}-{hi} (tile {lo // k_iters} k {lo % k_iters} to tile "
              f"{(hi - 1) // k_iters} k {(hi - 1) % k_iters + 1}), ends {np.round(ends[blk], 1).tolist()}, "
              f"waited {times[blk, 7] / 1e3:.1f}")


def main():
    import torch

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    sizes = [int(v) for v in (args[0] if args else "4096").split(",")]
    assert torch.cuda.get_device_properties(0).multi_processor_count == SLOTS, "written for the H200's 132 SMs"
    for n in sizes:
        for dtype in ("float16", "bfloat16"):
            pers = tw.compile(matmul(n, n, n, 128, 256, 64, dtype, dtype, 3, 256), out_idx=[2])
            src = pers.record["device_source"]

            def hand(*flags):
                return edited_kernel(pers, stream_k_source(src, n, *flags))

            variants = {"persistent": pers, "hand, all data-parallel": hand("SK_OFF"),
                        "  decided at run time": hand("SK_RUNTIME_OFF"),
                        "  same, main loop a for loop": hand("SK_RUNTIME_OFF", "ZERO_TRIP_LOOP"),
                        "stream-K first": hand(), "stream-K last": hand("SK_AT_END", "DP_FIRST")}
            tdt = getattr(torch, dtype)
            a, b = (torch.randn(n, n, device="cuda", dtype=tdt) for _ in range(2))
            for name in ("stream-K first", "stream-K last"):
                first = variants[name](a, b)
                for _ in range(5):
                    assert torch.equal(variants[name](a, b), first), f"{name}: output changes between launches"
            print(f"{n} {dtype}: stream-K outputs the same bits on 6 launches", flush=True)
            if "--timeline" in sys.argv:
                print_timeline(hand("SK_AT_END", "DP_FIRST", "SK_TIMES"), a, b, n)
            race(variants, n, dtype, rounds=7)


if __name__ == "__main__":
    main()
