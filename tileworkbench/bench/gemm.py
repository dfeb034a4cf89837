"""The GEMM suite: our kernels against cuBLAS (through torch.matmul and cupy.matmul), fp16/bf16.

Each row is one problem (M, N, K, dtype). "Ours" is the fastest *correct* kernel among
``candidate_kernels(M, N, K, dtype)``; the spec's TMA kernels get rows of their own. Per row:
fresh random inputs (seeded, never zeros); every kernel's output is poisoned with NaN, computed,
and compared with a float64 (small problems) or float32 (large ones, TF32 off) reference by
relative Frobenius error; then timed (``timing.Timer``) on those same inputs; TFLOP/s = 2MNK/t.

Two phases per row of ours. *Selection*: cuBLAS (torch, then CuPy) and every candidate are
timed one after the other. *Head to head*: the two fastest correct candidates and the faster
correct cuBLAS path are timed again, in turn, in ``Settings.rounds`` rounds (order rotated each
round); the faster finalist's median against cuBLAS's median makes the row. The selection phase
alone would favour whichever ran while the GPU was cooler (an 8192^3 GEMM draws the H200 to its
power limit, and its clock drifts within a row), and the best of eight noisy candidate times
against one cuBLAS time favours ours; re-timing two finalists alongside cuBLAS removes both, and
keeps one unlucky selection from leaving the best kernel out. The selection numbers stay in the
row (``selection``). The spec kernels' rows (one kernel each, judged by TFLOP/s) are timed once,
alone (``GemmRunner.final`` says why).

Runs on the GPU machine: imports torch and CuPy, never pandas or matplotlib.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..autotuner.space import Config
from ..examples.gemm import matmul, matmul_tma_copy, matmul_tma_copy_store
from ..target import PassConfigKey
from .table import ratio_text

SQUARE_SIZES = (1024, 2048, 4096, 8192)
LLM_SHAPES = ((4096, 14336, 4096), (8192, 4096, 4096), (16, 4096, 4096))
QUICK_SIZES = (1024, 4096)
SPEC_SIZES = (4096, 8192)
DTYPES = ("float16", "bfloat16")
THRESHOLDS = {"float16": 2e-3, "bfloat16": 1e-2}  # relative Frobenius error that passes
REF64_MAX_FLOPS = 2 * 2048 ** 3  # above this the reference is float32 on the GPU (TF32 off)


# ---- what we run -------------------------------------------------------------------------------

@dataclass(eq=False)
class Candidate:
    """One kernel to try: ``builder(**kwargs)`` gives the prim_func, compiled with ``pass_configs``."""

    name: str
    builder: Callable
    kwargs: dict
    pass_configs: dict = field(default_factory=dict)

    def build(self):
        return self.builder(**self.kwargs)


# Tile configs for the T.copy GEMM (examples.gemm.matmul). Each lowers and NVRTC-compiles for sm_90a
# without spills (tests/bench/test_bench_candidates.py checks it). Block M a multiple of 64 per
# warpgroup (128 threads) takes the wgmma path; 16/32-row tiles stay on mma.sync and serve
# decode-like problems (M <= 64); 64-row tiles also give 1024^2 outputs enough blocks for 132 SMs,
# and with 8 stages half of K = 1024 in flight from the start: 1024^3 0.86x -> 1.00x cuBLAS against
# 4 stages (scripts/experiments/small_square_tiles.py).
# For M <= 64, 16x32 tiles with 20 stages of 64 give 16x4096x4096 128 blocks with 80 KB of B in
# flight each: 0.97x / 0.99x cuBLAS (fp16 / bf16) where 64x64 tiles gave 0.66x / 0.68x and 12 stages
# 0.95x / 0.97x (scripts/experiments/decode_tiles.py).
GENERAL_TILES = (Config(128, 128, 32, 3, 128), Config(128, 128, 64, 4, 128), Config(128, 128, 64, 4, 256),
                 Config(128, 256, 64, 3, 256), Config(128, 256, 64, 4, 256), Config(256, 128, 64, 3, 256),
                 Config(256, 128, 64, 4, 256), Config(64, 128, 64, 8, 128))
SMALL_M_TILES = (Config(16, 128, 64, 4, 128), Config(32, 128, 64, 4, 128), Config(64, 128, 64, 4, 128),
                 Config(64, 64, 64, 4, 128), Config(16, 32, 64, 20, 128))

# More candidate sources: functions (M, N, K, dtype) -> iterable of Candidate. Append a faster
# kernel family here (or with ``@register_candidates``) and every suite row tries it.
EXTRA_CANDIDATES: list[Callable[[int, int, int, str], Iterable[Candidate]]] = []


def register_candidates(source):
    EXTRA_CANDIDATES.append(source)
    return source


def matmul_candidate(M, N, K, dtype, tile: Config) -> Candidate:
    return Candidate(f"matmul {tile.name}", matmul, {"M": M, "N": N, "K": K, "dtype": dtype, **tile.as_kwargs()})


def candidate_kernels(M: int, N: int, K: int, dtype: str) -> list[Candidate]:
    """Our kernels for one problem; the suite reports the fastest correct one as 'ours'."""
    tiles = SMALL_M_TILES if M <= 64 else GENERAL_TILES
    out = [matmul_candidate(M, N, K, dtype, t) for t in tiles]
    for source in EXTRA_CANDIDATES:
        out.extend(source(M, N, K, dtype))
    return out


SPEC_BUILDERS = {"matmul_tma_copy": matmul_tma_copy, "matmul_tma_copy_store": matmul_tma_copy_store}
SPEC_PASS_CONFIGS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def spec_kernels(M: int, N: int, K: int, stages: Iterable[int] = (2, 3)) -> list[Candidate]:
    """The seed's TMA GEMMs, bodies unchanged, as the spec runs them: 128x128x32, 128 threads, fp16."""
    return [Candidate(f"{name} s{s}", builder,
                      dict(M=M, N=N, K=K, block_M=128, block_N=128, block_K=32, in_dtype="float16",
                           out_dtype="float16", accum_dtype="float32", threads=128, num_stages=s),
                      dict(SPEC_PASS_CONFIGS))
            for name, builder in SPEC_BUILDERS.items() for s in stages]


