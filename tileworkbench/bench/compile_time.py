"""Compile time of the spec GEMM (``matmul_tma_copy``, 4096^3, 2 stages): cold, disk hit, in-process hit.

Each case runs in a fresh Python process so no in-memory cache helps: the first with an empty
tileworkbench disk cache (``TILEWORKBENCH_CACHE_DIR`` points into a new temporary folder, and
``cache.clear()`` runs as well; so do ``CUPY_CACHE_DIR``, though CuPy's compiler is no longer on
the path, and ``CUDA_CACHE_PATH``, the driver's compute cache, which NVRTC 12.9+ would use
without ``--no-cache``), the second in a new process over the caches the first filled. Each process compiles
twice; the second compile is the in-process hit.

Before the timer starts, each process imports CuPy and creates the CUDA context
(``cupy.cuda.runtime.free(0)``), as a user's first GPU array does; that is recorded on its own
(``cupy_import_s``, ``context_init_s``, the latter including the import), not in ``total_s``.
Timed (``total_s``): building the prim_func (parsing) + ``tw.compile`` with the device loaded:
lowering (``lower_s``), NVRTC to a cubin (``nvrtc_s``, run in a thread while the analyses run,
so only ``nvrtc_wait_s`` of it adds to the total) and the module load (``load_s``, of which
``module_load_s`` is ``cuModuleLoadData`` + getting the kernel + its shared-memory limit); not
interpreter start-up or imports before the timer. ``nvrtc_compiles`` counts NVRTC runs in the
process: 1 cold, 0 on a disk hit. Without a GPU, NVRTC still runs (it needs none) but nothing
is loaded, and ``device_loaded`` says so.

``python -m tileworkbench.bench.compile_time`` is the child; ``measure_compile_times()`` the parent,
which repeats the pair three times (new empty caches each time) and reports the median cold run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL = "matmul_tma_copy 4096x4096x4096 fp16, 128x128x32, 2 stages, 128 threads"
_MARK = "TW_COMPILE_TIME_RESULT "
_REPO = Path(__file__).resolve().parents[2]


def _child(clear: bool) -> dict:
    from tileworkbench.examples.gemm import matmul_tma_copy
    from tileworkbench.jit import cache
    from tileworkbench.jit.kernel import compile as compile_kernel
    from tileworkbench.target import PassConfigKey

    if clear:
        cache.clear()
    cupy_import_s, context_init_s = _init_context()
    configs = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}

    def build_and_compile():
        # Build (parse) every time, as re-running a notebook cell does; the parse is timed too.
        start = time.perf_counter()
        func = matmul_tma_copy(4096, 4096, 4096, 128, 128, 32, "float16", "float16", "float32", 128, 2)
        parse_s = time.perf_counter() - start
        kernel = compile_kernel(func, out_idx=[2], pass_configs=configs)
        return kernel, time.perf_counter() - start, parse_s

    from tileworkbench.backend import nvrtc

    kernel, first_s, parse_s = build_and_compile()
    compiles = nvrtc.COMPILES
    again, memory_s, memory_parse_s = build_and_compile()
    t = kernel.timings
    lowered = t.get("cache") == "lowered"  # else these timings are the cold compile's, from the record
    return {"device_loaded": "load_s" in t, "nvrtc_version": nvrtc.nvrtc_version(),
            "cubin_bytes": len(kernel.cubin) if kernel.cubin else None,
            "first": {"total_s": first_s, "cache": t.get("cache"), "parse_s": parse_s,
                      "lower_s": t.get("lower_s") if lowered else None,
                      "nvrtc_s": t.get("nvrtc_s") if lowered else None,
                      "nvrtc_wait_s": t.get("nvrtc_wait_s") if lowered else None,
                      "load_s": t.get("load_s"), "module_load_s": t.get("module_load_s"),
                      "nvrtc_compiles": compiles, "cupy_import_s": cupy_import_s,
                      "context_init_s": context_init_s},
            "memory_hit": {"total_s": memory_s, "parse_s": memory_parse_s, "same_kernel": again is kernel,
                           "nvrtc_compiles": nvrtc.COMPILES - compiles}}


def _init_context() -> tuple:
    """Import CuPy and create the CUDA context, as a user's first GPU array does: (seconds for the
    import, seconds for import + context), None where there is no CuPy or no GPU."""
    start = time.perf_counter()
    try:
        import cupy
    except ImportError:
        return None, None
    imported = time.perf_counter() - start
    try:
        cupy.cuda.runtime.free(0)  # cudaFree(NULL): creates the primary context, frees nothing
    except cupy.cuda.runtime.CUDARuntimeError:  # no GPU or no driver
        return imported, None
    return imported, time.perf_counter() - start


def _run_child(env: dict, clear: bool, timeout: float) -> dict:
    args = [sys.executable, "-m", "tileworkbench.bench.compile_time"] + (["--clear"] if clear else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(_REPO),
                          check=False)
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    raise RuntimeError(f"compile-time child failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def measure_compile_times(timeout: float = 300, runs: int = 3) -> dict:
    """Cold, disk-hit and in-process-hit compile seconds of the spec GEMM (see the module doc).

    ``runs`` times over (each with new empty cache folders): the run with the median cold time is
    reported in full, ``runs_s`` lists every run's cold and disk-hit seconds, since one cold
    compile on a shared machine varies by tens of milliseconds, and ``cold_runs`` every cold
    run's parts (so a slow one can be told apart: a slow NVRTC, a slow lowering, a slow load)."""
    pairs = [_cold_and_warm(timeout) for _ in range(max(runs, 1))]
    order = sorted(range(len(pairs)), key=lambda i: pairs[i][0]["first"]["total_s"])
    cold, warm, cupy_files = pairs[order[len(order) // 2]]
    runs_s = {"cold": [p[0]["first"]["total_s"] for p in pairs], "disk_hit": [p[1]["first"]["total_s"] for p in pairs]}
    result = {"kernel": KERNEL, "device_loaded": cold["device_loaded"], "cold": cold["first"],
              "disk_hit": warm["first"], "memory_hit": cold["memory_hit"], "cupy_cache_files_after_cold": cupy_files,
              "runs_s": runs_s, "cold_runs": [p[0]["first"] for p in pairs],
              "nvrtc_version": cold.get("nvrtc_version"), "cubin_bytes": cold.get("cubin_bytes")}
    problems = []
    if cold["first"]["cache"] != "lowered":
        problems.append(f"the cold compile was a {cold['first']['cache']} hit, not a miss")
    if warm["first"]["cache"] != "disk":
        problems.append(f"the second process found {warm['first']['cache']!r}, not the disk cache")
    if not cold["memory_hit"]["same_kernel"]:
        problems.append("compiling again in the same process built a new kernel")
    if cold.get("nvrtc_version") and cold["first"]["nvrtc_compiles"] != 1:
        problems.append(f"the cold compile ran NVRTC {cold['first']['nvrtc_compiles']} times, not once")
    if warm["first"]["nvrtc_compiles"] or cold["memory_hit"]["nvrtc_compiles"]:
        problems.append("a cache hit ran NVRTC (the record's cubin was not used)")
    result["problems"] = problems
    return result


def _cold_and_warm(timeout: float) -> tuple[dict, dict, int]:
    """One cold compile in a fresh process over empty caches, then a disk hit in another."""
    with tempfile.TemporaryDirectory(prefix="tw-compile-time-") as tmp:
        env = dict(os.environ, TILEWORKBENCH_CACHE_DIR=str(Path(tmp, "tw")), CUPY_CACHE_DIR=str(Path(tmp, "cupy")),
                   CUDA_CACHE_PATH=str(Path(tmp, "nv")))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")]))
        for var in ("TILEWORKBENCH_DISABLE_CACHE", "CUPY_CACHE_IN_MEMORY"):
            env.pop(var, None)  # either would make the "disk hit" a miss
        cold = _run_child(env, clear=True, timeout=timeout)
        cupy_files = sum(1 for p in Path(tmp, "cupy").rglob("*") if p.is_file())
        warm = _run_child(env, clear=False, timeout=timeout)
    return cold, warm, cupy_files


if __name__ == "__main__":
    print(_MARK + json.dumps(_child(clear="--clear" in sys.argv[1:])), flush=True)
