"""Compile time of the spec GEMM (``matmul_tma_copy``, 4096^3, 2 stages): cold, disk hit, in-process hit.

Each case runs in a fresh Python process so no in-memory cache helps: the first with empty
tileworkbench and CuPy disk caches (``TILEWORKBENCH_CACHE_DIR`` and ``CUPY_CACHE_DIR`` both point
into a new temporary folder, and ``cache.clear()`` runs as well), the second in a new process over
the caches the first filled. Each process compiles twice; the second compile is the in-process hit.
Measured: building the prim_func (parsing) + ``tw.compile`` with the device loaded (lowering +
NVRTC + module load); not interpreter start-up or imports. Without a GPU only the
tileworkbench side (parse + lowering) is measured, and ``device_loaded`` says so.

``python -m tileworkbench.bench.compile_time`` is the child; ``measure_compile_times()`` the parent.
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
    import tileworkbench as tw
    from tileworkbench.examples.gemm import matmul_tma_copy
    from tileworkbench.jit import cache

    if clear:
        cache.clear()
    configs = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}

    def build_and_compile():
        # Build (parse) every time, as re-running a notebook cell does; the parse is timed too.
        start = time.perf_counter()
        func = matmul_tma_copy(4096, 4096, 4096, 128, 128, 32, "float16", "float16", "float32", 128, 2)
        parse_s = time.perf_counter() - start
        kernel = tw.compile(func, out_idx=[2], pass_configs=configs)
        return kernel, time.perf_counter() - start, parse_s

    kernel, first_s, parse_s = build_and_compile()
    again, memory_s, memory_parse_s = build_and_compile()
    t = kernel.timings
    return {"device_loaded": "load_s" in t,
            "first": {"total_s": first_s, "cache": t.get("cache"), "parse_s": parse_s,
                      "lower_s": t.get("lower_s") if t.get("cache") == "lowered" else None,
                      "load_s": t.get("load_s")},
            "memory_hit": {"total_s": memory_s, "parse_s": memory_parse_s, "same_kernel": again is kernel}}


def _run_child(env: dict, clear: bool, timeout: float) -> dict:
    args = [sys.executable, "-m", "tileworkbench.bench.compile_time"] + (["--clear"] if clear else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(_REPO),
                          check=False)
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    raise RuntimeError(f"compile-time child failed (exit {done.returncode}):\n{done.stderr[-2000:]}")


def measure_compile_times(timeout: float = 300) -> dict:
    """Cold, disk-hit and in-process-hit compile seconds of the spec GEMM (see the module doc)."""
    with tempfile.TemporaryDirectory(prefix="tw-compile-time-") as tmp:
        env = dict(os.environ, TILEWORKBENCH_CACHE_DIR=str(Path(tmp, "tw")), CUPY_CACHE_DIR=str(Path(tmp, "cupy")))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")]))
        for var in ("TILEWORKBENCH_DISABLE_CACHE", "CUPY_CACHE_IN_MEMORY"):
            env.pop(var, None)  # either would make the "disk hit" a miss
        cold = _run_child(env, clear=True, timeout=timeout)
        cupy_files = sum(1 for p in Path(tmp, "cupy").rglob("*") if p.is_file())
        warm = _run_child(env, clear=False, timeout=timeout)
    result = {"kernel": KERNEL, "device_loaded": cold["device_loaded"], "cold": cold["first"],
              "disk_hit": warm["first"], "memory_hit": cold["memory_hit"], "cupy_cache_files_after_cold": cupy_files}
    problems = []
    if cold["first"]["cache"] != "lowered":
        problems.append(f"the cold compile was a {cold['first']['cache']} hit, not a miss")
    if warm["first"]["cache"] != "disk":
        problems.append(f"the second process found {warm['first']['cache']!r}, not the disk cache")
    if not cold["memory_hit"]["same_kernel"]:
        problems.append("compiling again in the same process built a new kernel")
    if cold["device_loaded"] and cupy_files == 0:
        problems.append("CuPy wrote nothing to its disk cache, so the disk hit recompiled with NVRTC")
    result["problems"] = problems
    return result


if __name__ == "__main__":
    print(_MARK + json.dumps(_child(clear="--clear" in sys.argv[1:])), flush=True)
