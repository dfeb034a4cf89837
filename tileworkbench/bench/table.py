"""Markdown tables of a bench record, and the table section of BENCHMARKS.md.

``gemm_table`` is the full table (``table.md``, BENCHMARKS.md); ``summary_table`` is the short
one the suite prints last, since the device tool only returns the tail of the output.
Plain string formatting: no pandas (this runs on the GPU machine).
"""

from __future__ import annotations

import math
from pathlib import Path

MARK_START = "<!-- bench:start -->"
MARK_END = "<!-- bench:end -->"
NO_MEASUREMENT = "No measurement recorded yet."
_SHORT_DTYPE = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def _num(value, fmt: str = "{:.1f}") -> str:
    if value is None or math.isnan(value):
        return "–"
    return fmt.format(value)


def ratio_text(value) -> str:
    """Ours / cuBLAS to three decimals, or four where three would round a ratio under 1 up to
    "1.000": the target is >= 1.0, and 0.9998 must not read as met."""
    if value is None or math.isnan(value):
        return "–"
    text = f"{value:.3f}"
    return f"{value:.4f}" if text == "1.000" and value < 1 else text


def _err(value) -> str:
    return "NaN" if value is not None and math.isnan(value) else _num(value, "{:.1e}")


def _shape(row: dict) -> str:
    return f"{row['M']}x{row['N']}x{row['K']}"


def _check(row: dict) -> str:
    if row.get("error"):
        return "**error**"
    return "ok" if row.get("correct") else "**WRONG**"


def _cublas(row: dict) -> str:
    """The cuBLAS figure the ratio uses; with both paths measured, what each gave when selecting
    (and, for head-to-head rows, which one the ratio was timed against)."""
    paths = [f"{name} {_num(row.get(f'cublas_{name}_tflops'))}" for name in ("torch", "cupy")
             if row.get(f"cublas_{name}_tflops") is not None]
    best = _num(row.get("cublas_tflops"))
    final = row.get("head_to_head")
    if final and len(paths) > 1:
        return f"{best} ({final['library']}; selection: {', '.join(paths)})"
    return f"{best} ({', '.join(paths)})" if len(paths) > 1 else best


