"""TileLang's programs under both compilers, side by side in one process.

    python -m tileworkbench.bench tilelang [--families gemm,norms] [--out DIR] [--ours-only] [--sources DIR]

Each module of ``tileworkbench.examples.tilelang_programs`` is loaded twice from its own file: as
written (``import tileworkbench as tilelang``) and with its two import lines put back to
``import tilelang`` / ``import tilelang.language as T``, nothing else changed, when TileLang is
importable. For every case: the cold compile time of each (our disk cache off; the first compile
of that kernel in the process; after a full garbage collection, with the collector's time during
the compile kept as ``<compiler>_compile_gc_s``), one call on fresh random inputs checked against the case's torch
reference with the example's tolerances, then both timed in alternating rounds on the same inputs
with ``profiler.do_bench`` (CUDA events after a spin kernel, the L2 flushed before every call).
``ratio`` is TileLang's time over ours: above 1 ours is faster; the issue's bar is 0.9.

Writes ``<out>/tilelang-<date>-<gpu>-<commit>.json`` (its own schema, below) and prints a table.
With ``--sources DIR`` it also writes each kernel's CUDA source from both compilers,
``DIR/<case>.<compiler>.<n>.cu``, to read where one is faster.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SCHEMA = "tileworkbench.tilelang-side-by-side"
VERSION = 1
PROGRAMS = Path(__file__).resolve().parents[1] / "examples" / "tilelang_programs"
OUR_IMPORTS = ("import tileworkbench as tilelang\n", "import tileworkbench.language as T\n")
THEIR_IMPORTS = ("import tilelang\n", "import tilelang.language as T\n")
GOAL = 0.9  # within 10% of TileLang, or faster
ROUNDS = 3


def tilelang_source(source: str, family: str) -> str:
    """The program with TileLang's import lines instead of ours: the only difference allowed."""
    for ours, theirs in zip(OUR_IMPORTS, THEIR_IMPORTS):
        if source.count(ours) != 1:
            raise ValueError(f"{family}.py must import `{ours.strip()}` exactly once")
        source = source.replace(ours, theirs)
    if "tileworkbench" in source:
        raise ValueError(f"{family}.py uses tileworkbench beyond its two import lines")
    return source


