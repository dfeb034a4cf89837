"""Experiment: which difference between the hand-edited persistent GEMM and the compiler's costs time.

    PYTHONPATH=. python3 scripts/experiments/persistent_variants.py

Measured on 2026-12-01 against the compiler's first persistent kernel (4096^3 fp16): per tile 702,
compiler 687, hand-edited 729, "store by tx 0" 731 TFLOP/s (the elected store issuer was the
difference; the compiler now issues it from thread 0). The edits match that day's generated
source: on today's, which carries its stage counters and stores from thread 0, "running counter"
and "store by tx 0" find nothing left to change. Those figures were timed kernel after kernel in
five rounds; the script now uses `_compare.race` (the order rotated each round).
"""

from _compare import race
from _edited import edited_kernel, headers_of

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul

n = 4096
program = matmul(n, n, n, 128, 256, 64, "float16", "float16", 3, 256)
per_tile = tw.compile(program, out_idx=[2], pass_configs={tw.PassConfigKey.TW_DISABLE_PERSISTENT: True})
pers = tw.compile(program, out_idx=[2])
src = pers.record["device_source"]


def variant(text, smem=None):
    return edited_kernel(pers, text, smem)


def running_counter(t):
    """The ring's stage as a counter carried across tiles (g) instead of tile_iter * 64 + k."""
    for it, k in (("tile_iter", "k"), ("tile_iter_1", "k_1")):
        t = t.replace(f"(({it} * 64) + {k})", "g")
        t = t.replace(f"for (int {it} = 0;", f"int g_{it} = 0;\n    for (int {it} = 0;", 1)
        t = t.replace(f"for (int {k} = 0; {k} < 64; ++{k}) {{", f"for (int {k} = 0; {k} < 64; ++{k}, ++g_{it}) {{\n        const int g = g_{it};", 1)
    t = t.replace("stage_empty[((tile_iter_1 * 64) % 3)].arrive();", "stage_empty[((g_tile_iter_1 + 2) % 3)].arrive();")
    return t


def hand_layout(t):
    t = t.replace("C_local_out = reinterpret_cast<tw::half*>(tw_smem + 147456)", "C_local_out = reinterpret_cast<tw::half*>(tw_smem + 148480)")
    return t.replace("tw_smem + 212992;", "tw_smem + 147456;").replace("tw_smem + 213016;", "tw_smem + 147480;")


def store_by_tx0(t):
    return t.replace("if (tw::shuffle_elect<256>()) {\n        tw::tma_store(", "if (tx == 0) {\n        tw::tma_store(")


kernels = {"per tile": per_tile, "compiler persistent": pers,
           "running counter": variant(running_counter(src)),
           "hand smem layout": variant(hand_layout(src), 214016),
           "store by tx 0": variant(store_by_tx0(src)),
           "all three": variant(store_by_tx0(hand_layout(running_counter(src))), 214016),
           "hand-edited": variant(headers_of(src) + open("scripts/experiments/_hand_persistent_4096_fp16.cu").read(), 214016)}
for name, k in kernels.items():
    print(f"{name}: regs {k._runtime.function(k.name).num_regs}", flush=True)
race(kernels, n, "float16", rounds=5)
