"""Experiment: what would lift the spec's own TMA GEMMs (issue 4's 600 TFLOP/s at 8192^3)?

Times ``matmul_tma_copy`` / ``matmul_tma_copy_store`` (8192^3 fp16, 128x128x32, 128 threads,
warp specialisation off) as compiled, with the raster panel changed (the compiler's AUTO_PANEL),
and with the 3-stage ring's ``k % 3`` / ``k / 3 % 2`` slot and parity arithmetic replaced by
counters carried from one iteration to the next (an edit of the generated source), next to the
persistent warp-specialised GEMM at other panel sizes. Interleaved rounds, medians; every
output checked against a float32 reference first.

    PYTHONPATH=. python3 scripts/experiments/spec_kernel_variants.py

The carried-counters edit matches the source from before ``carry_stage_counters`` (09184f7), which
now does the same in the compiler: on today's source it finds no ``k % 3`` left to replace.
"""

import os
import tempfile

from _compare import race
from _edited import edited_kernel

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul, matmul_tma_copy, matmul_tma_copy_store
from tileworkbench.jit import cache
from tileworkbench.passes import rasterize_blocks

N = 8192
PLAIN = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def compile_with_panel(program, panel, configs=None):
    """Compiled with rasterize_blocks.AUTO_PANEL = panel (the caches do not know the panel: a
    fresh disk-cache folder and an empty memory cache for each)."""
    old = rasterize_blocks.AUTO_PANEL
    rasterize_blocks.AUTO_PANEL = panel
    cache.MEMORY.clear()
    os.environ["TILEWORKBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="tw-panel-")
    try:
        return tw.compile(program, out_idx=[2], pass_configs=configs)
    finally:
        rasterize_blocks.AUTO_PANEL = old


def carried_counters(src, stages):
    """k % s, (k + s - 1) % s and k / s % 2 as counters updated at the end of each iteration."""
    s = stages
    body_start = src.index("  for (int k = 0; k < ")
    head, loop = src[:body_start], src[body_start:]
    loop = loop.replace(f"((k + {s - 1}) % {s})", "tw_next").replace(f"(k % {s})", "tw_slot")
    loop = loop.replace(f"((k / {s}) % 2)", "tw_phase")
    pragma = head.rindex("  #pragma unroll 1")
    head = head[:pragma] + f"  int tw_slot = 0, tw_next = {s - 1}, tw_phase = 0;\n" + head[pragma:]
    gemm_end = loop.index("C_local, tx);\n") + len("C_local, tx);\n")
    update = (f"    tw_next = tw_slot;\n    tw_slot = tw_slot == {s - 1} ? 0 : tw_slot + 1;\n"
              f"    tw_phase ^= (tw_slot == 0);\n")
    return head + loop[:gemm_end] + update + loop[gemm_end:]


def main():
    kernels = {}
    for builder in (matmul_tma_copy, matmul_tma_copy_store):
        for stages in (2, 3):
            program = builder(N, N, N, 128, 128, 32, "float16", "float16", "float32", 128, stages)
            name = f"{builder.__name__} s{stages}"
            for panel in (10, 4, 16, 32):
                kernels[f"{name} panel {panel}"] = compile_with_panel(program, panel, PLAIN)
            if stages == 3:
                base = kernels[f"{name} panel 10"]
                kernels[f"{name} carried counters"] = edited_kernel(base, carried_counters(base.record["device_source"], 3))
    ws = matmul(N, N, N, 128, 256, 64, "float16", "float16", 3, 256)
    for panel in (10, 6, 16):
        kernels[f"persistent 128x256x64 s3 panel {panel}"] = compile_with_panel(ws, panel)
    race(kernels, N, "float16", rounds=3, cublas=False)


if __name__ == "__main__":
    main()