@dataclass
class Job:
    """One row of the suite: ``kernel`` is "tileworkbench" (best of candidates) or a spec kernel."""

    kernel: str
    M: int
    N: int
    K: int
    dtype: str
    candidates: list

    @property
    def label(self) -> str:
        who = "ours" if self.kernel == "tileworkbench" else self.kernel
        return f"{who} {self.M}x{self.N}x{self.K} {self.dtype}"


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``"1024,4096x14336x4096"`` -> [(1024, 1024, 1024), (4096, 14336, 4096)]."""
    shapes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        dims = [int(d) for d in part.lower().split("x")]
        if len(dims) == 1:
            dims *= 3
        if len(dims) != 3 or min(dims) <= 0:
            raise ValueError(f"size {part!r}: expected N (square) or MxNxK with positive integers")
        shapes.append(tuple(dims))
    return shapes


def default_shapes(quick: bool) -> list[tuple[int, int, int]]:
    if quick:
        return [(s, s, s) for s in QUICK_SIZES]
    return [(s, s, s) for s in SQUARE_SIZES] + list(LLM_SHAPES)


def plan(shapes, dtypes=DTYPES, spec: bool = True) -> list[Job]:
    """Rows in order: ours per (shape, dtype), then the spec kernels at 4096^3 / 8192^3 (fp16)
    where those sizes are among ``shapes``."""
    jobs = [Job("tileworkbench", M, N, K, dt, candidate_kernels(M, N, K, dt)) for (M, N, K) in shapes for dt in dtypes]
    if spec and "float16" in dtypes:
        for (M, N, K) in shapes:
            if M == N == K and M in SPEC_SIZES:
                jobs += [Job(c.name, M, N, K, "float16", [c]) for c in spec_kernels(M, N, K)]
    return jobs


# ---- how we run it -----------------------------------------------------------------------------

@dataclass
class Settings:
    warmup: int = 10
    rep: int = 50
    quick: bool = False
    seed: int = 0
    compile_bench: bool = True
    rounds: int = 6  # head-to-head rounds (cuBLAS and our finalists in turn), each of round_rep calls
    round_rep: int = 20

    @classmethod
    def for_mode(cls, quick: bool, warmup=None, rep=None, **kw) -> Settings:
        base = cls(warmup=3, rep=15, quick=True, rounds=3, round_rep=10, **kw) if quick else cls(**kw)
        base.warmup = warmup if warmup is not None else base.warmup
        base.rep = rep if rep is not None else base.rep
        return base


FINALISTS = 2  # our fastest candidates from the selection phase that meet cuBLAS in the final


def head_to_head(time_fn, contenders: dict, rounds: int, warmup: int, rep: int) -> dict:
    """Time ``contenders`` (name -> callable) in turn: ``rounds`` rounds, the order rotated by one
    each round (so none always runs first, or always right after the same one, while the GPU's
    clock drifts), each turn ``time_fn(fn, warmup, rep)`` -> ``timing.Timing``. Returns, per
    name, each turn's median (``ms``), their median (``median_ms``) and the fastest call."""
    names = list(contenders)
    turns = {name: [] for name in names}
    fastest = {name: float("inf") for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            timing = time_fn(contenders[name], warmup, rep)
            turns[name].append(timing.ms)
            fastest[name] = min(fastest[name], timing.ms_min)
    return {"rounds": rounds, "rep": rep, "ms": turns,
            "median_ms": {name: statistics.median(v) for name, v in turns.items()}, "min_ms": fastest}


def _short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 600 else text[:600] + " ..."


def candidate_key(cand: Candidate) -> str:
    """Names one candidate kernel of one problem: its builder arguments and pass configs."""
    return f"{cand.name}|{sorted(cand.kwargs.items())}|{sorted(cand.pass_configs.items())}"


class GemmRunner:
    """Runs jobs on GPU 0. Needs torch (bf16 tensors, the reference, cuBLAS) and CuPy.
    ``records`` (``candidate_key`` -> kernel record, cubin included) are candidates compiled
    elsewhere (``gemm_ray``): those load from their records instead of compiling here."""

    def __init__(self, settings: Settings, records: dict | None = None):
        import torch

        from ..backend.timing import Timer

        if not torch.cuda.is_available():
            raise RuntimeError("the GEMM suite needs a CUDA GPU; torch sees none")
        self.torch = torch
        self.settings = settings
        self.timer = Timer()
        self.records = dict(records or {})

    @contextlib.contextmanager
    def _exact_fp32(self):
        """The float32 reference must not use TF32 (its ~3e-4 error would blur ours): "highest"
        precision is torch's long-standing switch for that."""
        saved = self.torch.get_float32_matmul_precision()
        self.torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            self.torch.set_float32_matmul_precision(saved)

    def reference(self, a, b):
        flops = 2 * a.shape[0] * b.shape[1] * a.shape[1]
        if flops <= REF64_MAX_FLOPS:
            return a.double() @ b.double(), "float64"
        with self._exact_fp32():
            return a.float() @ b.float(), "float32"

    def _measure(self, run, out, ref, threshold, flops) -> dict:
        """Poison ``out``, run once, check, then time ``run`` (which writes ``out``). The result
        keeps ``run`` under ``"_run"`` for the head-to-head phase (``run()`` drops it)."""
        from ..backend.timing import passes, rel_err

        out.fill_(float("nan"))
        run()
        self.torch.cuda.synchronize()
        err = rel_err(out, ref)
        timing = self.timer.time(run, self.settings.warmup, self.settings.rep)
        return {"ms": timing.ms, "ms_min": timing.ms_min, "tflops": timing.tflops(flops), "rel_err": err,
                "correct": passes(err, threshold), "_run": run}

    def cublas(self, a, b, ref, threshold, flops) -> dict:
        torch = self.torch
        out = {}
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        try:
            out["torch"] = self._measure(lambda: torch.matmul(a, b, out=c), c, ref, threshold, flops)
        except Exception as exc:
            out["torch"] = {"error": _short_error(exc)}
        try:
            import cupy

            a_cp, b_cp = cupy.from_dlpack(a), cupy.from_dlpack(b)  # CuPy has no bfloat16: raises
            c_cp = cupy.empty((a.shape[0], b.shape[1]), dtype=a_cp.dtype)
            c_view = torch.from_dlpack(c_cp)  # same memory, so _measure's torch checks see cupy's output
            out["cupy"] = self._measure(lambda: cupy.matmul(a_cp, b_cp, out=c_cp), c_view, ref, threshold, flops)
        except Exception as exc:
            out["cupy"] = {"error": _short_error(exc)}
        return out

    def candidate(self, cand: Candidate, a, b, ref, threshold, flops) -> dict:
        from ..jit.kernel import Kernel, compile as compile_kernel

        result = {"name": cand.name}
        try:
            start = time.perf_counter()
            record = self.records.get(candidate_key(cand))
            kernel = (Kernel(record, [2]) if record is not None  # compiled on another worker: loaded only
                      else compile_kernel(cand.build(), out_idx=[2], pass_configs=cand.pass_configs))
            result["compile_s"] = time.perf_counter() - start
            c = self.torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
            result.update(self._measure(lambda: kernel(a, b, c), c, ref, threshold, flops))
        except Exception as exc:
            result["error"] = _short_error(exc)
            result["correct"] = False
        return result

    def run(self, job: Job, index: int) -> dict:
        torch = self.torch
        torch.manual_seed(self.settings.seed + index)  # fresh inputs per row, reproducible
        dt = getattr(torch, job.dtype)
        a = torch.randn(job.M, job.K, device="cuda", dtype=dt)
        b = torch.randn(job.K, job.N, device="cuda", dtype=dt)
        ref, ref_kind = self.reference(a, b)
        threshold = THRESHOLDS[job.dtype]
        flops = 2.0 * job.M * job.N * job.K
        cublas = self.cublas(a, b, ref, threshold, flops)
        results = [self.candidate(c, a, b, ref, threshold, flops) for c in job.candidates]
        final = self.final(job, results, cublas)
        for r in [*results, *cublas.values()]:
            r.pop("_run", None)  # the callables hold the GPU tensors; the record keeps numbers only
        del a, b, ref
        torch.cuda.empty_cache()
        return make_row(job, results, cublas, ref_kind, threshold, final)

    def final(self, job: Job, results: list[dict], cublas: dict) -> dict | None:
        """The head-to-head phase of a row of ours: our ``FINALISTS`` fastest correct candidates
        and the faster correct cuBLAS path, timed in turn (``head_to_head``), with ``library``
        and ``finalists`` named; None for the spec kernels' rows (one kernel each, no selection
        to correct, and their target is TFLOP/s, not the ratio: run alone, a kernel that draws
        less power than cuBLAS keeps a higher clock, which turns alternating with cuBLAS would
        take from it) and where nothing correct is left to compare."""
        lib = _best(list(cublas.values()))
        finalists = sorted((r for r in results if r.get("correct") and "_run" in r), key=lambda r: r["ms"])[:FINALISTS]
        if job.kernel != "tileworkbench" or not finalists or lib is None or not lib["correct"]:
            return None
        library = next(name for name, r in cublas.items() if r is lib)
        contenders = {f"cublas ({library})": lib["_run"]} | {r["name"]: r["_run"] for r in finalists}
        cfg = self.settings
        final = head_to_head(self.timer.time, contenders, cfg.rounds, cfg.warmup, cfg.round_rep)
        final.update(library=library, cublas=f"cublas ({library})", finalists=[r["name"] for r in finalists])
        return final


def _best(results: list[dict]) -> dict | None:
    """Fastest correct result; if none is correct, the fastest that ran (its row says WRONG)."""
    timed = [r for r in results if "ms" in r]
    pool = [r for r in timed if r.get("correct")] or timed
    return min(pool, key=lambda r: r["ms"]) if pool else None


def make_row(job: Job, results: list[dict], cublas: dict, ref_kind: str, threshold: float,
             final: dict | None = None) -> dict:
    """The record's row. Without ``final`` (no head-to-head phase: a spec kernel's row, no
    correct kernel, or no correct cuBLAS) the times are the selection phase's; with it, the
    head-to-head medians of its faster finalist, and ``selection`` keeps the selection phase's."""
    best, lib = _best(results), _best(list(cublas.values()))
    row = {"suite": "gemm", "kernel": job.kernel, "dtype": job.dtype, "M": job.M, "N": job.N, "K": job.K,
           "ms": None, "ms_min": None, "tflops": None, "rel_err": None, "correct": False, "config": None,
           "cublas_tflops": lib["tflops"] if lib else None, "cublas_ms": lib["ms"] if lib else None,
           "cublas_torch_tflops": cublas.get("torch", {}).get("tflops"),
           "cublas_cupy_tflops": cublas.get("cupy", {}).get("tflops"),
           "ratio": None, "threshold": threshold, "reference": ref_kind, "cublas": cublas, "candidates": results}
    if best is not None:
        row.update(ms=best["ms"], ms_min=best["ms_min"], tflops=best["tflops"], rel_err=best["rel_err"],
                   correct=bool(best["correct"]), config=best["name"], compile_s=best.get("compile_s"))
        if lib:
            row["ratio"] = best["tflops"] / lib["tflops"]
        if final is not None:  # the head-to-head phase decides: its faster finalist against cuBLAS
            flops = 2.0 * job.M * job.N * job.K
            medians = final["median_ms"]
            winner = min(final["finalists"], key=lambda name: medians[name])
            chosen = next(r for r in results if r["name"] == winner)
            lib_ms = medians[final["cublas"]]
            row["selection"] = {"config": row["config"], "tflops": row["tflops"],
                                "cublas_tflops": row["cublas_tflops"], "ratio": row["ratio"]}
            row.update(ms=medians[winner], ms_min=final["min_ms"][winner], config=winner,
                       rel_err=chosen["rel_err"], correct=bool(chosen["correct"]), compile_s=chosen.get("compile_s"),
                       tflops=flops / (medians[winner] * 1e-3) / 1e12, cublas_ms=lib_ms,
                       cublas_tflops=flops / (lib_ms * 1e-3) / 1e12, ratio=lib_ms / medians[winner],
                       head_to_head=final)
    else:
        row["error"] = next((r["error"] for r in results if r.get("error")), "no candidate ran")
    return row


def progress_line(index: int, total: int, row: dict, seconds: float) -> str:
    who = "ours" if row["kernel"] == "tileworkbench" else row["kernel"]
    head = f"[{index}/{total}] {who} {row['M']}x{row['N']}x{row['K']} {row['dtype']}:"
    if row.get("error"):
        return f"{head} ERROR {row['error'].splitlines()[0]} ({seconds:.1f} s)"
    ratio = ratio_text(row["ratio"])
    lib = f"{row['cublas_tflops']:.1f}" if row["cublas_tflops"] is not None else "–"
    return (f"{head} {row['tflops']:.1f} TFLOP/s ({row['config']}) | cuBLAS {lib} | ratio {ratio} | "
            f"err {row['rel_err']:.1e} {'ok' if row['correct'] else 'WRONG'} ({seconds:.1f} s)")


def run_suite(jobs: list[Job], settings: Settings, on_row=None, log=None) -> list[dict]:
    """Run ``jobs`` in order; ``on_row(rows)`` after each (the CLI rewrites the record there, so a
    run cut short still leaves every finished row on disk)."""
    runner = GemmRunner(settings)
    rows = []
    for i, job in enumerate(jobs, 1):
        start = time.perf_counter()
        row = runner.run(job, i)
        rows.append(row)
        print(progress_line(i, len(jobs), row, time.perf_counter() - start), file=log or sys.stderr, flush=True)
        if on_row is not None:
            on_row(rows)
    return rows
