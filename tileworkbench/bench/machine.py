"""What a benchmark ran on: GPU, driver, CUDA runtime, library versions, commit, date, host.

Every probe is optional: a field that cannot be read is ``None`` rather than an exception, so a
record is always written. No pandas or matplotlib here (the GPU machine may lack them).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _run(args, cwd=None) -> str | None:
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_info(root: Path = REPO_ROOT) -> tuple[str, bool | None]:
    """(short commit, dirty): ``$TW_COMMIT`` when set (the device machine gets a copy of the tree
    whose ``.git``, if any, need not be the submitter's), else git when ``root`` is itself a work
    tree, else ``"unknown"``."""
    if os.environ.get("TW_COMMIT"):
        return os.environ["TW_COMMIT"], None
    top = _run(["git", "-C", str(root), "rev-parse", "--show-toplevel"])
    if top and Path(top).resolve() == root.resolve():  # not some enclosing repository
        commit = _run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"])
        if commit:
            status = _run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
            return commit, (bool(status) if status is not None else None)
    return "unknown", None


def _version(name: str) -> str | None:
    try:
        module = __import__(name)
    except Exception:
        return None
    return getattr(module, "__version__", None)


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


def gpu_info() -> dict:
    """GPU name, arch, SM count, driver and CUDA versions through CuPy (and nvidia-smi for the
    driver's own version string, e.g. 580.159.04)."""
    info = {"gpu": None, "arch": None, "sm_count": None, "driver": None, "cuda": None, "cuda_driver_api": None}
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        info["arch"] = f"sm_{props['major']}{props['minor']}"
        info["sm_count"] = int(props["multiProcessorCount"])
        info["cuda"] = _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
        info["cuda_driver_api"] = _cuda_version(cupy.cuda.runtime.driverGetVersion())
    except Exception:  # no GPU or no CuPy: the record says None rather than failing
        pass
    smi = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    info["driver"] = smi.splitlines()[0].strip() if smi else info["cuda_driver_api"]
    return info


def machine_info() -> dict:
    """The ``machine`` object of a bench record (docs/trace-schema.md, 'Benchmark record')."""
    commit, dirty = commit_info()
    info = gpu_info()
    torch_version = _version("torch")
    return {
        "gpu": info["gpu"], "driver": info["driver"], "cuda": info["cuda"],
        "cupy": _version("cupy"), "torch": torch_version,
        "commit": commit, "dirty": dirty,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hostname": socket.gethostname(),
        "arch": info["arch"], "sm_count": info["sm_count"], "cuda_driver_api": info["cuda_driver_api"],
        "python": platform.python_version(), "tileworkbench": _version("tileworkbench"),
    }
