"""What autotune remembers: the best config per (builder, problem, device), one JSON file in the
tileworkbench cache folder: ``cache_dir()/autotune/best.json``. A subfolder, because
``jit.cache.clear()`` deletes the compile cache's ``*.json`` files at the top of the folder."""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path

from ..jit.cache import cache_dir
from .space import Config

FILE_NAME = "best.json"


def memory_path() -> Path:
    return cache_dir() / "autotune" / FILE_NAME


def builder_name(builder) -> str:
    return f"{getattr(builder, '__module__', '?')}.{getattr(builder, '__qualname__', repr(builder))}"


def memory_key(builder, args, kwargs, device: str) -> str:
    """The builder's arguments other than the tuned ones hold the problem: shapes and dtypes."""
    problem = json.dumps({"args": list(args), "kwargs": kwargs}, sort_keys=True, default=str)
    return f"{builder_name(builder)}|{problem}|{device}"


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recall(key: str) -> dict | None:
    """The remembered entry (``config``, ``ms``, ``date`` ...) for ``key``, or None."""
    entry = _load(memory_path()).get(key)
    if not entry:
        return None
    try:
        entry = dict(entry, config=Config(**entry["config"]))
    except (KeyError, TypeError):
        return None  # written by an incompatible version: ignore it
    return entry


def remember(key: str, config: Config, ms: float, **extra) -> None:
    """Store the best config for ``key``. Read-modify-write with an atomic replace: concurrent
    tuners cannot corrupt the file; the last one to finish wins."""
    path = memory_path()
    data = _load(path)
    data[key] = {"config": config.as_kwargs(), "ms": ms,
                 "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), **extra}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache folder must not fail tuning


def forget(key: str | None = None) -> None:
    """Forget one key, or everything when ``key`` is None."""
    path = memory_path()
    if key is None:
        path.unlink(missing_ok=True)
        return
    data = _load(path)
    if data.pop(key, None) is not None:
        path.write_text(json.dumps(data, indent=1, sort_keys=True))
