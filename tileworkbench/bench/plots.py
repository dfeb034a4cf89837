"""``plot_tflops(df)``: TFLOP/s against problem size, ours vs cuBLAS, one panel per dtype.

Takes the DataFrame of ``records.load_records``; matplotlib is imported only when called, and
through ``matplotlib.figure.Figure`` (no pyplot), so no GUI backend is needed.
"""

from __future__ import annotations

import math

from .table import ratio_text
from ..errors import lab_dependency


def _newest(df):
    """One measurement per (kernel, shape, dtype): the newest record's, when several are loaded."""
    return df.sort_values("date").drop_duplicates(["kernel", "M", "N", "K", "dtype"], keep="last")


def plot_tflops(df, kernel: str = "tileworkbench"):
    """A Figure: per dtype, TFLOP/s of ``kernel`` rows (default: ours, best of candidates) and of
    cuBLAS, problems ordered by FLOPs, each of ours annotated with its ratio to cuBLAS."""
    Figure = lab_dependency("matplotlib.figure", "the benchmark plot").Figure

    rows = _newest(df[df["kernel"] == kernel])
    if rows.empty:
        raise ValueError(f"no rows of kernel {kernel!r} to plot")
    dtypes = sorted(rows["dtype"].unique())
    fig = Figure(figsize=(6.5 * len(dtypes), 4.2), layout="constrained")
    axes = fig.subplots(1, len(dtypes), squeeze=False)[0]
    for ax, dtype in zip(axes, dtypes):
        part = rows[rows["dtype"] == dtype].assign(_f=lambda d: 2.0 * d["M"] * d["N"] * d["K"]).sort_values("_f")
        x = range(len(part))
        ours = part["tflops"].astype(float)
        ax.plot(x, part["cublas_tflops"].astype(float), "s--", color="0.45", label="cuBLAS (best of torch, CuPy)")
        ax.plot(x, ours, "o-", color="C0", label="tileworkbench" if kernel == "tileworkbench" else kernel)
        for i, (t, ratio, ok) in enumerate(zip(ours, part["ratio"], part["correct"])):
            if not math.isnan(t) and ratio is not None and not math.isnan(ratio):
                ax.annotate(f"{ratio_text(ratio)}x" + ("" if ok else " WRONG"), (i, t), textcoords="offset points",
                            xytext=(0, 7), ha="center", fontsize=8, color="C0" if ok else "C3")
        ax.set_xticks(list(x), [f"{m}x{n}x{k}" for m, n, k in zip(part["M"], part["N"], part["K"])],
                      rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("TFLOP/s")
        # headroom above the highest point so its ratio label stays inside the axes
        top = max(float(v) for v in list(ours) + list(part["cublas_tflops"].astype(float)) if not math.isnan(v))
        ax.set_ylim(bottom=0, top=top * 1.12)
        ax.set_title(f"GEMM {dtype} (M x N x K)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    gpu = rows["gpu"].iloc[0] if "gpu" in rows else None
    if gpu:
        fig.suptitle(f"{gpu}, commit {rows['commit'].iloc[-1]}", fontsize=10)
    return fig


ATTENTION_SERIES = (("tileworkbench", "tileworkbench", "C0"), ("sdpa_cudnn", "torch SDPA (cuDNN)", "0.45"),
                    ("sdpa_flash", "torch SDPA (flash)", "0.7"), ("tilelang", "TileLang 0.1.15", "C1"))


def plot_attention(record: dict):
    """A Figure from an attention-suite record (``bench.attention``): TFLOP/s per forward row for
    ours, torch SDPA's cuDNN and flash backends and TileLang (the faster of its configurations),
    each of ours annotated with its ratio to the best SDPA backend; a failed check shows as WRONG."""
    Figure = lab_dependency("matplotlib.figure", "the attention plot").Figure

    rows = [r for r in record["rows"] if r["shape"]["seq_q"] == r["shape"]["seq_kv"]]
    if not rows:
        raise ValueError("the record has no forward rows to plot")
    fig = Figure(figsize=(max(7.0, 0.75 * len(rows)), 4.4), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(ATTENTION_SERIES)
    highest = 0.0
    for n, (key, label, color) in enumerate(ATTENTION_SERIES):
        values = []
        for r in rows:
            entry = r["impls"].get(r.get("tilelang_best", key) if key == "tilelang" else key, {})
            values.append(entry.get("tflops", math.nan) if entry.get("correct") else math.nan)
        xs = [i + (n - (len(ATTENTION_SERIES) - 1) / 2) * width for i in range(len(rows))]
        ax.bar(xs, values, width, label=label, color=color)
        highest = max([highest] + [v for v in values if not math.isnan(v)])
        if key == "tileworkbench":
            for x, v, r in zip(xs, values, rows):
                text = "WRONG" if math.isnan(v) else (f"{r['vs_sdpa']:.2f}x" if "vs_sdpa" in r else "")
                ax.annotate(text, (x, 0 if math.isnan(v) else v), textcoords="offset points", xytext=(0, 3),
                            ha="center", fontsize=7, color="C0" if text != "WRONG" else "C3", rotation=90)
    ax.set_xticks(range(len(rows)), [r["row"] for r in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (causal: the causal FLOPs)")
    ax.set_title("FlashAttention forward, fp16 (labels: ours / best SDPA backend)")
    ax.grid(alpha=0.3, axis="y")
    ax.set_ylim(0, highest * 1.25)  # room for the ratio labels and the legend above the bars
    ax.legend(fontsize=8, loc="upper center", ncol=len(ATTENTION_SERIES))
    machine = record.get("machine", {})
    if machine.get("gpu"):
        fig.suptitle(f"{machine['gpu']}, commit {machine.get('commit')}", fontsize=10)
    return fig
