"""The attention suite on a Ray cluster: ``python -m tileworkbench.bench attention --ray [ADDRESS]``.

First one task holding a GPU says what the rows will run on (the record's GPU fields, and the arch
our kernels are compiled for, as ``compile(target="auto")`` picks it on that GPU). Then our kernel
of every row is compiled as a Ray CPU task (cold: our disk cache off, as on one machine) and comes
back as its kernel record(s), cubin included (decoding's split pass and combine: one record each),
so nothing depends on a disk cache shared between machines. Each row then runs as a task holding
one GPU (one row per GPU at a time): the same ``attention.run_row`` as on one machine (inputs,
float32 check, SDPA backends, TileLang where it is importable on that worker, alternating timed
rounds with ``profiler.do_bench``), our kernel loaded from its record instead of compiled there; a
row whose compile failed on the CPU workers compiles it in the row, failing there with its own
error. The decode row measures the device-to-device copy bandwidth it is judged by on its own GPU.
Rows come back as they finish, are printed, and are written to the record in the suite's order; a
row whose worker dies or that runs past the time limit is recorded with that error while the others
go on (``autotuner.ray_backend.RaySweep``). Our ``compile_s`` is the cold compile on the CPU
worker (``compiled_on`` names it); ``load_s`` the module load on the GPU worker.

Tested on CPU workers (the compile step, the streaming of failed rows, the refusals); the GPU rows
ran on one H200 with ``--quick`` (BENCHMARKS.md, issue 22), not yet on a cluster of several GPUs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

from .attention import Row

ROW_TIMEOUT_S = 1800.0  # a row: the reference, TileLang's compiles, every implementation's timed rounds
COMPILE_TIMEOUT_S = 600.0  # one of our kernels on a CPU worker (seconds on one core)
GPU_FIELDS = ("gpu", "driver", "cuda", "cupy", "torch", "arch", "sm_count", "cuda_driver_api")


# ---- what runs on the workers (module level: Ray pickles them by reference) ---------------------

def probe_gpu() -> dict:
    """The machine fields of the GPU this task holds, and the arch our compiler picks for it."""
    from ..target import detect_arch
    from .machine import machine_info

    return {"machine": machine_info(), "arch": detect_arch(), "host": socket.gethostname()}


def compile_row(row: Row, arch: str | None) -> dict:
    """Our kernel of ``row``, compiled cold and not loaded (no GPU needed), as what ``load_ours``
    needs to load it elsewhere: its kernel record(s), cubin included."""
    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # cold compiles: no disk hit, as on one machine
    from ..jit import cache
    from ..target import Target
    from .attention import ours

    cache.MEMORY.clear()  # a worker reused from an earlier task: no in-process hit either
    start = time.perf_counter()
    with Target.of(arch) if arch else contextlib.nullcontext():
        kernel = ours(row, load_device=False)
    seconds = time.perf_counter() - start
    parts = getattr(kernel, "kernels", None)
    return {"row": row.name, "records": [k.record for k in (parts or [kernel])], "sequence": parts is not None,
            "name": kernel.name, "n_params": len(kernel.params), "out_idx": list(kernel.out_idx),
            "compile_s": seconds, "host": socket.gethostname()}


def load_ours(shipped: dict, load_device: bool = True):
    """The kernel ``compile_row`` compiled, loaded from its record(s): a ``Kernel``, or for
    decoding a ``KernelSequence`` of its parts (called as ``kernel(q, k, v) -> o`` either way)."""
    from ..jit.kernel import Kernel

    if not shipped["sequence"]:
        return Kernel(shipped["records"][0], shipped["out_idx"], load_device=load_device)
    from ..jit.sequence import KernelSequence

    parts = [Kernel(record, None, load_device=load_device) for record in shipped["records"]]
    # the sequence reads only the name and the parameter count of the function it came from
    source = SimpleNamespace(name=shipped["name"], params=[None] * shipped["n_params"])
    return KernelSequence(source, parts, shipped["out_idx"])


def run_row_task(row: Row, seed: int, shipped: dict | None, ours_only: bool) -> dict:
    """One row of the suite on the GPU this task holds (``attention.run_row``)."""
    import torch

    from ..profiler import do_bench
    from .attention import copy_bandwidth, load_tilelang_programs, run_row

    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # ours compiled here only if the CPU compile failed
    programs = None if ours_only else load_tilelang_programs()
    tilelang_version = None
    if programs is not None:
        import tilelang

        tilelang_version = getattr(tilelang, "__version__", "unknown")
    worker = {"host": socket.gethostname(), "gpu": torch.cuda.get_device_name(), "tilelang": tilelang_version,
              "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if row.decode:
        worker["copy_gbps"] = copy_bandwidth(torch, do_bench)
    make = (lambda: load_ours(shipped)) if shipped is not None else None
    result = run_row(row, torch, do_bench, programs, seed, make_ours=make)
    mine = result["impls"].get("tileworkbench", {})
    if shipped is not None and "compile_s" in mine:
        mine["load_s"] = mine["compile_s"]
        mine["compile_s"] = shipped["compile_s"]
        mine["compiled_on"] = shipped["host"]
    result["ray"] = worker
    torch.cuda.empty_cache()
    return result


# ---- the driver ---------------------------------------------------------------------------------

def failed_row(row: Row, error: str) -> dict:
    """A row whose task died or ran past its time limit: recorded with the error, ours not correct."""
    return {"row": row.name, "shape": asdict(row), "flops": row.flops, "kv_bytes": row.kv_bytes,
            "impls": {"tileworkbench": {"error": error}}}


def compile_rows(sweep, rows: list[Row], arch: str | None = None, log=None) -> list:
    """What ``compile_row`` returns for each row (None where it failed: that row compiles, and
    fails with its own error, inside its GPU task), compiled side by side on CPU workers."""
    log = log or sys.stderr
    shipped: list = [None] * len(rows)
    count = [0]

    def done(i, outcome):
        count[0] += 1
        if outcome.ok:
            shipped[i] = outcome.value
            note = f" {outcome.value['compile_s']:.1f} s"
        else:
            note = f" failed ({outcome.error_type}: {outcome.error})"
        print(f"[compile {count[0]}/{len(rows)}] {rows[i].name}{note}", file=log, flush=True)

    sweep.run(compile_row, [(row, arch) for row in rows], {"num_cpus": 1}, sweep.cpu_slots(), done)
    return shipped


def run_on_ray(rows: list[Row], out: Path, address: str | None, ours_only: bool = False, seed: int = 0,
               row_timeout_s: float = ROW_TIMEOUT_S, log=None) -> int:
    """The suite's rows on a Ray cluster (module doc), written to ``out`` as ``attention.run``
    writes them; the exit status (0 when ours ran correctly on every row). Refuses a cluster
    without GPUs with a RuntimeError before anything is written."""
    from ..autotuner.ray_backend import RaySweep
    from . import schema
    from .attention import finish, new_record, progress_line
    from .machine import machine_info

    log = log or sys.stderr
    sweep = RaySweep(address, row_timeout_s, gpus_per_trial=1)
    with sweep.session():
        gpus = sweep.require_gpus("attention suite")
        sweep.timeout = COMPILE_TIMEOUT_S
        (probe,) = sweep.run(probe_gpu, [()], {"num_gpus": 1}, 1)
        if not probe.ok:
            raise RuntimeError(f"no task holding a GPU could start: {probe.error_type}: {probe.error}")
        machine = machine_info()
        machine.update({k: probe.value["machine"].get(k) for k in GPU_FIELDS})
        record = new_record(machine, None, seed)
        record["settings"]["ray"] = {"address": address or "local", "gpus": gpus, "cpus": sweep.cpu_slots(),
                                     "row_timeout_s": row_timeout_s, "compiled_for": probe.value["arch"]}
        name = schema.record_filename(record)
        print(f"attention suite on Ray: {len(rows)} rows over {gpus:g} GPU(s) ({machine['gpu']}); "
              f"record {out / name}", file=log, flush=True)
        shipped = compile_rows(sweep, rows, probe.value["arch"], log)

        sweep.timeout = row_timeout_s
        results: list = [None] * len(rows)
        started = time.perf_counter()

        def done(i, outcome):
            results[i] = outcome.value if outcome.ok else failed_row(rows[i], f"{outcome.error_type}: {outcome.error}")
            finished = [r for r in results if r is not None]
            record["rows"] = finished
            copies = [r["ray"]["copy_gbps"] for r in finished if "copy_gbps" in r.get("ray", {})]
            if copies:
                record["copy_gbps"] = copies[0]
            versions = [r["ray"]["tilelang"] for r in finished if r.get("ray", {}).get("tilelang")]
            record["tilelang"] = versions[0] if versions else None
            schema.write_record(record, out, name)
            print(progress_line(len(finished), len(rows), results[i], time.perf_counter() - started),
                  file=log, flush=True)

        payloads = [(row, seed + i, shipped[i - 1], ours_only) for i, row in enumerate(rows, 1)]
        sweep.run(run_row_task, payloads, {"num_gpus": 1}, sweep.gpu_slots(), done)
    return finish(record, out, name)
