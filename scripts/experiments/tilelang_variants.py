"""Experiment: where ours trails TileLang 0.1.15 on its own programs, and which of our pass configs
closes it.

Measures: for the cases named (default: all of ``examples/tilelang_programs``), TileLang's
generated CUDA and ours written to ``$OUT/<case>.tilelang.cu`` / ``.tileworkbench.cu`` for
reading; then ours under each pass config below and TileLang, checked against torch, timed in
alternating rounds (``bench.tilelang_programs.run_case``), median ms printed per config.

Run on the H200 with TileLang on PYTHONPATH (see docs/tilelang.md):

    PYTHONPATH=.:/tmp/tl python3 scripts/experiments/tilelang_variants.py [case ...]

Findings: docs/experiments.md, "TileLang's programs".
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import tileworkbench as tw
from tileworkbench.bench.tilelang_programs import load_program, run_case
from tileworkbench.examples.tilelang_programs import FAMILIES

VARIANTS = {
    "default": {},
    "no_ws": {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
    "no_persistent": {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True},
}


def with_configs(module, configs: dict) -> None:
    """Every @jit function of the program compiles with ``configs`` on top of its own from now on."""
    from tileworkbench.jit.decorator import JitFunction

    for fn in vars(module).values():
        if isinstance(fn, JitFunction):
            fn.own_configs = getattr(fn, "own_configs", fn.pass_configs or {})
            fn.pass_configs = {**fn.own_configs, **configs}
            fn.kernels.clear()


def main(names) -> None:
    import torch

    from tileworkbench.profiler import do_bench

    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            ours, theirs = (load_program(family, p, Path(tmp)) for p in ("tileworkbench", "tilelang"))
            for name, case in ours.CASES.items():
                if names and name not in names:
                    continue
                sources = out / "sources"  # one archive comes back where many files would not
                sources.mkdir(exist_ok=True)
                (sources / f"{name}.tileworkbench.cu").write_text(case["compile"]().get_kernel_source())
                (sources / f"{name}.tilelang.cu").write_text(theirs.CASES[name]["compile"]().get_kernel_source())
                if os.environ.get("SOURCES_ONLY"):
                    continue
                for variant, configs in VARIANTS.items():
                    with_configs(ours, configs)
                    try:
                        row = run_case(name, case, theirs.CASES[name], torch, do_bench)
                    except Exception as exc:
                        print(f"{name:18s} {variant:14s} failed: {type(exc).__name__}: {exc}")
                        continue
                    ok = row.get("tileworkbench", {}).get("correct")
                    print(f"{name:18s} {variant:14s} ours {row.get('tileworkbench_ms', float('nan')):.4f} ms  "
                          f"TileLang {row.get('tilelang_ms', float('nan')):.4f} ms  "
                          f"ratio {row.get('ratio', float('nan')):.3f}  correct {ok}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
    import shutil

    out = Path(os.environ.get("OUT", "out"))
    shutil.make_archive(str(out / "sources"), "gztar", out / "sources")
    shutil.rmtree(out / "sources")
