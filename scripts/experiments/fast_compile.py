"""Experiment: what NVRTC's ``--Ofast-compile=<level>`` (CUDA 12.8 on) buys in compile time and costs
in kernel time, program by program: is it a route to issue 17's 0.5 s cold compile?

For each of TileLang's programs (``examples/tilelang_programs``, the bench's cases) and each level
(full optimisation, ``min``, ``mid``, ``max``): the cold compile (our caches off, the module loaded
afresh for each level so no jit cache helps), ptxas's registers and spills; with a GPU, one call
checked against the case's torch reference with its tolerances, then every level's kernel timed in
3 alternating rounds of ``profiler.do_bench`` (median ms, L2 flushed). Without a GPU only the
compiles run.

    PYTHONPATH=. python3 scripts/experiments/fast_compile.py [family,...] [--out DIR]

Writes ``DIR/fast_compile-<time>.json`` with ``--out``. Findings: docs/experiments.md, "Fast compiles".
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # every compile cold

from tileworkbench.bench.tilelang_programs import _timed_compile, check, load_program  # noqa: E402

lowering = importlib.import_module("tileworkbench.jit.lower")

LEVELS = (None, "min", "mid", "max")
ROUNDS = 3


@contextlib.contextmanager
def fast_compile(level):
    """Compiles inside add ``--Ofast-compile=<level>`` to NVRTC's options (None: as shipped)."""
    plain = lowering.nvrtc_extra_options
    if level is not None:
        lowering.nvrtc_extra_options = lambda configs: plain(configs) + (f"--Ofast-compile={level}",)
    try:
        yield
    finally:
        lowering.nvrtc_extra_options = plain


def _resources(kernel) -> tuple:
    parts = getattr(kernel, "kernels", None) or (kernel,)
    return ([p.trace.resources.get("registers") for p in parts], [p.trace.resources.get("spills_bytes") for p in parts])


def run_family(family: str, workdir: Path, torch, do_bench) -> list:
    modules = {level: load_program(family, "tileworkbench", workdir / str(level)) for level in LEVELS}
    rows = []
    for name in modules[None].CASES:
        kernels, row = {}, {"case": name, "family": family, "levels": {}}
        for level in LEVELS:
            case = modules[level].CASES[name]
            entry = row["levels"][str(level)] = {}
            try:
                with fast_compile(level):
                    kernel, entry["compile_s"], _ = _timed_compile(case["compile"])
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                continue
            entry["registers"], entry["spills_bytes"] = _resources(kernel)
            kernels[level] = kernel
        if torch is not None:
            torch.manual_seed(0)
            case = modules[None].CASES[name]
            inputs = case["inputs"](torch)
            for level, kernel in list(kernels.items()):
                entry = row["levels"][str(level)]
                entry.update(check(kernel, case, inputs, torch))
                if not entry["correct"]:
                    del kernels[level]
            times = {level: [] for level in kernels}
            for _ in range(ROUNDS):
                for level, kernel in kernels.items():
                    times[level].append(do_bench(lambda k=kernel: k(*inputs), warmup=25, rep=100, return_mode="median"))
            for level, samples in times.items():
                row["levels"][str(level)]["ms"] = statistics.median(samples)
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    full = row["levels"]["None"]
    cells = []
    for level in LEVELS:
        entry = row["levels"][str(level)]
        if "error" in entry:
            cells.append("error")
            continue
        cell = f"{entry['compile_s']:.2f} s"
        if "ms" in entry and "ms" in full:
            cell += f", {entry['ms'] / full['ms']:.2f}x time"
        elif entry.get("correct") is False:
            cell += ", WRONG"
        cells.append(cell)
    return f"| {row['case']} | " + " | ".join(cells) + " |"


def main(argv) -> int:
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        out, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    from tileworkbench.examples.tilelang_programs import FAMILIES

    families = argv[0].split(",") if argv else list(FAMILIES)
    try:
        import torch

        from tileworkbench.profiler import do_bench

        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = do_bench = None
    print("| case | full | min | mid | max |  (cold compile; kernel time over the full build's)")
    print("| --- | --- | --- | --- | --- |")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in families:
            rows += run_family(family, Path(tmp), torch, do_bench)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"fast_compile-{time.strftime('%Y%m%d-%H%M%S')}.json"
        from tileworkbench.bench.machine import machine_info

        path.write_text(json.dumps({"machine": machine_info(), "rows": rows}, indent=1))
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
