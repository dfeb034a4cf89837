"""One autotuning sweep, timed on one machine's process pool and on a Ray cluster (issue 22: "the
speed-up of a 64-config sweep on N GPUs against one").

    python -m tileworkbench.bench sweep [--size 4096x4096x4096] [--dtype float16] [--configs 64]
                                        [--ray [ADDRESS]] [--no-local] [--compile-only] [--out DIR]

The sweep is ``autotune(tileworkbench.examples.gemm.matmul, configs, args=(M, N, K),
kwargs={"dtype": ...}, out_idx=[2])`` with the remembered best config not used. The config space
(``sweep_configs``): block_M in (64, 128), block_N in (64, 128, 256), block_K in (32, 64),
num_stages in (2, 3, 4), threads in (128, 256), in ``autotuner.config_space`` order (72 configs,
all within sm_90's shared memory; all 72 compiled for sm_90a when this was written); ``--configs
N`` keeps N of them evenly spread over that order (config ``i * 72 // N`` for i < N), so 64 drops
8 and a small N still mixes tile shapes.

Each backend runs the same configs from a cold start as far as our caches go: the compile cache
(``TILEWORKBENCH_CACHE_DIR``) points into a new temporary folder per backend, for the driver, the
local compile processes and (through the job's ``runtime_env``) the Ray workers, so the second
run compiles everything again. ``local`` is ``autotune(backend="local")``: compiles in a process
pool, then times on this machine's GPU. ``ray`` is ``autotune(backend="ray")``: compiles as CPU
tasks, times as tasks holding one GPU each; ``--ray`` alone starts a local cluster, ``--ray
ADDRESS`` joins a running one. Per backend: wall seconds of the sweep (the ``autotune`` call; the
Ray connection or cluster start is ``startup_s``, outside it), of its compile and timing steps
(``AutotuneResult.phase_s``), GPUs it timed on, configs compiled / failed / timed, the best config
and its milliseconds. The speed-up is ``local wall_s / ray wall_s``.

``--compile-only`` stops each sweep after its compile step (``benchmark=False``): no GPU needed.
Without it, the local run needs a CUDA GPU here and the Ray run GPUs in its cluster.

Writes ``<out>/sweep-<date>-<gpu>-<commit>.json`` (after each backend, ``complete`` false until the
end): ``schema`` ("tileworkbench.sweep-bench"), ``version``, ``suite`` ("sweep"), ``complete``,
``machine`` (``machine.machine_info()``), ``settings`` (builder, M, N, K, dtype, target, n_configs,
space, compile_only, warmup, rep, trial_timeout_s, ray), ``configs`` (their names, in sweep order),
``runs`` (one per backend: ``backend``, ``address``, ``gpus``, ``cluster_gpus``, ``cpus``,
``wall_s``, ``startup_s``, ``compile_s``, ``benchmark_s``, ``cache_entries`` (kernel records its
fresh cache folder got on this machine: the cold start's evidence; Ray workers on other machines
write theirs there), ``compiled``, ``failed``, ``timed``, ``timing_failed``, ``compile_workers``,
``best`` (config, name, ms, tflops) and ``configs``: one entry per config with its fields,
``compiled``, ``error``, ``registers``, ``spills_bytes``, ``smem_bytes``, ``compile_s``, ``ms``; or
``backend`` and ``error`` where the run failed) and ``speedup`` (null unless both ran).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SCHEMA = "tileworkbench.sweep-bench"
VERSION = 1
BUILDER = "tileworkbench.examples.gemm.matmul"
SPACE = {"block_M": (64, 128), "block_N": (64, 128, 256), "block_K": (32, 64), "num_stages": (2, 3, 4),
         "threads": (128, 256)}
DEFAULT_SIZE = (4096, 4096, 4096)
DEFAULT_CONFIGS = 64
DTYPES = ("float16", "bfloat16")


def parse_size(text: str) -> tuple[int, int, int]:
    """``"4096"`` (square) or ``"MxNxK"``: positive integers; ValueError saying what is wrong."""
    parts = text.lower().split("x")
    if len(parts) not in (1, 3):
        raise ValueError(f"--size takes N or MxNxK, not {text!r}")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"--size takes N or MxNxK (positive integers), not {text!r}") from None
    if any(d <= 0 for d in dims):
        raise ValueError(f"--size takes positive sizes, not {text!r}")
    return (dims[0],) * 3 if len(dims) == 1 else tuple(dims)


def sweep_configs(n: int) -> list:
    """``n`` configs of ``SPACE``, evenly spread over its ``config_space`` order (module doc)."""
    from ..autotuner.space import config_space

    space = config_space(**SPACE)
    if not 1 <= n <= len(space):
        raise ValueError(f"--configs must be between 1 and {len(space)} (the size of the config space), "
                         f"not {n}")
    return [space[i * len(space) // n] for i in range(n)]


@dataclass
class SweepSettings:
    M: int
    N: int
    K: int
    dtype: str = "float16"
    target: str = "sm_90a"
    compile_only: bool = False
    warmup: int = 10
    rep: int = 50
    trial_timeout_s: float | None = None

    @property
    def flops(self) -> float:
        return 2.0 * self.M * self.N * self.K

    def autotune_kwargs(self) -> dict:
        return {"args": (self.M, self.N, self.K), "kwargs": {"dtype": self.dtype}, "out_idx": [2],
                "target": self.target, "benchmark": not self.compile_only, "use_memory": False,
                "warmup": self.warmup, "rep": self.rep}


@contextlib.contextmanager
def cache_at(path: Path):
    """``TILEWORKBENCH_CACHE_DIR`` set to ``path`` in this process (and what it starts), restored after."""
    before = os.environ.get("TILEWORKBENCH_CACHE_DIR")
    os.environ["TILEWORKBENCH_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TILEWORKBENCH_CACHE_DIR", None)
        else:
            os.environ["TILEWORKBENCH_CACHE_DIR"] = before


def summarize(result, configs: list, settings: SweepSettings) -> dict:
    """The counts, phase times, best config and per-config rows of one ``AutotuneResult``."""
    compiled = {c.config: c for c in result.compiled}
    trials = {t.config: t for t in result.trials}
    rows = []
    for cfg in configs:
        c, t = compiled.get(cfg), trials.get(cfg)
        error = None if c is None or c.ok else f"{c.error_type}: {c.error}"
        if t is not None and t.error is not None:
            error = t.error
        rows.append({**cfg.as_kwargs(), "name": cfg.name, "compiled": bool(c and c.ok), "error": error,
                     "registers": c and c.registers, "spills_bytes": c and c.spills_bytes,
                     "smem_bytes": c and c.smem_bytes, "compile_s": c and c.seconds,
                     "ms": t.ms if t is not None else None})
    best = None
    if result.config is not None and result.ms is not None:
        best = {"config": result.config.as_kwargs(), "name": result.config.name, "ms": result.ms,
                "tflops": settings.flops / (result.ms * 1e-3) / 1e12}
    return {"compile_s": result.phase_s.get("compile"), "benchmark_s": result.phase_s.get("benchmark"),
            "compiled": sum(r["compiled"] for r in rows), "failed": sum(not r["compiled"] for r in rows),
            "timed": sum(r["ms"] is not None for r in rows),
            "timing_failed": sum(r["compiled"] and r["ms"] is None for r in rows) if result.trials else 0,
            "compile_workers": len({c.worker_pid for c in result.compiled if c.worker_pid is not None}),
            "best": best, "configs": rows}


def cache_entries(cache: Path) -> int:
    """Kernel records in a compile cache folder (``jit.cache``: one ``<key>.json`` each, at its top)."""
    return len(list(cache.glob("*.json"))) if cache.is_dir() else 0


def run_local(configs: list, settings: SweepSettings, cache: Path) -> dict:
    """The sweep on this machine: a process pool compiles, this process times on GPU 0."""
    from ..autotuner import autotune
    from ..examples.gemm import matmul

    with cache_at(cache):
        start = time.perf_counter()
        result = autotune(matmul, configs, **settings.autotune_kwargs())
        wall = time.perf_counter() - start
    return {"backend": "local", "address": None, "gpus": 0 if settings.compile_only else 1,
            "cluster_gpus": None,
            "cpus": max(1, min(len(configs), os.cpu_count() or 1)), "wall_s": wall, "startup_s": 0.0,
            "cache_entries": cache_entries(cache), **summarize(result, configs, settings)}


def run_ray(configs: list, settings: SweepSettings, address: str, cache: Path) -> dict:
    """The sweep on a Ray cluster: ``address`` "local" starts a new local one (and stops it after;
    not one that ``RAY_ADDRESS`` or ``ray start`` points at), else joins the one there."""
    import ray

    from ..autotuner import autotune
    from ..examples.gemm import matmul

    if ray.is_initialized():  # its workers' cache folder is not ours to choose
        raise RuntimeError("Ray is already initialised in this process; the sweep benchmark starts its own "
                           "connection (with a fresh compile cache for its workers)")
    with cache_at(cache):
        start = time.perf_counter()
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"TILEWORKBENCH_CACHE_DIR": str(cache)}})
        try:
            resources = ray.cluster_resources()
            startup = time.perf_counter() - start
            gpus, cpus = float(resources.get("GPU", 0)), int(resources.get("CPU", 0))
            where = "a new local cluster" if address == "local" else address
            print(f"sweep (ray): {where}: {cpus} CPUs, {gpus:g} GPUs", file=sys.stderr, flush=True)
            start = time.perf_counter()
            result = autotune(matmul, configs, backend="ray", trial_timeout_s=settings.trial_timeout_s,
                              gpus_per_trial=1, **settings.autotune_kwargs())
            wall = time.perf_counter() - start
        finally:
            ray.shutdown()
    return {"backend": "ray", "address": address, "gpus": 0 if settings.compile_only else gpus,
            "cluster_gpus": gpus, "cpus": cpus, "wall_s": wall, "startup_s": startup,
            "cache_entries": cache_entries(cache), **summarize(result, configs, settings)}


def speedup(runs: list) -> float | None:
    walls = {r["backend"]: r.get("wall_s") for r in runs if "error" not in r}
    if walls.get("local") and walls.get("ray"):
        return walls["local"] / walls["ray"]
    return None


def _cell(value, fmt: str = "{:.2f}") -> str:
    if value is None:
        return "-"
    return fmt.format(value) if isinstance(value, float) else str(value)


def table(record: dict) -> str:
    """The runs as a markdown table, the speed-up last."""
    lines = ["| backend | GPUs | CPUs | wall s | startup s | compile s | timing s | compiled | failed | timed "
             "| best | best ms | TFLOP/s |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["runs"]:
        if "error" in r:
            lines.append(f"| {r['backend']} | failed: {r['error']} |" + " |" * 11)
            continue
        best = r["best"] or {}
        lines.append(" | ".join(["", r["backend"], _cell(r["gpus"], "{:g}"), _cell(r["cpus"]), _cell(r["wall_s"]),
                                 _cell(r["startup_s"]), _cell(r["compile_s"]), _cell(r["benchmark_s"]),
                                 _cell(r["compiled"]), _cell(r["failed"]), _cell(r["timed"]),
                                 best.get("name", "-"), _cell(best.get("ms"), "{:.4f}"),
                                 _cell(best.get("tflops"), "{:.1f}"), ""]).strip())
    what = "compile-only sweep" if record["settings"]["compile_only"] else "sweep"
    s = record.get("speedup")
    lines.append("")
    lines.append(f"speed-up of the {len(record['configs'])}-config {what} on Ray against local (local s / ray s): "
                 + (f"{s:.2f}x" if s else "- (needs both runs)"))
    return "\n".join(lines)


def run(configs: list, settings: SweepSettings, out: Path, local: bool = True, ray: str | None = None) -> int:
    """Run the backends asked for (``ray``: None for no Ray run, "local" for a new local cluster,
    else an address), write the record, print the table. 0 when every run finished, 1 when one
    failed (the record keeps its error), 2 when all failed (no record)."""
    from . import schema
    from .machine import machine_info

    record = {"schema": SCHEMA, "version": VERSION, "suite": "sweep", "complete": False, "machine": machine_info(),
              "settings": {"builder": BUILDER, "M": settings.M, "N": settings.N, "K": settings.K,
                           "dtype": settings.dtype, "target": settings.target, "n_configs": len(configs),
                           "space": {k: list(v) for k, v in SPACE.items()}, "compile_only": settings.compile_only,
                           "warmup": settings.warmup, "rep": settings.rep,
                           "trial_timeout_s": settings.trial_timeout_s, "ray": ray},
              "configs": [c.name for c in configs], "runs": [], "speedup": None}
    out = Path(out)
    name = schema.record_filename(record)
    backends = (["local"] if local else []) + (["ray"] if ray is not None else [])
    print(f"sweep: {len(configs)} configs of {BUILDER} at {settings.M}x{settings.N}x{settings.K} {settings.dtype}"
          f"{' (compile only)' if settings.compile_only else ''} on {', '.join(backends)}; record {out / name}",
          file=sys.stderr, flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="tw-sweep-"))
    try:
        for backend in backends:
            try:
                if backend == "local":
                    entry = run_local(configs, settings, scratch / "local")
                else:
                    entry = run_ray(configs, settings, ray, scratch / "ray")
            except Exception as exc:  # said in one line and recorded; the other backend still runs
                message = " ".join(str(exc).split()) or repr(exc)
                print(f"sweep ({backend}): {type(exc).__name__}: {message}", file=sys.stderr, flush=True)
                entry = {"backend": backend, "error": f"{type(exc).__name__}: {message}"}
            record["runs"].append(entry)
            record["speedup"] = speedup(record["runs"])
            if any("error" not in r for r in record["runs"]):
                schema.write_record(record, out, name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if all("error" in r for r in record["runs"]):
        return 2
    record["complete"] = True
    path = schema.write_record(record, out, name)
    print(table(record), flush=True)
    print(f"wrote {path}", file=sys.stderr, flush=True)
    return 0 if all("error" not in r for r in record["runs"]) else 1
