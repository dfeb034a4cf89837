"""The attention suite: FlashAttention forward and decoding, ours against torch's
``scaled_dot_product_attention`` backends and TileLang 0.1.15, all in one process.

    python -m tileworkbench.bench attention [--rows 8192x128,decode] [--quick] [--out DIR] [--ours-only]
                                            [--ray [ADDRESS]]

Rows (batch x heads x seq x dim, fp16; each forward shape causal and not): 1x16x4096x128,
1x16x8192x128, 1x16x16384x128, 1x16x8192x64, 4x32x8192x128; grouped-query attention 1x32x8192x128
with 8 K/V heads; decoding: batch 64, one query, 8192 keys, 32 heads, dim 128.

Per row: inputs from ``torch.randn`` (seeded); every implementation computed once and checked
against a float32 reference (heads in chunks, TF32 off) with the examples' tolerance (1e-2
absolute and relative); then all of them timed in alternating rounds with ``profiler.do_bench``
(CUDA events after a spin kernel, L2 flushed before every call, medians). Columns: ours
(``examples/attention.py``, at our configuration for the head dimension); each SDPA backend that runs (flash, cuDNN, memory-efficient; the fastest
correct one is the baseline); TileLang 0.1.15 on the same program as TileLang spells it
(``examples/tilelang_programs``, which lowers to the same CUDA under our compiler: its own example kernel,
at its tuned 128 x 128, 2-stage, 256-thread config, and at ours where that differs: the faster
counts) when TileLang is importable. Forward rows report TFLOP/s (4 b h s^2 d, half of it when causal);
the decode row GB/s of K and V read, against the device-to-device copy bandwidth measured in the
same run. Cold compile times (our disk cache off) are in the record, and for each implementation
the SM clock and power ``nvidia-smi`` sampled while it was timed (``gpu_clock``).

Writes ``<out>/attention-<date>-<gpu>-<commit>.json`` (rewritten after every row; schema below)
and prints a table with the issue's goals checked. With ``--ray`` the rows run on a Ray cluster
(``attention_ray``: our kernels compiled on CPU workers, each row on a GPU worker).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .gpu_clock import ClockSampler

SCHEMA = "tileworkbench.attention-bench"
VERSION = 1
ROUNDS = 3
TOLERANCE = 1e-2  # rtol and atol: TileLang's attention examples' own
SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
REFERENCE_CHUNK_BYTES = 2**31  # float32 scores held at once by the reference
COPY_BYTES = 2**31  # the device-to-device copy that measures the bandwidth the decode row is judged by

# The goals (H200): forward head dim 128, seq >= 8k, non-causal: >= 600 TFLOP/s and >= 1.0x the
# best SDPA backend; causal >= 0.9x its non-causal rate; head dim 64 >= 450; >= 1.15x TileLang on
# every forward row; decode >= 80% of the copy bandwidth.
GOALS = {"tflops_d128": 600.0, "vs_sdpa": 1.0, "causal_vs_full": 0.9, "tflops_d64": 450.0, "vs_tilelang": 1.15,
         "decode_bandwidth": 0.8}


@dataclass(frozen=True)
class Row:
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    dim: int
    causal: bool = False

    @property
    def decode(self) -> bool:
        return self.seq_q < self.seq_kv

    @property
    def groups(self) -> int:
        return self.heads // self.kv_heads

    @property
    def name(self) -> str:
        if self.decode:
            return f"decode {self.batch}x{self.heads}x{self.seq_q}x{self.seq_kv}x{self.dim}"
        gqa = f" gqa{self.kv_heads}" if self.groups > 1 else ""
        return f"{self.batch}x{self.heads}x{self.seq_q}x{self.dim}{gqa}{' causal' if self.causal else ''}"

    @property
    def flops(self) -> float:
        """4 b h s_q s_kv d (two GEMMs), half of it when causal: the FLOPs a causal kernel must do."""
        full = 4.0 * self.batch * self.heads * self.seq_q * self.seq_kv * self.dim
        return full / 2 if self.causal else full

    @property
    def kv_bytes(self) -> int:
        return 2 * self.batch * self.kv_heads * self.seq_kv * self.dim * 2  # K and V, fp16


FORWARD_SHAPES = ((1, 16, 4096, 128), (1, 16, 8192, 128), (1, 16, 16384, 128), (1, 16, 8192, 64), (4, 32, 8192, 128))
ROWS = ([Row(b, h, h, s, s, d, causal) for (b, h, s, d) in FORWARD_SHAPES for causal in (False, True)]
        + [Row(1, 32, 8, 8192, 8192, 128, causal) for causal in (False, True)]
        + [Row(64, 32, 32, 1, 8192, 128)])
QUICK_ROWS = [Row(1, 16, 16, 4096, 4096, 128, False), Row(1, 16, 16, 4096, 4096, 128, True),
              Row(8, 32, 32, 1, 8192, 128)]


def select_rows(text: str | None, quick: bool = False) -> list[Row]:
    """The rows whose names contain any of the comma-separated words (all rows without any)."""
    rows = QUICK_ROWS if quick else ROWS
    if not text:
        return list(rows)
    words = [w.strip() for w in text.split(",") if w.strip()]
    chosen = [r for r in rows if any(w in r.name for w in words)]
    if not chosen:
        raise ValueError(f"no row matches {text!r}; the rows are: {', '.join(r.name for r in rows)}")
    return chosen


# ---- implementations ---------------------------------------------------------------------------

def compile_mha(batch, heads, seq_len, dim, is_causal, groups=1, pass_configs=None, load_device=None, **config):
    """Our forward kernel (``kernel(q, k, v) -> o``) from ``examples.attention.mha_fwd``, at our
    configuration for the head dimension unless ``config`` says otherwise, in fast math as the
    program's TileLang spelling asks (``pass_configs`` added to that). ``load_device=False``:
    compiled (cubin included) but not loaded, as on a CPU worker (``attention_ray``)."""
    from ..examples.attention import PASS_CONFIGS, best_config, mha_fwd
    from ..jit.kernel import compile as compile_kernel

    func = mha_fwd(batch, heads, seq_len, dim, is_causal, groups=groups, **{**best_config(dim, is_causal), **config})
    return compile_kernel(func, out_idx=[3], pass_configs={**PASS_CONFIGS, **(pass_configs or {})},
                          load_device=load_device)


def compile_decode(batch, heads, seqlen_q, seqlen_kv, dim, num_split=1, load_device=None, **config):
    """Our decoding kernels (``kernel(q, k, v) -> o``: the split pass, then the combine)."""
    from ..examples.attention import DECODE_CONFIG, PASS_CONFIGS, flash_decode
    from ..jit.kernel import compile as compile_kernel

    func = flash_decode(batch, heads, seqlen_q, seqlen_kv, dim, num_split=num_split, **{**DECODE_CONFIG, **config})
    return compile_kernel(func, out_idx=[3], pass_configs=PASS_CONFIGS, load_device=load_device)


def ours(row: Row, load_device=None):
    if row.decode:
        return compile_decode(row.batch, row.heads, row.seq_q, row.seq_kv, row.dim, load_device=load_device)
    return compile_mha(row.batch, row.heads, row.seq_q, row.dim, row.causal, groups=row.groups,
                       load_device=load_device)


def tilelang_configs(row: Row) -> dict:
    """TileLang's configurations for a row: its own tuned one ("tilelang"), and ours where that
    differs ("tilelang_alt"); the faster correct one is TileLang's result."""
    from ..examples.attention import DECODE_CONFIG, DEFAULT_CONFIG, best_config

    if row.decode:
        return {"tilelang": DECODE_CONFIG}
    ours = best_config(row.dim, row.causal)
    return {"tilelang": DEFAULT_CONFIG, **({"tilelang_alt": ours} if ours != DEFAULT_CONFIG else {})}


