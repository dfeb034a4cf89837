"""Bench records as pandas DataFrames, for notebooks and plots (not for the GPU run itself).

``load_records(path_or_dir)``: one row per measured row of every record found, with the
machine's fields as columns. pandas is imported only when called.
"""

from __future__ import annotations

from pathlib import Path

from .schema import latest_record, read_record, record_paths
from ..errors import lab_dependency

_NESTED = ("cublas", "candidates")  # per-row detail; ``candidates=True`` unfolds the second


def _flat_rows(record: dict, source: str, candidates: bool) -> list[dict]:
    machine = {k: v for k, v in record["machine"].items()}
    out = []
    for row in record["rows"]:
        base = {k: v for k, v in row.items() if k not in _NESTED}
        sized = all(isinstance(row.get(k), (int, float)) for k in "MNK")  # (a suite's rows without M, N, K: None)
        base.update(shape=f"{row['M']}x{row['N']}x{row['K']}" if sized else None,
                    flops=2.0 * row["M"] * row["N"] * row["K"] if sized else None,
                    n_candidates=len(row.get("candidates") or []))
        base.update({k: v for k, v in machine.items() if k not in base})
        base.update(record=source, complete=record.get("complete", True))
        if not candidates:
            out.append(base)
            continue
        for cand in row.get("candidates") or []:
            out.append({**base, **{f"candidate_{k}": v for k, v in cand.items()}})
    return out


def load_records(path_or_dir, candidates: bool = False):
    """A DataFrame of one record file, or of every bench record in a folder.

    With ``candidates=True`` there is one row per candidate kernel tried (columns
    ``candidate_name``, ``candidate_ms``, ``candidate_tflops``, ``candidate_rel_err`` ...)."""
    pd = lab_dependency("pandas", "benchmark records as a DataFrame")

    path = Path(path_or_dir)
    paths = record_paths(path) if path.is_dir() else [path]
    rows = []
    for p in paths:
        rows += _flat_rows(read_record(p), p.name, candidates)
    return pd.DataFrame(rows)


__all__ = ["latest_record", "load_records"]