def _table(header: list[str], lines: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return out


def best_rows(record: dict) -> list[dict]:
    """Rows of 'ours': the best of our candidate kernels per shape and dtype."""
    return [r for r in record["rows"] if r.get("kernel") == "tileworkbench"]


def spec_rows(record: dict) -> list[dict]:
    return [r for r in record["rows"] if r.get("kernel") != "tileworkbench"]


def machine_line(record: dict) -> str:
    m, s = record["machine"], record.get("settings", {})
    dirty = " (uncommitted changes)" if m.get("dirty") else ""
    line = (f"{m.get('gpu') or 'unknown GPU'}, driver {m.get('driver')}, CUDA {m.get('cuda')}, "
            f"CuPy {m.get('cupy')}, torch {m.get('torch')}; commit `{m.get('commit')}`{dirty}; "
            f"{m.get('date')}; host {m.get('hostname', '?')}.")
    if s and s.get("head_to_head_rounds"):
        line += (f" Rows of ours: our two fastest candidates and cuBLAS timed in turn in "
                 f"{s['head_to_head_rounds']} rounds of {s.get('head_to_head_rep')} runs, after a selection "
                 f"of {s.get('rep')} runs each; spec kernels: {s.get('rep')} runs alone; medians; L2 flushed "
                 f"before each run{' (quick mode)' if s.get('quick') else ''}.")
    elif s:
        line += (f" Median of {s.get('rep')} timed runs after {s.get('warmup')} warm-ups, L2 flushed before "
                 f"each{' (quick mode)' if s.get('quick') else ''}.")
    if not record.get("complete", True):
        line += f" **Partial run**: {len(record['rows'])} rows written before it stopped."
    return line


def compile_lines(record: dict) -> list[str]:
    c = record.get("compile")
    if not c:
        return []
    if c.get("error"):
        return [f"Compile time: not measured ({c['error']})."]
    cold, disk, mem = c.get("cold", {}), c.get("disk_hit", {}), c.get("memory_hit", {})
    if "nvrtc_s" in cold:  # records since tileworkbench compiles the cubin itself
        return _compile_lines_cubin(c, cold, disk, mem)
    where = "" if c.get("device_loaded", True) else " (no GPU: lowering only, no NVRTC or module load)"
    return [f"Compile time of `{c.get('kernel')}`, seconds{where}:", ""] + _table(
        ["case", "seconds", "parts"],
        [["cold: empty tileworkbench + CuPy caches", _num(cold.get("total_s"), "{:.3f}"),
          (f"parse {_num(cold.get('parse_s'), '{:.3f}')}, lowering {_num(cold.get('lower_s'), '{:.3f}')}, "
           f"NVRTC + module load {_num(cold.get('load_s'), '{:.3f}')}")],
         ["disk-cache hit, new process", _num(disk.get("total_s"), "{:.3f}"),
          f"module load from CuPy's cache {_num(disk.get('load_s'), '{:.3f}')}"],
         ["in-process hit", _num(mem.get("total_s"), "{:.6f}"), f"parse {_num(mem.get('parse_s'), '{:.6f}')}"]]) + (
        [""] + [f"Problem: {p}" for p in c["problems"]] if c.get("problems") else [])


def _compile_lines_cubin(c: dict, cold: dict, disk: dict, mem: dict) -> list[str]:
    where = "" if c.get("device_loaded", True) else " (no GPU: NVRTC but no module load)"
    f3 = "{:.3f}"
    runs = c.get("runs_s") or {}
    spread = ""
    if len(runs.get("cold") or []) > 1:
        cold_runs, disk_runs = runs["cold"], runs.get("disk_hit") or []
        spread = (f" (the run with the median cold time of {len(cold_runs)}; cold {min(cold_runs):.3f}–"
                  f"{max(cold_runs):.3f} s, disk hit {min(disk_runs):.3f}–{max(disk_runs):.3f} s over all)")
    lines = [f"Compile time of `{c.get('kernel')}`, seconds{where}{spread}:", ""] + _table(
        ["case", "seconds", "parts"],
        [["cold: empty tileworkbench cache", _num(cold.get("total_s"), f3),
          (f"parse {_num(cold.get('parse_s'), f3)}, lowering {_num(cold.get('lower_s'), f3)}, "
           f"NVRTC {_num(cold.get('nvrtc_s'), f3)} (overlapping the analyses; "
           f"{_num(cold.get('nvrtc_wait_s'), f3)} waited for), module load {_num(cold.get('load_s'), f3)} "
           f"(cuModuleLoadData {_num(cold.get('module_load_s'), f3)})")],
         ["disk-cache hit (cubin from the cache), new process", _num(disk.get("total_s"), f3),
          f"module load {_num(disk.get('load_s'), f3)} (cuModuleLoadData {_num(disk.get('module_load_s'), f3)})"],
         ["in-process hit", _num(mem.get("total_s"), "{:.6f}"), f"parse {_num(mem.get('parse_s'), '{:.6f}')}"]])
    lines += ["", (f"Not in these times: CuPy import + CUDA context creation before the timer, "
                   f"{_num(cold.get('context_init_s'), f3)} s in the cold process and "
                   f"{_num(disk.get('context_init_s'), f3)} s in the disk-hit one (of which the import "
                   f"{_num(cold.get('cupy_import_s'), f3)} and {_num(disk.get('cupy_import_s'), f3)}).")]
    return lines + ([""] + [f"Problem: {p}" for p in c["problems"]] if c.get("problems") else [])


def gemm_table(record: dict) -> str:
    """The full markdown table of a GEMM record."""
    out = [machine_line(record), ""]
    rows = best_rows(record)
    if rows:
        out += _table(["M x N x K", "dtype", "ours TFLOP/s", "cuBLAS TFLOP/s", "ours / cuBLAS", "rel. error",
                       "check", "our best config"],
                      [[_shape(r), _SHORT_DTYPE.get(r["dtype"], r["dtype"]), _num(r["tflops"]), _cublas(r),
                        ratio_text(r["ratio"]), _err(r["rel_err"]), _check(r), r.get("config") or "–"]
                       for r in rows])
    spec = spec_rows(record)
    if spec:
        out += ["", ("The spec's TMA kernels, bodies unchanged (128x128x32 tiles, 128 threads, warp "
                     "specialisation off):"), ""]
        out += _table(["kernel", "M x N x K", "dtype", "TFLOP/s", "cuBLAS TFLOP/s", "ratio", "rel. error", "check"],
                      [[r["kernel"], _shape(r), _SHORT_DTYPE.get(r["dtype"], r["dtype"]), _num(r["tflops"]),
                        _num(r["cublas_tflops"]), ratio_text(r["ratio"]), _err(r["rel_err"]), _check(r)]
                       for r in spec])
    comp = compile_lines(record)
    if comp:
        out += [""] + comp
    return "\n".join(out) + "\n"


def summary_table(record: dict) -> str:
    """A short table for the end of stdout: one line per row, then the compile times."""
    lines = [[r["kernel"] if r["kernel"] != "tileworkbench" else "ours", _shape(r),
              _SHORT_DTYPE.get(r["dtype"], r["dtype"]), _num(r["tflops"]), _num(r["cublas_tflops"]),
              ratio_text(r["ratio"]), _check(r)] for r in record["rows"]]
    out = _table(["kernel", "MxNxK", "dtype", "TFLOP/s", "cuBLAS", "ratio", "check"], lines) + [""]
    c = record.get("compile") or {}
    if c and not c.get("error"):
        out.append(f"compile: cold {_num(c['cold'].get('total_s'), '{:.2f}')} s, disk hit "
                   f"{_num(c['disk_hit'].get('total_s'), '{:.2f}')} s, in-process "
                   f"{_num(c['memory_hit'].get('total_s'), '{:.1e}')} s")
    bad = sum(1 for r in record["rows"] if not r.get("correct"))
    out.append(f"{len(record['rows'])} rows, {bad} failed the correctness check")
    return "\n".join(out) + "\n"


def markdown_section(record: dict | None, source: str | None = None) -> str:
    """What goes between the markers in BENCHMARKS.md."""
    if record is None:
        return NO_MEASUREMENT + "\n"
    head = f"From `{source}`. " if source else ""
    return head + gemm_table(record)


def replace_section(text: str, section: str) -> str:
    start, end = text.find(MARK_START), text.find(MARK_END)
    if start < 0 or end < 0 or end < start:
        raise ValueError(f"markers {MARK_START} ... {MARK_END} not found (in that order)")
    return text[:start + len(MARK_START)] + "\n" + section.rstrip("\n") + "\n" + text[end:]


def update_markdown(md_path, record: dict | None, source: str | None = None) -> bool:
    """Rewrite the table section of ``md_path`` from ``record``; True when the file changed."""
    md_path = Path(md_path)
    text = md_path.read_text()
    new = replace_section(text, markdown_section(record, source))
    if new != text:
        md_path.write_text(new)
    return new != text