def tilelang_kernel(row: Row, programs: dict, config: dict):
    """TileLang's kernel from the same program files."""
    if row.decode:
        return programs["flash_decoding"].flash_decoding(row.batch, row.heads, row.seq_q, row.seq_kv, row.dim,
                                                         num_split=1, **config)
    return programs["attention"].flash_attention(row.batch, row.heads, row.seq_q, row.dim, row.causal,
                                                 groups=row.groups, **config)


def sdpa_call(torch, backend_name: str, q, k, v, row: Row):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)
    extra = {"enable_gqa": True} if row.groups > 1 else {}

    def call():
        with sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=row.causal, **extra)

    return call


def reference(torch, q, k, v, causal: bool):
    """softmax(Q K^T / sqrt(d)) V in float32 (TF32 off), a few heads at a time."""
    b, h, sq, d = q.shape
    groups = h // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    per_head = sq * k.shape[2] * 4
    step = max(1, REFERENCE_CHUNK_BYTES // per_head)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for bi in range(b):
            for h0 in range(0, h, step):
                hs = slice(h0, min(h, h0 + step))
                kv = torch.arange(hs.start, hs.stop, device=q.device) // groups
                qf, kf, vf = q[bi, hs].float(), k[bi, kv].float(), v[bi, kv].float()
                scores = (qf @ kf.transpose(-1, -2)) / d**0.5
                if causal:
                    keep = torch.ones(sq, k.shape[2], dtype=torch.bool, device=q.device).tril(k.shape[2] - sq)
                    scores.masked_fill_(~keep, float("-inf"))
                out[bi, hs] = scores.softmax(dim=-1) @ vf
                del scores
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return out


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return text[:300]


def check(torch, result, want) -> dict:
    got = result.float()
    err = (got - want).abs().max().item()
    try:
        torch.testing.assert_close(got, want, rtol=TOLERANCE, atol=TOLERANCE)
    except AssertionError as exc:
        return {"correct": False, "max_abs_err": err, "error": str(exc).splitlines()[0]}
    return {"correct": True, "max_abs_err": err}


# ---- one row -----------------------------------------------------------------------------------

def run_row(row: Row, torch, do_bench, programs: dict | None, seed: int, make_ours=None, clocks=None) -> dict:
    """One row on this machine's GPU. ``make_ours()``: our kernel from elsewhere (``attention_ray``
    loads it from the record a CPU worker compiled) instead of ``ours(row)`` compiled here.
    ``clocks`` (a ``gpu_clock.ClockSampler``): each implementation's entry gets ``gpu_clock``, the
    SM clock and power sampled while it was timed."""
    out = {"row": row.name, "shape": asdict(row), "flops": row.flops, "kv_bytes": row.kv_bytes, "impls": {}}
    impls = out["impls"]
    calls = {}
    torch.manual_seed(seed)
    q = torch.randn(row.batch, row.heads, row.seq_q, row.dim, device="cuda", dtype=torch.float16)
    k = torch.randn(row.batch, row.kv_heads, row.seq_kv, row.dim, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    want = reference(torch, q, k, v, row.causal)

    compilers = [("tileworkbench", make_ours or (lambda: ours(row)))]
    if programs is not None:
        compilers += [(label, lambda config=config: tilelang_kernel(row, programs, config))
                      for label, config in tilelang_configs(row).items()]
    for label, make in compilers:
        try:
            start = time.perf_counter()
            kernel = make()
            impls[label] = {"compile_s": time.perf_counter() - start}
            calls[label] = lambda kernel=kernel: kernel(q, k, v)
        except Exception as exc:  # the other compiler's failure is a result, not a crash
            impls[label] = {"error": _short(exc)}
    for name in SDPA_BACKENDS:
        calls[f"sdpa_{name.lower().replace('_attention', '')}"] = sdpa_call(torch, name, q, k, v, row)
    for label, call in list(calls.items()):
        entry = impls.setdefault(label, {})
        try:
            result = call()
            torch.cuda.synchronize()
            entry.update(check(torch, result, want))
            del result
        except Exception as exc:  # a backend that does not run this shape says why
            entry["error"] = _short(exc)
            del calls[label]
    del want
    times = {label: [] for label in calls}
    windows = {label: [] for label in calls}
    for _ in range(ROUNDS):  # alternating, so the clock and the neighbours affect all alike
        for label, call in calls.items():
            start = time.perf_counter()
            times[label].append(do_bench(call, warmup=25, rep=100, return_mode="median"))
            windows[label].append((start, time.perf_counter()))
    for label, samples in times.items():
        ms = statistics.median(samples)
        impls[label].update(ms=ms, rounds_ms=samples, tflops=row.flops / ms / 1e9, gbps=row.kv_bytes / ms / 1e6)
        if clocks is not None:
            impls[label]["gpu_clock"] = clocks.windows(windows[label])
    summarise(out)
    return out


def summarise(out: dict) -> None:
    """The row's baseline (fastest correct SDPA backend) and ours against it and TileLang."""
    impls = out["impls"]
    timed = {k: v for k, v in impls.items() if v.get("correct") and "ms" in v}
    sdpa = {k: v for k, v in timed.items() if k.startswith("sdpa_")}
    if sdpa:
        best = min(sdpa, key=lambda k: sdpa[k]["ms"])
        out["sdpa_best"] = best
    mine = timed.get("tileworkbench")
    if mine and sdpa:
        out["vs_sdpa"] = sdpa[out["sdpa_best"]]["ms"] / mine["ms"]
    theirs = {k: v for k, v in timed.items() if k.startswith("tilelang")}
    if theirs:
        out["tilelang_best"] = min(theirs, key=lambda k: theirs[k]["ms"])
        if mine:
            out["vs_tilelang"] = theirs[out["tilelang_best"]]["ms"] / mine["ms"]


def copy_bandwidth(torch, do_bench) -> float:
    """GB/s of a device-to-device copy (bytes read plus bytes written over the time)."""
    src = torch.randn(COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * COPY_BYTES / ms / 1e6


# ---- goals and the table -----------------------------------------------------------------------

def goal_checks(rows: list[dict], copy_gbps: float | None) -> list[str]:
    """One line per goal the rows speak to: met or missed, with the numbers."""
    lines = []
    by_name = {r["row"]: r for r in rows}

    def tflops(r):
        return r["impls"].get("tileworkbench", {}).get("tflops") if r["impls"].get("tileworkbench", {}).get(
            "correct") else None

    for r in rows:
        shape, t = r["shape"], tflops(r)
        if t is None:
            lines.append(f"{r['row']}: ours did not run correctly")
            continue
        if shape["seq_q"] < shape["seq_kv"]:
            if copy_gbps:
                frac = r["impls"]["tileworkbench"]["gbps"] / copy_gbps
                lines.append(f"{r['row']}: {frac:.0%} of the copy bandwidth (goal >= "
                             f"{GOALS['decode_bandwidth']:.0%}): {'met' if frac >= GOALS['decode_bandwidth'] else 'MISSED'}")
            continue
        if shape["dim"] == 128 and shape["seq_q"] >= 8192 and not shape["causal"] and shape["kv_heads"] == shape["heads"]:
            lines.append(f"{r['row']}: {t:.0f} TFLOP/s (goal >= {GOALS['tflops_d128']:.0f}): "
                         f"{'met' if t >= GOALS['tflops_d128'] else 'MISSED'}")
            if "vs_sdpa" in r:
                lines.append(f"{r['row']}: {r['vs_sdpa']:.3f}x the best SDPA ({r['sdpa_best']}; goal >= 1.0): "
                             f"{'met' if r['vs_sdpa'] >= GOALS['vs_sdpa'] else 'MISSED'}")
        if shape["dim"] == 64 and not shape["causal"]:
            lines.append(f"{r['row']}: {t:.0f} TFLOP/s (goal >= {GOALS['tflops_d64']:.0f}): "
                         f"{'met' if t >= GOALS['tflops_d64'] else 'MISSED'}")
        if shape["causal"]:
            full = by_name.get(r["row"].replace(" causal", ""))
            if full and tflops(full):
                ratio = t / tflops(full)
                lines.append(f"{r['row']}: {ratio:.3f}x its non-causal rate (goal >= {GOALS['causal_vs_full']}): "
                             f"{'met' if ratio >= GOALS['causal_vs_full'] else 'MISSED'}")
        if "vs_tilelang" in r:
            lines.append(f"{r['row']}: {r['vs_tilelang']:.3f}x TileLang (goal >= {GOALS['vs_tilelang']}): "
                         f"{'met' if r['vs_tilelang'] >= GOALS['vs_tilelang'] else 'MISSED'}")
    return lines


def _rate(entry: dict | None, decode: bool) -> str:
    if not entry or "ms" not in entry:
        return (entry or {}).get("error", "-")[:28] or "-"
    mark = "" if entry.get("correct") else " WRONG"
    return (f"{entry['gbps']:.0f} GB/s" if decode else f"{entry['tflops']:.0f}") + mark


def table(record: dict) -> str:
    lines = ["| row | ours | flash | cuDNN | mem-efficient | TileLang 0.1.15 | ours / best SDPA | ours / TileLang "
             "| cold compile ours / TileLang s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in record["rows"]:
        decode = r["shape"]["seq_q"] < r["shape"]["seq_kv"]
        im = r["impls"]
        cells = [_rate(im.get(k), decode) for k in ("tileworkbench", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient",
                                                    r.get("tilelang_best", "tilelang"))]
        vs_sdpa = f"{r['vs_sdpa']:.3f}x" if "vs_sdpa" in r else "-"
        vs_tl = f"{r['vs_tilelang']:.3f}x" if "vs_tilelang" in r else "-"
        compile_s = " / ".join(f"{im[k]['compile_s']:.2f}" if "compile_s" in im.get(k, {}) else "-"
                               for k in ("tileworkbench", "tilelang"))
        lines.append(f"| {r['row']} | {' | '.join(cells)} | {vs_sdpa} | {vs_tl} | {compile_s} |")
    unit = "Forward rows in TFLOP/s (4 b h s^2 d, halved when causal); decode in GB/s of K and V read."
    if record.get("copy_gbps"):
        unit += f" Device-to-device copy in the same run: {record['copy_gbps']:.0f} GB/s."
    return "\n".join(lines) + "\n\n" + unit


# ---- the run -----------------------------------------------------------------------------------

def load_tilelang_programs() -> dict | None:
    """The attention and flash-decoding program files as TileLang compiles them, or None."""
    from .tilelang_programs import load_program

    try:
        import tilelang  # noqa: F401
    except Exception as exc:
        print(f"TileLang is not importable here ({type(exc).__name__}: {exc}); no TileLang column", file=sys.stderr)
        return None
    workdir = Path(tempfile.mkdtemp(prefix="tw-attention-"))
    return {family: load_program(family, "tilelang", workdir) for family in ("attention", "flash_decoding")}


def new_record(machine: dict, tilelang_version: str | None, seed: int) -> dict:
    """The record before its rows (``rows`` filled in as they finish, ``complete`` set by ``finish``)."""
    return {"schema": SCHEMA, "version": VERSION, "suite": "attention", "complete": False,
            "machine": machine, "tilelang": tilelang_version, "torch_sdpa_backends": list(SDPA_BACKENDS),
            "settings": {"rounds": ROUNDS, "warmup_ms": 25, "rep_ms": 100, "tolerance": TOLERANCE, "seed": seed,
                         "goals": GOALS}, "rows": []}


def progress_line(i: int, n: int, result: dict, seconds: float) -> str:
    line = f"[{i}/{n}] " + table({"rows": [result]}).splitlines()[2] + f" ({seconds:.0f} s)"
    clocks = [f"{label} {c['sm_mhz']:.0f} MHz {c['power_w']:.0f} W" for label, entry in result["impls"].items()
              if (c := entry.get("gpu_clock")) and c.get("power_w") is not None]
    return line + (f"\n    sampled while timed: {'; '.join(clocks)}" if clocks else "")


def finish(record: dict, out: Path, name: str) -> int:
    """Goals checked, the record written complete, the table and goals printed; the exit status."""
    from . import schema

    record["goals"] = goal_checks(record["rows"], record.get("copy_gbps"))
    record["complete"] = True
    path = schema.write_record(record, out, name)
    print(table(record))
    print("\n".join(["", "Goals:"] + [f"- {line}" for line in record["goals"]]))
    print(f"wrote {path}", file=sys.stderr)
    return 0 if all(r["impls"].get("tileworkbench", {}).get("correct") for r in record["rows"]) else 1


def run(rows: list[Row], out: Path, ours_only: bool = False, seed: int = 0) -> int:
    import torch

    from ..profiler import do_bench
    from . import schema
    from .machine import machine_info

    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # cold compiles: no disk hit
    programs = None if ours_only else load_tilelang_programs()
    tilelang_version = None
    if programs is not None:
        import tilelang

        tilelang_version = getattr(tilelang, "__version__", "unknown")
    record = new_record(machine_info(), tilelang_version, seed)
    name = schema.record_filename(record)
    print(f"attention suite: {len(rows)} rows on {record['machine']['gpu']}; record {out / name}", file=sys.stderr)
    if any(r.decode for r in rows):
        record["copy_gbps"] = copy_bandwidth(torch, do_bench)
        print(f"device-to-device copy: {record['copy_gbps']:.0f} GB/s", file=sys.stderr, flush=True)
    with ClockSampler() as clocks:
        for i, row in enumerate(rows, 1):
            start = time.perf_counter()
            result = run_row(row, torch, do_bench, programs, seed + i, clocks=clocks)
            record["rows"].append(result)
            schema.write_record(record, out, name)
            print(progress_line(i, len(rows), result, time.perf_counter() - start), file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    return finish(record, out, name)