def load_program(family: str, package: str, workdir: Path):
    """The module ``family`` compiled by ``package`` ("tileworkbench" or "tilelang"). Written to a
    file of its own first: both front ends read a kernel's source through ``inspect``."""
    source = (PROGRAMS / f"{family}.py").read_text()
    if package == "tilelang":
        source = tilelang_source(source, family)
    path = workdir / package / f"{family}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"tw_side_by_side_{package}_{family}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outputs(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def check(kernel, case: dict, inputs: tuple, torch) -> dict:
    """One call against the reference: {correct, max_abs_err, error}."""
    if case.get("accumulates"):
        inputs[-1].zero_()
    result = kernel(*inputs)
    if case.get("postprocess"):  # the example's own step after the kernel (summing split parts)
        result = case["postprocess"](result)
    got = _outputs(inputs[-1] if case.get("accumulates") else result)
    if case.get("accumulates") and case.get("returns_too"):  # the result, then what it added into
        got = _outputs(result) + got
    want = _outputs(case["reference"](*inputs))
    torch.cuda.synchronize()
    worst, non_finite = 0.0, 0
    try:
        for g, w in zip(got, want, strict=True):
            # NaN or inf where the reference is finite: counted, never folded into the error (a
            # NaN's max would be dropped by max() and read as an error of 0.0)
            bad = ~torch.isfinite(g.float()) & torch.isfinite(w.float())
            non_finite += int(bad.sum().item())
            diff = (g.float() - w.float()).abs()[~bad]
            worst = max(worst, diff.max().item() if diff.numel() else 0.0)
            torch.testing.assert_close(g.float(), w.float(), rtol=case["rtol"], atol=case["atol"])
    except (AssertionError, ValueError) as exc:
        error = str(exc).splitlines()[0]
        if non_finite:
            error = f"{non_finite} non-finite elements where the reference is finite; {error}"
        return {"correct": False, "max_abs_err": worst, "non_finite": non_finite, "error": error}
    return {"correct": True, "max_abs_err": worst, "non_finite": 0}


def _timed_compile(make) -> tuple:
    """(the kernel, its compile's seconds, of them the seconds Python's garbage collector ran).
    Timed after a full collection: the two compilers run in one process, one case after the other,
    and a collection the other's objects (or the last case's) made due should land on neither."""
    gc.collect()
    collecting = []  # [start, seconds so far]

    def clock_collections(phase, info):
        if phase == "start":
            collecting[:1] = [time.perf_counter()]
        elif collecting:
            collecting.append(time.perf_counter() - collecting[0])

    gc.callbacks.append(clock_collections)
    try:
        start = time.perf_counter()
        kernel = make()
        seconds = time.perf_counter() - start
    finally:
        gc.callbacks.remove(clock_collections)
    return kernel, seconds, sum(collecting[1:])


def write_sources(kernel, case_name: str, label: str, folder: Path) -> None:
    """The CUDA source of each kernel a case launches (one, or a callable's ``kernels``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, one in enumerate(getattr(kernel, "kernels", None) or (kernel,)):
        try:
            (folder / f"{case_name}.{label}.{n}.cu").write_text(one.get_kernel_source())
        except Exception as exc:  # a source we cannot read is no reason to lose the timing
            print(f"    no source for {case_name} ({label}): {type(exc).__name__}: {exc}", file=sys.stderr)


def run_case(name: str, ours: dict, theirs: dict | None, torch, do_bench, sources: Path | None = None) -> dict:
    row = {"case": name, "work": {k: ours[k] for k in ("bytes", "flops") if k in ours}}
    kernels = {}
    for label, case in (("tileworkbench", ours), ("tilelang", theirs)):
        if case is None:
            continue
        try:
            kernels[label], row[f"{label}_compile_s"], row[f"{label}_compile_gc_s"] = _timed_compile(case["compile"])
        except Exception as exc:  # the other compiler's failure is a result to record, not a crash
            row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            continue
        if sources is not None:
            write_sources(kernels[label], name, label, sources)
    torch.manual_seed(0)
    inputs = ours["inputs"](torch)
    for label, kernel in list(kernels.items()):
        try:
            row[label] = check(kernel, ours if label == "tileworkbench" else theirs, inputs, torch)
        except Exception as exc:
            row[f"{label}_error"] = f"{type(exc).__name__}: {exc}"
            del kernels[label]
    times = {label: [] for label in kernels}
    for _ in range(ROUNDS):  # alternate, so clocks and neighbours affect both alike
        for label, kernel in kernels.items():
            times[label].append(do_bench(lambda k=kernel: k(*inputs), warmup=25, rep=100, return_mode="median"))
    for label, samples in times.items():
        row[f"{label}_ms"] = statistics.median(samples)
    if "tileworkbench_ms" in row and "tilelang_ms" in row:
        row["ratio"] = row["tilelang_ms"] / row["tileworkbench_ms"]
    return row


def _throughput(row: dict, label: str) -> str:
    ms = row.get(f"{label}_ms")
    if ms is None:
        return "-"
    work = row["work"]
    if "flops" in work:
        return f"{work['flops'] / ms / 1e9:.0f} TFLOP/s"
    return f"{work['bytes'] / ms / 1e6:.0f} GB/s"


def table(rows: list) -> str:
    lines = ["| case | ours ms | TileLang ms | TileLang/ours | ours | TileLang | cold compile ours / TileLang s | correct |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ok = "/".join("yes" if r.get(k, {}).get("correct") else ("no" if k in r else "-")
                      for k in ("tileworkbench", "tilelang"))
        ratio = f"{r['ratio']:.3f}x" if "ratio" in r else "-"
        ms = [f"{r[k]:.4f}" if k in r else r.get(k.replace("_ms", "_error"), "-")[:40]
              for k in ("tileworkbench_ms", "tilelang_ms")]
        compile_s = " / ".join(f"{r[k]:.3f}" if k in r else "-" for k in ("tileworkbench_compile_s", "tilelang_compile_s"))
        lines.append(f"| {r['case']} | {ms[0]} | {ms[1]} | {ratio} | {_throughput(r, 'tileworkbench')} | "
                     f"{_throughput(r, 'tilelang')} | {compile_s} | {ok} |")
    return "\n".join(lines)


def run(families, out: Path, ours_only: bool = False, sources: Path | None = None) -> int:
    import torch

    from ..examples.tilelang_programs import FAMILIES
    from ..profiler import do_bench
    from . import schema
    from .machine import machine_info

    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # cold compiles: no disk hit
    families = list(families or FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        print(f"unknown famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; choose from "
              f"{', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    tilelang_version = None
    if not ours_only:
        try:
            import tilelang

            tilelang_version = getattr(tilelang, "__version__", "unknown")
        except Exception as exc:
            print(f"TileLang is not importable here ({type(exc).__name__}: {exc}); timing ours alone",
                  file=sys.stderr)
    record = {"schema": SCHEMA, "version": VERSION, "machine": machine_info(), "tilelang": tilelang_version,
              "settings": {"rounds": ROUNDS, "warmup_ms": 25, "rep_ms": 100, "goal_ratio": GOAL}, "rows": []}
    rows = record["rows"]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for family in families:
            ours = load_program(family, "tileworkbench", workdir)
            theirs = None
            if tilelang_version:
                try:
                    theirs = load_program(family, "tilelang", workdir)
                except Exception as exc:
                    print(f"{family}: TileLang could not load it: {type(exc).__name__}: {exc}", file=sys.stderr)
            for name, case in ours.CASES.items():
                print(f"[{len(rows) + 1}] {family}.{name} ...", file=sys.stderr, flush=True)
                row = run_case(name, case, theirs.CASES[name] if theirs else None, torch, do_bench, sources)
                row["family"] = family
                rows.append(row)
                print("    " + table([row]).splitlines()[-1], file=sys.stderr, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    path = schema.write_record(record, out, schema.record_filename({**record, "suite": "tilelang"}))
    print(table(rows))
    print(f"wrote {path}", file=sys.stderr)
    return 0 if all(r.get("tileworkbench", {}).get("correct") for r in rows) else 1
