"""Bench records (``mime.BENCH_MIME``): build, check, write, read, find.

The document is the one docs/trace-schema.md describes under 'Benchmark record': ``schema``,
``version``, ``machine`` and ``rows``. Suites add fields a reader may ignore: per row the
chosen ``config``, the ``candidates`` tried and the cuBLAS paths; at the top ``settings``,
``compile`` (compile-time measurements) and ``complete`` (false while a run is still writing).
Readers refuse a schema or version they do not know. No pandas here.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

SCHEMA = "tileworkbench.bench"
VERSION = 1
ROW_KEYS = ("suite", "kernel", "dtype", "M", "N", "K", "ms", "tflops", "cublas_tflops", "ratio", "correct", "rel_err")
MACHINE_KEYS = ("gpu", "driver", "cuda", "cupy", "torch", "commit", "date")


def make_record(machine: dict, rows: list, *, suite: str = "gemm", settings: dict | None = None,
                compile_times: dict | None = None, complete: bool = True) -> dict:
    return {"schema": SCHEMA, "version": VERSION, "suite": suite, "complete": complete,
            "machine": dict(machine), "settings": dict(settings or {}), "rows": list(rows),
            "compile": compile_times}


def validate(record: dict, source: str = "record") -> dict:
    """Return ``record`` if it is a bench record we can read; raise ValueError saying what is wrong."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"{source} is not a tileworkbench bench record (schema {record.get('schema')!r})"
                         if isinstance(record, dict) else f"{source} is not a JSON object")
    if record.get("version") != VERSION:
        raise ValueError(f"{source} has bench schema version {record.get('version')!r}; "
                         f"this tileworkbench reads version {VERSION} only")
    missing = [k for k in MACHINE_KEYS if k not in record.get("machine", {})]
    if missing:
        raise ValueError(f"{source}: machine lacks {', '.join(missing)}")
    for i, row in enumerate(record.get("rows", [])):
        missing = [k for k in ROW_KEYS if k not in row]
        if missing:
            raise ValueError(f"{source}: row {i} lacks {', '.join(missing)}")
    return record


def _slug(text: str | None) -> str:
    return re.sub(r"[^a-z0-9]+", "-", (text or "unknown").lower()).strip("-") or "unknown"


def record_filename(record: dict) -> str:
    """``<suite>-<date>-<gpu>-<commit>.json``, e.g. ``gemm-20261130-230000-nvidia-h200-abc1234.json``."""
    machine = record["machine"]
    date = re.sub(r"[^0-9T]", "", machine.get("date") or "").replace("T", "-") or "undated"
    return f"{record.get('suite', 'bench')}-{date}-{_slug(machine.get('gpu'))}-{_slug(machine.get('commit'))}.json"


def write_record(record: dict, directory, name: str | None = None) -> Path:
    """Write atomically (a reader never sees half a file, also while a run rewrites it per row)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or record_filename(record))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(record, f, indent=1, allow_nan=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


def read_record(path) -> dict:
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    return validate(record, str(path))


def record_paths(directory) -> list[Path]:
    """Every readable bench record in ``directory`` (other JSON files are passed over)."""
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            read_record(path)
        except (OSError, ValueError):
            continue
        out.append(path)
    return out


def latest_record(directory) -> Path:
    """The newest record in ``directory`` by its ``machine.date`` (then file name), not by file
    time: copying records around must not change which one is newest."""
    paths = record_paths(directory)
    if not paths:
        raise FileNotFoundError(f"no tileworkbench bench record in {directory}")
    return max(paths, key=lambda p: (read_record(p)["machine"].get("date") or "", p.name))
