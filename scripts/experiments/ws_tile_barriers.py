"""Experiment: a warp-specialised two-gemm loop (attention, flash decoding) with one full/empty
barrier pair per stage (the default) against a pair per loaded tile (``tw.ws_tile_barriers``:
Q @ K^T may start before V lands, and K's slot is released before P @ V; TileLang's flash-decoding
kernel does this).

Measures: every case of the families given (default ``attention,flash_decoding``), compiled both
ways from the same file; each checked against its torch reference on random inputs, then both
timed in 5 alternating rounds of ``profiler.do_bench`` (median ms, L2 flushed); prints the ratio
per-stage / per-tile (above 1: a pair per tile is faster).

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/ws_tile_barriers.py [attention,flash_decoding]

Findings: docs/experiments.md, "Barriers of a two-gemm pipeline".
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import tileworkbench as tw
from tileworkbench.bench.tilelang_programs import check, load_program
from tileworkbench.profiler import do_bench

BUILDERS = {"attention": "flash_attention", "flash_decoding": "flash_decoding"}


def _per_tile(builder):
    """The same builder with a barrier pair per tile (its own pass configs kept)."""
    configs = {**(builder.pass_configs or {}), tw.PassConfigKey.TW_WS_TILE_BARRIERS: True}
    return tw.jit(out_idx=builder.out_idx, pass_configs=configs)(builder.fn)


def main(families) -> None:
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        for family in families:
            module = load_program(family, "tileworkbench", Path(tmp))
            name = BUILDERS[family]
            default = getattr(module, name)
            for case_name, case in module.CASES.items():
                kernels = {}
                for label, builder in (("per stage", default), ("per tile", _per_tile(default))):
                    setattr(module, name, builder)  # the case's compile() looks the builder up by name
                    kernels[label] = case["compile"]()
                setattr(module, name, default)
                torch.manual_seed(0)
                inputs = case["inputs"](torch)
                for label, kernel in kernels.items():
                    result = check(kernel, case, inputs, torch)
                    if not result["correct"]:
                        raise SystemExit(f"{case_name} ({label}) is wrong: {result}")
                times = {label: [] for label in kernels}
                for _ in range(5):
                    for label, kernel in kernels.items():
                        times[label].append(do_bench(lambda k=kernel: k(*inputs), warmup=25, rep=100,
                                                     return_mode="median"))
                ms = {label: statistics.median(t) for label, t in times.items()}
                work = case.get("flops")
                rates = "  ".join(f"{label} {ms[label]:.4f} ms" + (f" ({work / ms[label] / 1e9:.0f} TFLOP/s)"
                                                                  if work else "") for label in ms)
                print(f"{case_name:24s} {rates}  per-stage/per-tile {ms['per stage'] / ms['per tile']:.3f}x",
                      flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(",") if len(sys.argv) > 1 else list(BUILDERS))
