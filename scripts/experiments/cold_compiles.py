"""Experiment: our cold compile of each TileLang program, alone in the process and right after
TileLang compiled the same program in it, as ``bench tilelang`` times it.

Why: the bench's cold compiles on the GPU's host run 0.1-0.3 s above what ``compile_parts.py``
measures for the same kernels (docs/experiments.md, "Cold compile: where the time goes": dynamic
GEMM 0.49 s alone on the H200's host, 0.59 in the bench), and ten of the 41 cases pass the issue's
0.5 s there. This separates the compile's own time from what TileLang's work earlier in the same
process costs it (its threads, caches, libraries).

Each case's program is loaded as the bench loads it (``bench.tilelang_programs.load_program``), the
disk cache off, and compiled once per mode, each mode in its own fresh process (``--child``) so
that neither sees the other's in-memory cache: ``alone`` (torch imported and a CUDA context made
where there is a GPU, one warm-up compile of another program, then each case), and ``after``
(TileLang imported; for each case TileLang's compile of it first, then ours). The times are
``_timed_compile``'s, as the bench records them; the table gives both and their difference.

    PYTHONPATH=. python3 scripts/experiments/cold_compiles.py [family ...]

Runs without a GPU too (NVRTC needs none; no context then), and without TileLang (``after``
then says so).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MARK = "COLD_COMPILES "


def child(mode: str, families: list) -> None:
    from tileworkbench.bench.tilelang_programs import _timed_compile, load_program
    from tileworkbench.examples.tilelang_programs import FAMILIES

    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"
    try:
        import torch

        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")  # the context, as the bench's inputs make it
    except ImportError:
        pass
    with_tilelang = mode == "after"
    if with_tilelang:
        try:
            import tilelang  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - recorded, then nothing to compare
            print(MARK + json.dumps({"error": f"TileLang not importable: {type(exc).__name__}: {exc}"}), flush=True)
            return
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ours_warm = load_program("elementwise", "tileworkbench", workdir)
        next(iter(ours_warm.CASES.values()))["compile"]()  # NVRTC loaded, imports done
        for family in families or FAMILIES:
            ours = load_program(family, "tileworkbench", workdir)
            theirs = load_program(family, "tilelang", workdir) if with_tilelang else None
            for name, case in ours.CASES.items():
                if theirs is not None:
                    try:
                        _timed_compile(theirs.CASES[name]["compile"])
                    except Exception as exc:  # noqa: BLE001 - TileLang's failure is not ours to time
                        print(f"{name}: TileLang's compile failed: {type(exc).__name__}", file=sys.stderr)
                _, seconds, _ = _timed_compile(case["compile"])
                times[name] = seconds
                print(f"{mode} {name} {seconds:.3f}", file=sys.stderr, flush=True)
    print(MARK + json.dumps({"times": times}), flush=True)


def run_child(mode: str, families: list) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, *families], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()),
                                                                                         os.environ.get("PYTHONPATH")]))})
    for line in out.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1]}


def main(families: list) -> None:
    alone, after = run_child("alone", families), run_child("after", families)
    for mode, result in (("alone", alone), ("after TileLang", after)):
        if "error" in result:
            print(f"{mode}: {result['error']}")
    a, b = alone.get("times", {}), after.get("times", {})
    print("| case | alone s | after TileLang's compile s | difference s |")
    print("| --- | --- | --- | --- |")
    for name in a:
        other = f"{b[name]:.3f} | {b[name] - a[name]:+.3f}" if name in b else "- | -"
        print(f"| {name} | {a[name]:.3f} | {other} |")
    over = [n for n, s in a.items() if s > 0.5]
    print(f"alone: {len(over)} of {len(a)} over 0.5 s ({', '.join(over) or 'none'}); median {statistics.median(a.values()):.3f} s")
    if b:
        over_b = [n for n, s in b.items() if s > 0.5]
        print(f"after TileLang: {len(over_b)} of {len(b)} over 0.5 s; median {statistics.median(b.values()):.3f} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1:])
