"""Compile caches: in-process (a dict) and on disk (one JSON file per key, written atomically).

The key covers everything that decides the generated code and the cubin: the package version,
the record format, the content of our CUDA headers and of the compiler's own modules (so a
changed pass never serves a kernel an older one generated), the parsed kernel (its printed IR, which
folds in every closure value), the target (its arch), the pass configs, ``out_idx``, and NVRTC's
version and options. A record holds the sources, the trace and the cubin (base64), so a disk hit
runs no NVRTC.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..version import __version__
from ..codegen.cuda import HEADER_DIR, HEADER_ORDER, TIMELINE_HEADER

MEMORY: dict = {}
_HEADERS_HASH: str | None = None
# 2: records carry the cubin and NVRTC's report ("cubin", "nvrtc")
RECORD_FORMAT = 2


# The packages whose code decides what a kernel lowers to; the workbench around them (bench,
# notebook, report, autotune, examples) does not.
COMPILER_PACKAGES = ("analysis", "backend", "codegen", "frontend", "ir", "jit", "language", "passes")
_COMPILER_HASH: str | None = None


def compiler_hash() -> str:
    """Hash of this compiler's Python sources (as Triton keys its cache by its own sources)."""
    global _COMPILER_HASH
    if _COMPILER_HASH is None:
        _COMPILER_HASH = source_hash(Path(__file__).resolve().parents[1])
    return _COMPILER_HASH


def source_hash(package: Path) -> str:
    """Hash of the top-level modules and ``COMPILER_PACKAGES`` of the package at ``package``."""
    h = hashlib.sha256()
    files = sorted(package.glob("*.py")) + sorted(f for pkg in COMPILER_PACKAGES for f in (package / pkg).rglob("*.py"))
    for path in files:
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def headers_hash() -> str:
    global _HEADERS_HASH
    if _HEADERS_HASH is None:
        h = hashlib.sha256()
        for name in HEADER_ORDER + (TIMELINE_HEADER,):
            h.update((HEADER_DIR / name).read_bytes())
        _HEADERS_HASH = h.hexdigest()
    return _HEADERS_HASH


def cache_key(ir_text: str, target, configs: dict, out_idx) -> str:
    h = hashlib.sha256()
    from ..analysis.stage import ANALYSES
    from ..backend.nvrtc import fingerprint

    analyses = ",".join(a.name for a in ANALYSES)  # the record's trace holds what they found
    for part in (__version__, str(RECORD_FORMAT), headers_hash(), compiler_hash(), analyses, ir_text,
                 json.dumps(target.to_json(), sort_keys=True),
                 json.dumps({k: str(v) for k, v in configs.items()}, sort_keys=True), repr(out_idx),
                 fingerprint(target.arch)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def cache_dir() -> Path:
    return Path(os.environ.get("TILEWORKBENCH_CACHE_DIR", Path.home() / ".cache" / "tileworkbench"))


_enabled = True  # tileworkbench.disable_cache() / enable_cache(): TileLang's switch for its kernel cache


def set_enabled(on: bool) -> None:
    """Turn both caches on or off for this process (``tileworkbench.disable_cache()``)."""
    global _enabled
    _enabled = bool(on)


def memory_enabled() -> bool:
    return _enabled


def disk_enabled() -> bool:
    return _enabled and os.environ.get("TILEWORKBENCH_DISABLE_CACHE", "") not in ("1", "true")


def load(key: str) -> dict | None:
    if not disk_enabled():
        return None
    path = cache_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store(key: str, record: dict) -> None:
    if not disk_enabled():
        return
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps(record)  # one shot: the C encoder (json.dump to a file is pure Python)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, directory / f"{key}.json")
    except OSError:
        pass  # a read-only home must not stop compilation


def clear() -> None:
    """Empty both caches (used by tests and by the compile-time benchmark)."""
    MEMORY.clear()
    directory = cache_dir()
    if directory.exists():
        for p in directory.glob("*.json"):
            p.unlink(missing_ok=True)
