"""Differential random sweep of TileLang's ported programs on the CPU interpreter.

Each draw picks a family of ``tileworkbench/examples/tilelang_programs``, random parameters (sizes
that are and are not multiples of the tiles, tiles, stages, threads, dtypes, the programs' own
switches), compiles the program for the CPU interpreter (``TILEWORKBENCH_INTERPRET=1``: the IR after
the tile-level passes runs on numpy arrays), runs it on standard-normal inputs and compares every
output with a float64 numpy reference written from what the program computes. Outcomes:

    ok           every output within tolerance
    refused      a CompileError (its first line is printed); INTERNAL if an InternalCompilerError
    unsupported  tileworkbench.interpreter.Unsupported (or a KernelRuntimeError saying so)
    MISMATCH     an output differs (max error, worst element, fraction wrong, where the wrong ones are)
    RUNTIME      another KernelRuntimeError (out-of-bounds access, deadlock, race, ...)
    EXCEPTION    anything else (traceback's last lines)
    TIMEOUT      past --timeout seconds

Draw ``i`` of seed ``S`` uses ``numpy.random.default_rng([S, i])`` and family ``i % len(families)``,
so ``--seed S --only i`` replays it; ``--family F --params JSON`` runs given parameters; ``--gpu``
compiles instead for the GPU (sm_90a, NVRTC; no interpreter, nothing run) and says compiled/refused;
``--run-gpu`` compiles for the GPU and runs there (numpy inputs copied to torch CUDA tensors, the
outputs back), each output checked against the same float64 reference: the codegen paths the
interpreters do not run (wgmma, stmatrix, TMA) checked on random draws.
``--threads`` runs the families the thread-level interpreter supports (``THREAD_FAMILIES``) on it
instead: the kernel's final lowered IR (``interpreter.threads.ThreadKernel``: every pass, threads in
lockstep, shared-memory races and out-of-bounds accesses reported as RUNTIME); ``--stage codegen``
runs the IR after the codegen phase too, ``--stage both`` runs both and calls any difference between
their outputs a MISMATCH.

    cd /work/main && PYTHONPATH=. .venv/bin/python scripts/experiments/interpreted_sweep.py \\
        --examples 200 --seed 1 [--families gemm,attention] [--timeout 60] [--verbose]
    ... interpreted_sweep.py --threads [--stage lowered|codegen|both] --examples 300 --seed 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict

import numpy as np

SIZES = [1, 3, 8, 17, 32, 48, 64, 100, 128, 129, 200, 256]
K_SIZES = SIZES + [384, 512]  # a reduction long enough for every stage of a pipeline to turn over
TMA_SIZES = [8, 24, 32, 64, 104, 128, 200, 256, 384]  # rows of 16 bytes (fp16): what explicit T.tma_copy needs
MAX_STEPS = 4000  # blocks x loop trips a draw may cost (the interpreter runs blocks one by one)

# relative max error (of the reference's max magnitude) by the lowest precision involved
TOL = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 4e-2}


# --threads: run the kernels on the thread-level interpreter, at this stage (None: off)
THREADS = {"stage": None}
THREAD_FAMILIES = ["elementwise", "gemv", "rms_norm", "layernorm", "softmax", "topk", "hadamard", "cumsum",
                   "examples", "tma_reduce_tiles"]


def at_threads(kernel):
    """``kernel`` (a CPU-interpreted one) as the --threads mode runs it: its final lowered IR on the
    thread-level interpreter; itself otherwise."""
    stage = THREADS["stage"]
    if stage is None:
        return kernel
    from tileworkbench.interpreter.threads import ThreadKernel

    if stage != "both":
        return ThreadKernel.of(kernel, stage=stage)
    lowered, codegen = ThreadKernel.of(kernel), ThreadKernel.of(kernel, stage="codegen")

    def both(*args):
        first = lowered(*args)
        second = codegen(*args)
        for a, b in zip(first if isinstance(first, tuple) else (first,), second if isinstance(second, tuple) else (second,)):
            a, b = np.asarray(a), np.asarray(b)
            if a.tobytes() != b.tobytes():
                diff = np.flatnonzero(np.asarray(a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)).any(1))
                raise Mismatch(f"the lowered and the codegen-phase IR differ in {diff.size} of {a.size} elements "
                               f"(first at flat {int(diff[0])}: {a.flat[diff[0]]} vs {b.flat[diff[0]]})")
        return first
    return both


class _threads_at:
    """``THREADS["stage"]`` set to ``stage`` for a ``with`` block (a family running each form itself)."""

    def __init__(self, stage):
        self.stage, self.saved = stage, None

    def __enter__(self):
        self.saved, THREADS["stage"] = THREADS["stage"], self.stage

    def __exit__(self, *exc):
        THREADS["stage"] = self.saved


class _OnGpu:
    """A GPU kernel called as the CPU-interpreted ones are (``--run-gpu``): numpy arguments copied to
    torch CUDA tensors (16-bit and FP8 floats through their bits), the kernel run, what it wrote
    into them copied back, and its results returned as numpy arrays."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getattr__(self, name):
        return getattr(self.kernel, name)

    @staticmethod
    def to_torch(a):
        import torch

        a = np.ascontiguousarray(a)
        special = {"bfloat16": (np.int16, torch.bfloat16), "float8_e4m3fn": (np.uint8, torch.float8_e4m3fn),
                   "float8_e5m2": (np.uint8, torch.float8_e5m2)}.get(a.dtype.name)
        if special is None:
            return torch.from_numpy(a.copy()).cuda()
        bits, dtype = special
        return torch.from_numpy(a.view(bits).copy()).cuda().view(dtype)

    @staticmethod
    def to_numpy(t):
        import torch

        if not isinstance(t, torch.Tensor):
            return t
        t = t.detach()
        special = {torch.bfloat16: (torch.int16, "bfloat16"), torch.float8_e4m3fn: (torch.uint8, "float8_e4m3fn"),
                   torch.float8_e5m2: (torch.uint8, "float8_e5m2")}.get(t.dtype)
        if special is None:
            return t.cpu().numpy()
        bits, name = special
        return t.view(bits).cpu().numpy().view(np_dtype(name))

    def __call__(self, *args, **keywords):
        return self.call(self.kernel, *args, **keywords)

    @classmethod
    def call(cls, fn, *args, **keywords):
        import torch

        moved = [cls.to_torch(a) if isinstance(a, np.ndarray) else a for a in args]
        out = fn(*moved, **keywords)
        torch.cuda.synchronize()
        for a, t in zip(args, moved):
            if isinstance(a, np.ndarray):
                np.copyto(a, cls.to_numpy(t).reshape(a.shape))
        if isinstance(out, (tuple, list)):
            return tuple(cls.to_numpy(o) for o in out)
        return cls.to_numpy(out)


def _run_on_gpu():
    """``--run-gpu``: every kernel the families compile (``@jit``'s ``compile`` and builder calls,
    ``tileworkbench.compile``) comes back as an ``_OnGpu``, and a ``@jit`` function called with numpy
    arrays runs on copies of them on the GPU, so the families' runs and checks go to the GPU
    unchanged."""
    import tileworkbench as tw
    from tileworkbench.jit.decorator import JitFunction

    compile_jit, call_jit, compile_func = JitFunction.compile, JitFunction.__call__, tw.compile

    def jit_call(self, *args, **keywords):
        if any(isinstance(a, np.ndarray) for a in args):  # called with tensors: compiled and run at once
            return _OnGpu.call(lambda *a, **k: call_jit(self, *a, **k), *args, **keywords)
        built = call_jit(self, *args, **keywords)  # a builder's call: the kernel
        return _OnGpu(built) if hasattr(built, "get_kernel_source") else built

    JitFunction.compile = lambda self, *a, **k: _OnGpu(compile_jit(self, *a, **k))
    JitFunction.__call__ = jit_call
    tw.compile = lambda *a, **k: _OnGpu(compile_func(*a, **k))


def _setup(gpu: bool):
    if gpu:
        os.environ.pop("TILEWORKBENCH_INTERPRET", None)
    else:
        os.environ["TILEWORKBENCH_INTERPRET"] = "1"
    os.environ.setdefault("TILEWORKBENCH_DISABLE_CACHE", "1")
    os.environ.setdefault("TILEWORKBENCH_VERIFY_IR", "1")  # the IR verifier after every pass, as the tests run


# ---- helpers ---------------------------------------------------------------------------------------


def T():
    import tileworkbench.language as T_
    return T_


def tdt(name):
    """the DSL dtype of a name"""
    return getattr(T(), name)


def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    if name.startswith("float8"):
        import ml_dtypes
        return np.dtype({"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[name])
    return np.dtype(name)


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(np_dtype(dtype))


def f64(x):
    return np.asarray(x).astype(np.float64)


def worst_tol(*dtypes):
    return max(TOL.get(d, 1e-4) for d in dtypes)


def pick(rng, choices):
    return choices[int(rng.integers(len(choices)))]


def cdiv(a, b):
    return -(-a // b)


class Mismatch(Exception):
    pass


def compare(label, out, ref, tol, atol=0.0):
    """None if ``out`` is within tol * max|ref| (+ atol) of ``ref`` everywhere, else a description."""
    out = f64(out)
    ref = np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        return f"{label}: shape {out.shape}, expected {ref.shape}"
    if ref.size == 0:
        return None
    scale = float(np.abs(ref).max()) or 1.0
    err = np.abs(out - ref)
    err[~np.isfinite(out)] = np.inf
    limit = tol * scale + atol
    bad = err > limit
    if not bad.any():
        return None
    flat = int(np.argmax(np.where(np.isfinite(err), err, np.finfo(np.float64).max)))
    at = np.unravel_index(flat, ref.shape)
    nan = int((~np.isfinite(out)).sum())
    where = bad.nonzero()
    box = ", ".join(f"d{d}:{int(w.min())}..{int(w.max())}({len(np.unique(w))}/{n})"
                    for d, (w, n) in enumerate(zip(where, ref.shape)))
    return (f"{label}: max err {float(err[at]):.4g} = {float(err[at]) / scale:.3g} of max|ref| {scale:.4g} "
            f"(tol {tol:g}); worst at {tuple(int(i) for i in at)}: got {out[at]:.6g}, expected {ref[at]:.6g}; "
            f"{int(bad.sum())}/{bad.size} = {bad.mean():.1%} wrong ({nan} non-finite); wrong ones in "
            f"[{box}] (index range (distinct/size) per dim)")


def check(*comparisons):
    msgs = [m for m in (compare(*c) for c in comparisons) if m]
    if msgs:
        raise Mismatch("\n".join(msgs))


# ---- families: draw(rng) -> params; run(params, rng, gpu) -> None (raises Mismatch) ------------------

FAMILIES: dict = {}


def family(name):
    def register(fns):
        FAMILIES[name] = fns
        return fns
    return register


def _gemm_ref(a, b, trans_a=False, trans_b=False):
    a, b = f64(a), f64(b)
    return (a.T if trans_a else a) @ (b.T if trans_b else b)


def _steps_gemm(M, N, K, bm, bn, bk):
    return cdiv(M, bm) * cdiv(N, bn) * max(1, cdiv(K, bk))


# elementwise -----------------------------------------------------------------------------------------

def draw_elementwise(rng):
    p = dict(M=pick(rng, SIZES), N=pick(rng, SIZES), block_M=pick(rng, [1, 8, 16, 32, 64, 128]),
             block_N=pick(rng, [8, 16, 32, 64, 256]), threads=pick(rng, [32, 64, 128, 256]),
             in_dtype=pick(rng, ["float16", "bfloat16", "float32", "int32"]), out_dtype=pick(rng, ["float16", "float32"]))
    return p, cdiv(p["M"], p["block_M"]) * cdiv(p["N"], p["block_N"])


def run_elementwise(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import elementwise
    kernel = elementwise.elementwise_add.compile(M=p["M"], N=p["N"], block_M=p["block_M"], block_N=p["block_N"],
                                                 in_dtype=tdt(p["in_dtype"]), out_dtype=tdt(p["out_dtype"]),
                                                 threads=p["threads"])
    if gpu:
        return
    kernel = at_threads(kernel)
    if p["in_dtype"] == "int32":
        a, b = (rng.integers(-1000, 1000, (p["M"], p["N"])).astype(np.int32) for _ in range(2))
    else:
        a, b = randn(rng, (p["M"], p["N"]), p["in_dtype"]), randn(rng, (p["M"], p["N"]), p["in_dtype"])
    c = kernel(a, b)
    check(("C", c, f64(a) + f64(b), worst_tol(p["in_dtype"], p["out_dtype"])))


family("elementwise")((draw_elementwise, run_elementwise))


# gemm (matmul, matmul_nt), persistent -----------------------------------------------------------------

def _draw_mnk_tiles(rng, bms=(16, 32, 64, 128), bns=(16, 32, 64, 128, 256), bks=(16, 32, 64, 128), sizes=SIZES,
                    k_sizes=K_SIZES):
    for _ in range(50):
        p = dict(M=pick(rng, SIZES), N=pick(rng, sizes), K=pick(rng, k_sizes), block_M=pick(rng, list(bms)),
                 block_N=pick(rng, list(bns)), block_K=pick(rng, list(bks)))
        if _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"]) <= MAX_STEPS:
            return p
    return p


def draw_gemm(rng):
    p = _draw_mnk_tiles(rng)
    p.update(form=pick(rng, ["nn", "nn", "nt"]), num_stages=pick(rng, [0, 1, 2, 3]),
             dtype=pick(rng, ["float16", "float16", "bfloat16"]))
    return p, _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"])


def run_gemm(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import gemm
    builder = gemm.matmul if p["form"] == "nn" else gemm.matmul_nt
    kernel = builder.compile(M=p["M"], N=p["N"], K=p["K"], block_M=p["block_M"], block_N=p["block_N"],
                             block_K=p["block_K"], num_stages=p["num_stages"], dtype=tdt(p["dtype"]))
    if gpu:
        return
    a = randn(rng, (p["M"], p["K"]), p["dtype"])
    b = randn(rng, (p["K"], p["N"]) if p["form"] == "nn" else (p["N"], p["K"]), p["dtype"])
    c = kernel(a, b)
    check(("C", c, _gemm_ref(a, b, trans_b=p["form"] == "nt"), worst_tol(p["dtype"])))


family("gemm")((draw_gemm, run_gemm))


def draw_gemm_persistent(rng):
    p = _draw_mnk_tiles(rng, bms=(64, 128), bns=(64, 128, 256), bks=(32, 64))
    p.update(threads=pick(rng, [128, 256]), num_stages=pick(rng, [1, 2, 3]), sm_num=pick(rng, [1, 2, 3, 7, 132]),
             dtype=pick(rng, ["float16", "bfloat16"]))
    return p, _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"])


def run_gemm_persistent(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import gemm
    kernel = gemm.matmul_persistent.compile(M=p["M"], N=p["N"], K=p["K"], block_M=p["block_M"], block_N=p["block_N"],
                                            block_K=p["block_K"], threads=p["threads"], num_stages=p["num_stages"],
                                            sm_num=p["sm_num"], dtype=tdt(p["dtype"]))
    if gpu:
        return
    a, b = randn(rng, (p["M"], p["K"]), p["dtype"]), randn(rng, (p["K"], p["N"]), p["dtype"])
    check(("C", kernel(a, b), _gemm_ref(a, b), worst_tol(p["dtype"])))


family("gemm_persistent")((draw_gemm_persistent, run_gemm_persistent))


# gemv ------------------------------------------------------------------------------------------------

def draw_gemv(rng):
    # the programs index global memory directly (no guards of their own): N a multiple of BLOCK_N,
    # K of BLOCK_K; the naive one has one thread a row at the default 128 threads: BLOCK_N = 128
    form = pick(rng, ["naive", "splitk", "splitk"])
    if form == "naive":
        p = dict(form=form, BLOCK_N=128, BLOCK_K=pick(rng, [1, 8, 32, 128]))
        p.update(N=128 * pick(rng, [1, 2]), K=p["BLOCK_K"] * pick(rng, [1, 2, 3]))
    else:
        rt = pick(rng, [1, 2, 8, 32])
        bk = rt * pick(rng, [1, 2, 4])
        bn = pick(rng, [1, 8, 32, 64])
        while bn * rt > 1024:
            bn //= 2
        p = dict(form=form, BLOCK_N=bn, BLOCK_K=bk, reduce_threads=rt, N=bn * pick(rng, [1, 2, 3]),
                 K=bk * pick(rng, [1, 2, 5]))
    p["dtype"] = pick(rng, ["float16", "bfloat16", "float32"])
    return p, cdiv(p["N"], p["BLOCK_N"]) * cdiv(p["K"], p["BLOCK_K"])


def run_gemv(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import gemv
    if p["form"] == "naive":
        kernel = gemv.naive_gemv.compile(N=p["N"], K=p["K"], BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"],
                                         dtype=tdt(p["dtype"]))
    else:
        kernel = gemv.splitk_gemv.compile(N=p["N"], K=p["K"], BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"],
                                          reduce_threads=p["reduce_threads"], dtype=tdt(p["dtype"]))
    if gpu:
        return
    kernel = at_threads(kernel)
    a, b = randn(rng, (p["K"],), p["dtype"]), randn(rng, (p["N"], p["K"]), p["dtype"])
    check(("C", kernel(a, b), f64(b) @ f64(a), worst_tol(p["dtype"])))


family("gemv")((draw_gemv, run_gemv))


# norms -----------------------------------------------------------------------------------------------

def draw_rms_norm(rng):
    p = dict(form=pick(rng, ["whole", "splitk"]), M=pick(rng, SIZES), N=pick(rng, SIZES), blk_m=pick(rng, [1, 2, 3, 8]))
    if p["form"] == "splitk":
        p["blk_k"] = pick(rng, [8, 32, 64, 128, 512])
    return p, cdiv(p["M"], p["blk_m"]) * (2 * cdiv(p["N"], p["blk_k"]) if p["form"] == "splitk" else 1)


def run_rms_norm(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import norms
    if p["form"] == "whole":
        kernel = norms.rms_norm.compile(M=p["M"], N=p["N"], blk_m=p["blk_m"])
    else:
        kernel = norms.rms_norm_splitk.compile(M=p["M"], N=p["N"], blk_m=p["blk_m"], blk_k=p["blk_k"])
    if gpu:
        return
    kernel = at_threads(kernel)
    x = randn(rng, (p["M"], p["N"]), "float32")
    ref = f64(x) / np.sqrt((f64(x) ** 2).mean(1, keepdims=True) + 1e-12)
    check(("B", kernel(x), ref, 1e-4))


family("rms_norm")((draw_rms_norm, run_rms_norm))


def draw_layernorm(rng):
    p = dict(N=pick(rng, SIZES), D=pick(rng, SIZES), blk_m=pick(rng, [1, 2, 3, 8]), threads=pick(rng, [128, 256]),
             in_dtype=pick(rng, ["bfloat16", "float16", "float32"]), out_dtype=pick(rng, ["bfloat16", "float16", "float32"]))
    return p, cdiv(p["N"], p["blk_m"])


def run_layernorm(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import norms
    kernel = norms.layernorm_fwd(p["N"], p["D"], blk_m=p["blk_m"], threads=p["threads"], in_dtype=p["in_dtype"],
                                 out_dtype=p["out_dtype"])
    if gpu:
        return
    kernel = at_threads(kernel)
    x = randn(rng, (p["N"], p["D"]), p["in_dtype"])
    g, b = randn(rng, (p["D"],), p["in_dtype"]), randn(rng, (p["D"],), p["in_dtype"])
    y, mean, rstd = kernel(x, g, b)
    x64 = f64(x)
    mu = x64.mean(1)
    var = ((x64 - mu[:, None]) ** 2).mean(1)
    r = 1.0 / np.sqrt(var + 1e-5)
    ref = (x64 - mu[:, None]) * r[:, None] * f64(g) + f64(b)
    # the kernel's variance is E[x^2] - mean^2 in float32: its error grows with E[x^2] / (var + eps)
    cond = float(((x64 ** 2).mean(1) / (var + 1e-5)).max())
    check(("Y", y, ref, worst_tol(p["in_dtype"], p["out_dtype"]) * max(1.0, min(cond * 1e-2, 10.0))),
          ("Mean", mean, mu, 1e-4, 1e-5), ("Rstd", rstd, r, 1e-4 * max(1.0, cond)))


family("layernorm")((draw_layernorm, run_layernorm))


# softmax ---------------------------------------------------------------------------------------------

def draw_softmax(rng):
    # the row's blocks are zero-padded copies: N a multiple of BLOCK_N (padding would enter the sums)
    bn = pick(rng, [1, 16, 32, 64, 128, 256])
    p = dict(M=pick(rng, SIZES), BLOCK_M=pick(rng, [1, 2, 3, 4]), BLOCK_N=bn, N=bn * pick(rng, [1, 2, 3]),
             dtype=pick(rng, ["float16", "bfloat16", "float32"]))
    return p, cdiv(p["M"], p["BLOCK_M"]) * 2 * (p["N"] // bn)


def run_softmax(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import softmax
    kernel = softmax.softmax_kernel.compile(M=p["M"], N=p["N"], BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"],
                                            dtype=tdt(p["dtype"]))
    if gpu:
        return
    kernel = at_threads(kernel)
    x = randn(rng, (p["M"], p["N"]), p["dtype"])
    e = np.exp(f64(x) - f64(x).max(1, keepdims=True))
    check(("Y", kernel(x), e / e.sum(1, keepdims=True), worst_tol(p["dtype"])))


family("softmax")((draw_softmax, run_softmax))


# cumsum / cummax ------------------------------------------------------------------------------------

def draw_cumsum(rng):
    # S a multiple of the chunk (the reference sums whole chunks); heads any number (a partial block)
    chunk = pick(rng, [1, 8, 16, 64, 100, 128])
    p = dict(B=pick(rng, [1, 2]), S=chunk * pick(rng, [1, 2, 3]), H=pick(rng, SIZES), chunk_size=chunk,
             block_H=pick(rng, [1, 8, 32, 64]), reverse=bool(rng.integers(2)), threads=pick(rng, [32, 64, 128, 256]),
             M=pick(rng, SIZES), N=pick(rng, SIZES), block_M=pick(rng, [1, 2, 4, 8]),
             dtype=pick(rng, ["float16", "bfloat16", "float32"]))
    return p, p["B"] * (p["S"] // chunk) * cdiv(p["H"], p["block_H"]) + cdiv(p["M"], p["block_M"])


def run_cumsum(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import cumsum
    sums = cumsum.chunk_local_cumsum.compile(B=p["B"], S=p["S"], H=p["H"], chunk_size=p["chunk_size"],
                                             block_H=p["block_H"], reverse=p["reverse"], threads=p["threads"])
    maxima = cumsum.row_cummax.compile(M=p["M"], N=p["N"], block_M=p["block_M"], threads=p["threads"],
                                       dtype=tdt(p["dtype"]))
    if gpu:
        return
    g = randn(rng, (p["B"], p["S"], p["H"]), "float32")
    x = randn(rng, (p["M"], p["N"]), p["dtype"])
    check(("O", at_threads(sums)(g), cumsum.chunk_local_reference(f64(g), p["chunk_size"], p["reverse"]), 1e-5),
          ("Y", at_threads(maxima)(x), np.maximum.accumulate(f64(x), axis=1), 0.0))


family("cumsum")((draw_cumsum, run_cumsum))


# split-K gemm ----------------------------------------------------------------------------------------

def draw_splitk(rng):
    for _ in range(50):
        bm, bn, bk = pick(rng, [16, 32, 64, 128]), pick(rng, [16, 32, 64, 128]), pick(rng, [16, 32, 64])
        split = pick(rng, [1, 1, 2, 3, 4])
        # each split's slice a whole number of block_K (else a split's last tile reads the next's);
        # with split_k 1 any K (the copies' zero fill)
        K = pick(rng, SIZES) if split == 1 else split * bk * pick(rng, [1, 2])
        p = dict(M=pick(rng, SIZES), N=pick(rng, SIZES), K=K, block_M=bm, block_N=bn, block_K=bk, split_k=split,
                 dtype=pick(rng, ["float16", "bfloat16"]))
        cost = _steps_gemm(p["M"], p["N"], K, bm, bn, bk)
        if cost <= MAX_STEPS:
            break
    return p, cost


def run_splitk(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import splitk
    kernel = splitk.matmul_splitk.compile(M=p["M"], N=p["N"], K=p["K"], block_M=p["block_M"], block_N=p["block_N"],
                                          block_K=p["block_K"], split_k=p["split_k"], dtype=tdt(p["dtype"]))
    if gpu:
        return
    a, b = randn(rng, (p["M"], p["K"]), p["dtype"]), randn(rng, (p["K"], p["N"]), p["dtype"])
    c = np.zeros((p["M"], p["N"]), np.float32)
    kernel(a, b, c)
    check(("C", c, _gemm_ref(a, b), 1e-4))


family("splitk")((draw_splitk, run_splitk))


# top-k -----------------------------------------------------------------------------------------------

def draw_topk(rng):
    n = pick(rng, [1, 3, 8, 17, 64, 100, 128])
    p = dict(M=pick(rng, SIZES), N=n, topk=int(rng.integers(1, min(n, 6) + 1)), blk_m=pick(rng, [1, 2, 16, 64]),
             threads=pick(rng, [32, 128, 256]))
    return p, cdiv(p["M"], p["blk_m"]) * p["topk"]


def run_topk(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import topk
    kernel = topk.top_k_rows.compile(M=p["M"], N=p["N"], topk=p["topk"], blk_m=p["blk_m"], threads=p["threads"])
    if gpu:
        return
    kernel = at_threads(kernel)
    x = randn(rng, (p["M"], p["N"]), "float32")
    values, indices = kernel(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :p["topk"]]
    check(("values", values, np.take_along_axis(x, order, 1), 0.0), ("indices", indices, order, 0.0))


family("topk")((draw_topk, run_topk))


# dynamic-shape gemm ----------------------------------------------------------------------------------

def draw_dynamic(rng):
    p = dict(block_M=pick(rng, [32, 64, 128]), block_N=pick(rng, [32, 64, 128]), block_K=pick(rng, [16, 32, 64]),
             trans_A=bool(rng.integers(2)), trans_B=bool(rng.integers(2)), in_dtype=pick(rng, ["float16", "bfloat16"]),
             out_dtype=pick(rng, ["float16", "float32"]), num_stages=pick(rng, [0, 1, 2, 3]),
             threads=pick(rng, [128, 256]))
    calls = []
    while len(calls) < 3:
        m, n, k = pick(rng, SIZES), pick(rng, SIZES), pick(rng, SIZES)
        if _steps_gemm(m, n, k, p["block_M"], p["block_N"], p["block_K"]) <= MAX_STEPS // 2:
            calls.append([m, n, k])
    p["calls"] = calls
    return p, sum(_steps_gemm(m, n, k, p["block_M"], p["block_N"], p["block_K"]) for m, n, k in calls)


def run_dynamic(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import dynamic_shape
    config = {k: v for k, v in p.items() if k != "calls"}
    config.update(in_dtype=tdt(p["in_dtype"]), out_dtype=tdt(p["out_dtype"]), accum_dtype=tdt("float32"))
    kernel = dynamic_shape.matmul_dynamic_mnk.compile(**config)
    if gpu:
        return
    comparisons = []
    for m, n, k in p["calls"]:
        a = randn(rng, (k, m) if p["trans_A"] else (m, k), p["in_dtype"])
        b = randn(rng, (n, k) if p["trans_B"] else (k, n), p["in_dtype"])
        c = kernel(a, b)
        comparisons.append((f"C[{m}x{n}x{k}]", c, _gemm_ref(a, b, p["trans_A"], p["trans_B"]),
                            worst_tol(p["in_dtype"], p["out_dtype"])))
    check(*comparisons)


family("dynamic_shape")((draw_dynamic, run_dynamic))


# warp-specialised gemms ------------------------------------------------------------------------------

def draw_ws(rng):
    form = pick(rng, ["ws", "ws", "barrier_pipe", "split_n", "loops_in_scopes", "loops_in_scopes"])
    p = _draw_mnk_tiles(rng, bms=(64, 128), bns=(64, 128), bks=(32, 64), sizes=TMA_SIZES, k_sizes=TMA_SIZES)
    p["form"] = form
    if form == "ws":
        p.update(num_stages=pick(rng, [0, 1, 2, 3]), producer=pick(rng, [0, 1]))
    elif form == "loops_in_scopes":
        p["num_stages"] = pick(rng, [1, 2, 3])
    return p, _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"])


def run_ws(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import warp_specialize as ws
    builder = {"ws": ws.matmul_ws, "barrier_pipe": ws.matmul_barrier_pipe, "split_n": ws.matmul_split_n,
               "loops_in_scopes": ws.matmul_loops_in_scopes}[p["form"]]
    kernel = builder.compile(**{k: v for k, v in p.items() if k != "form"})
    if gpu:
        return
    a, b = randn(rng, (p["M"], p["K"]), "float16"), randn(rng, (p["K"], p["N"]), "float16")
    check(("C", kernel(a, b), _gemm_ref(a, b), TOL["float16"]))


family("warp_specialize")((draw_ws, run_ws))


# flash attention forward -----------------------------------------------------------------------------

def _attention_ref(q, k, v, causal):
    q, k, v = f64(q), f64(k), f64(v)
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = np.where(np.tril(np.ones((n, s.shape[-1]), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def draw_attention(rng):
    for _ in range(50):
        heads = pick(rng, [1, 2, 4])
        p = dict(batch=pick(rng, [1, 2]), heads=heads, seq_len=pick(rng, [1, 3, 17, 64, 100, 128, 200, 256, 384]),
                 dim=pick(rng, [16, 32, 64, 64, 96, 128, 128, 256]), is_causal=bool(rng.integers(2)),
                 block_M=pick(rng, [32, 64, 128]), block_N=pick(rng, [16, 32, 64, 96, 128, 176, 256]),
                 num_stages=pick(rng, [0, 1, 2, 3]), threads=pick(rng, [128, 256, 256, 384]),
                 groups=pick(rng, [g for g in (1, 1, 2, 4) if heads % g == 0]))
        if rng.random() < 0.85:  # P @ V from registers: 64 rows of the tile per warpgroup
            p["block_M"] = 64 * p["threads"] // 128
        cost = p["batch"] * heads * cdiv(p["seq_len"], p["block_M"]) * cdiv(p["seq_len"], p["block_N"])
        if cost <= MAX_STEPS // 2:
            break
    return p, cost


def run_attention(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import attention
    kernel = attention.flash_attention(p["batch"], p["heads"], p["seq_len"], p["dim"], p["is_causal"],
                                       block_M=p["block_M"], block_N=p["block_N"], num_stages=p["num_stages"],
                                       threads=p["threads"], groups=p["groups"])
    if gpu:
        return
    shape = (p["batch"], p["heads"], p["seq_len"], p["dim"])
    kv = (p["batch"], p["heads"] // p["groups"], p["seq_len"], p["dim"])
    q, k, v = randn(rng, shape, "float16"), randn(rng, kv, "float16"), randn(rng, kv, "float16")
    check(("O", kernel(q, k, v), _attention_ref(q, k, v, p["is_causal"]), TOL["float16"]))


family("attention")((draw_attention, run_attention))


# flash decoding --------------------------------------------------------------------------------------

def draw_flash_decoding(rng):
    bn, split = pick(rng, [32, 64, 128]), pick(rng, [1, 2, 4])
    p = dict(batch=pick(rng, [1, 2]), heads=pick(rng, [1, 2, 3]), seqlen_q=pick(rng, [1, 3, 17, 64, 100]),
             seqlen_kv=bn * split * pick(rng, [1, 2]), dim=pick(rng, [32, 64, 128]), num_split=split,
             block_M=pick(rng, [32, 64]), block_N=bn, num_stages=pick(rng, [0, 1, 2, 3]), threads=pick(rng, [128, 256]))
    if rng.random() < 0.85:  # P @ V from registers: 64 rows of the tile per warpgroup
        p["block_M"] = 64 * p["threads"] // 128
    cost = p["batch"] * p["heads"] * cdiv(p["seqlen_q"], p["block_M"]) * (p["seqlen_kv"] // bn + split)
    return p, cost


def run_flash_decoding(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import flash_decoding
    kernel = flash_decoding.flash_decoding(**p)
    if gpu:
        return
    q = randn(rng, (p["batch"], p["heads"], p["seqlen_q"], p["dim"]), "float16")
    k, v = (randn(rng, (p["batch"], p["heads"], p["seqlen_kv"], p["dim"]), "float16") for _ in range(2))
    check(("O", kernel(q, k, v), _attention_ref(q, k, v, False), TOL["float16"]))


family("flash_decoding")((draw_flash_decoding, run_flash_decoding))


# attention backward ----------------------------------------------------------------------------------

def draw_attention_bwd(rng):
    p = dict(B=pick(rng, [1, 2]), H=pick(rng, [1, 2]), S=pick(rng, [1, 17, 32, 64, 100, 128]), D=pick(rng, [32, 64]),
             is_causal=bool(rng.integers(2)), block_M=pick(rng, [32, 64, 64, 64, 64]), block_N=pick(rng, [32, 64]))
    return p, p["B"] * p["H"] * cdiv(p["S"], p["block_M"]) * cdiv(p["S"], p["block_N"])


def run_attention_bwd(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import attention_bwd
    fb = attention_bwd.FlashBackward(p["B"], p["H"], p["S"], p["D"], p["is_causal"], block_M=p["block_M"],
                                     block_N=p["block_N"])
    if gpu:
        return
    B, H, S, D = p["B"], p["H"], p["S"], p["D"]
    q, k, v, do = (randn(rng, (B, H, S, D), "float16") for _ in range(4))
    o, lse, dq, dk, dv = attention_bwd.numpy_gradients(q, k, v, do, p["is_causal"])
    got = fb(q, k, v, o, lse, do)
    check(*[(name, out, ref, 3e-2) for name, out, ref in zip(("dQ", "dK", "dV"), got, (dq, dk, dv))])


family("attention_bwd")((draw_attention_bwd, run_attention_bwd))


# retention -------------------------------------------------------------------------------------------

def draw_retention(rng):
    p = dict(B=pick(rng, [1, 2]), S=64 * pick(rng, [1, 2, 3]), H=pick(rng, [1, 2, 3]), DK=pick(rng, [64, 128]),
             DV=pick(rng, [64, 128]))
    return p, p["B"] * p["H"] * (p["S"] // 64) * (p["DK"] // 64) * (p["DV"] // 64)


def run_retention(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import retention
    kernel = retention.chunk_retention_fwd(p["B"], p["S"], p["H"], p["DK"], p["DV"])
    if gpu:
        return
    B, S, H, DK, DV = p["B"], p["S"], p["H"], p["DK"], p["DV"]
    q, k = randn(rng, (B, S, H, DK), "float16"), randn(rng, (B, S, H, DK), "float16")
    v = randn(rng, (B, S, H, DV), "float16")
    out = f64(kernel(q, k, v)).sum(0)
    pos = np.arange(S)
    dist = pos[:, None] - pos[None, :]
    ref = np.zeros((B, S, H, DV))
    for h in range(H):
        decay = np.where(dist >= 0, np.exp2(np.clip(dist, 0, None) * np.log2(1 - 2.0 ** (-5.0 - h))), 0.0)
        qh, kh, vh = (f64(x[:, :, h]) for x in (q, k, v))
        ref[:, :, h] = ((qh @ kh.transpose(0, 2, 1)) * DK ** -0.5 * decay) @ vh
    check(("O.sum(0)", out, ref, TOL["float16"]))


family("retention")((draw_retention, run_retention))


# hadamard --------------------------------------------------------------------------------------------

def draw_hadamard(rng):
    p = dict(b=pick(rng, [1, 3, 17]), n=2 ** int(rng.integers(1, 16)), dtype=pick(rng, ["float32", "float16", "bfloat16"]))
    if p["n"] > 4096:
        p["b"] = pick(rng, [1, 2])
    return p, p["b"]


def run_hadamard(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import hadamard
    kernel = hadamard.hadamard.compile(b=p["b"], n=p["n"], dtype=tdt(p["dtype"]))
    if gpu:
        return
    kernel = at_threads(kernel)
    x = randn(rng, (p["b"], p["n"]), p["dtype"])
    ref, h, n = f64(x), 1, p["n"]
    while h < n:
        ref = ref.reshape(p["b"], -1, 2, h)
        a, c = ref[:, :, 0].copy(), ref[:, :, 1].copy()
        ref[:, :, 0], ref[:, :, 1] = a + c, a - c
        ref, h = ref.reshape(p["b"], n), h * 2
    check(("B", kernel(x), ref, {"float32": 1e-5, "float16": 2e-2, "bfloat16": 5e-2}[p["dtype"]]))


family("hadamard")((draw_hadamard, run_hadamard))


# convolution -----------------------------------------------------------------------------------------

def draw_convolution(rng):
    for _ in range(100):
        p = dict(N=pick(rng, [1, 2]), C=pick(rng, [1, 3, 8, 8, 16, 16, 32, 32, 64]), H=pick(rng, [1, 3, 5, 8, 10]),
                 W=pick(rng, [1, 3, 5, 8, 10]), F=pick(rng, [1, 8, 16, 32, 100]), K=pick(rng, [1, 2, 3]),
                 S=pick(rng, [1, 2]), D=pick(rng, [1, 2]), P=pick(rng, [0, 1, 2]), block_M=pick(rng, [32, 64, 128]),
                 block_N=pick(rng, [32, 64, 128]), block_K=pick(rng, [16, 32, 64]), num_stages=pick(rng, [0, 1, 2, 3]),
                 threads=pick(rng, [128, 256]))
        oh = (p["H"] + 2 * p["P"] - p["D"] * (p["K"] - 1) - 1) // p["S"] + 1
        ow = (p["W"] + 2 * p["P"] - p["D"] * (p["K"] - 1) - 1) // p["S"] + 1
        if oh >= 1 and ow >= 1:
            break
    cost = cdiv(p["N"] * oh * ow, p["block_M"]) * cdiv(p["F"], p["block_N"]) * cdiv(p["K"] ** 2 * p["C"], p["block_K"])
    return p, cost


def run_convolution(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import convolution
    kernel = convolution.convolution.compile(**p)
    if gpu:
        return
    n, c, h, w, f, kk, s, d, pad = (p[x] for x in ("N", "C", "H", "W", "F", "K", "S", "D", "P"))
    x = randn(rng, (n, h, w, c), "float16")
    wt = randn(rng, (kk, kk, c, f), "float16")
    out = kernel(x, wt)
    oh = (h + 2 * pad - d * (kk - 1) - 1) // s + 1
    ow = (w + 2 * pad - d * (kk - 1) - 1) // s + 1
    padded = np.pad(f64(x), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    ref = np.zeros((n, oh, ow, f))
    for i in range(kk):
        for j in range(kk):
            patch = padded[:, i * d: i * d + s * (oh - 1) + 1: s, j * d: j * d + s * (ow - 1) + 1: s, :]
            ref += patch @ f64(wt[i, j])
    check(("out", out, ref, TOL["float16"]))


family("convolution")((draw_convolution, run_convolution))


# block-sparse gemm -----------------------------------------------------------------------------------

def draw_blocksparse(rng):
    for _ in range(50):
        bm, bn, bk = pick(rng, [32, 64, 128]), pick(rng, [32, 64, 128]), pick(rng, [16, 32, 64])
        # the mask has M // block_M rows (and so on): whole tiles only
        p = dict(M=bm * pick(rng, [1, 2, 3]), N=bn * pick(rng, [1, 2]), K=bk * pick(rng, [1, 2, 5]), block_M=bm,
                 block_N=bn, block_K=bk, num_stages=pick(rng, [0, 1, 2, 3]), thread_num=pick(rng, [128, 256]),
                 enable_rasteration=bool(rng.integers(2)), density=pick(rng, [0.0, 0.3, 0.5, 1.0]))
        cost = _steps_gemm(p["M"], p["N"], p["K"], bm, bn, bk)
        if cost <= MAX_STEPS:
            break
    return p, cost


def run_blocksparse(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import blocksparse_gemm
    kernel = blocksparse_gemm.blocksparse_matmul.compile(**{k: v for k, v in p.items() if k != "density"})
    if gpu:
        return
    M, N, K, bm, bn, bk = (p[x] for x in ("M", "N", "K", "block_M", "block_N", "block_K"))
    a, b = randn(rng, (M, K), "float16"), randn(rng, (K, N), "float16")
    mask = rng.random((M // bm, N // bn, K // bk)) < p["density"]
    ref = np.zeros((M, N))
    for i, j, k in zip(*np.nonzero(mask)):
        ref[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += f64(a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk]) @ \
            f64(b[k * bk:(k + 1) * bk, j * bn:(j + 1) * bn])
    check(("C", kernel(a, b, mask), ref, TOL["float16"]))


family("blocksparse")((draw_blocksparse, run_blocksparse))


# stream-K gemm ---------------------------------------------------------------------------------------

def draw_streamk(rng):
    for _ in range(50):
        p = _draw_mnk_tiles(rng, bms=(16, 32, 64), bns=(32, 64, 128), bks=(16, 32, 64))
        p.update(programs=pick(rng, [1, 2, 3, 5, 8, 16]), num_stages=pick(rng, [0, 1, 2, 3]),
                 threads=pick(rng, [64, 128]))
        cost = _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"]) + 2 * p["programs"]
        if cost <= MAX_STEPS:
            break
    return p, cost


def run_streamk(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import streamk_gemm
    M, N, K, bm, bn, bk = (p[x] for x in ("M", "N", "K", "block_M", "block_N", "block_K"))
    plan = streamk_gemm.stream_k_plan(M, N, K, bm, bn, bk, p["programs"])
    kernel = streamk_gemm.streamk_matmul.compile(
        M=M, N=N, K=K, streamk_tiles=plan[0], full_iters=plan[1], partial_iters=plan[2], whole_per_program=plan[3],
        block_M=bm, block_N=bn, block_K=bk, programs=p["programs"], num_stages=p["num_stages"], threads=p["threads"])
    if gpu:
        return
    a, b = randn(rng, (M, K), "float16"), randn(rng, (N, K), "float16")
    c = np.zeros((M, N), np.float32)
    kernel(a, b, c)
    check(("C", c, _gemm_ref(a, b, trans_b=True), 1e-4))


family("streamk")((draw_streamk, run_streamk))


# tileworkbench's own GEMM examples (examples/gemm.py): both transposes, threads, output types; a
# gemm whose accumulator rows are reduced; a lower-triangular A with a per-block trip count -------------

def draw_gemm_spec(rng):
    form = pick(rng, ["matmul", "matmul", "row_max", "lower_triangular"])
    p = _draw_mnk_tiles(rng, bms=(64, 128), bns=(32, 64, 128, 256), bks=(16, 32, 64))
    p.update(form=form, num_stages=pick(rng, [0, 1, 2, 3]), threads=pick(rng, [128, 256, 384]))
    if form == "matmul":
        p.update(trans_A=bool(rng.integers(2)), trans_B=bool(rng.integers(2)),
                 dtype=pick(rng, ["float16", "bfloat16"]), out_dtype=pick(rng, ["float16", "float32", None]))
    elif form == "lower_triangular":
        p["K"] = p["M"]
    return p, _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"])


def run_gemm_spec(p, rng, gpu):
    import tileworkbench as tw
    from tileworkbench.examples import gemm as spec
    M, N, K, bm, bn, bk = (p[x] for x in ("M", "N", "K", "block_M", "block_N", "block_K"))
    common = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=p["num_stages"], threads=p["threads"])
    if p["form"] == "matmul":
        prog = spec.matmul(M, N, K, dtype=p["dtype"], out_dtype=p["out_dtype"], trans_A=p["trans_A"],
                           trans_B=p["trans_B"], **common)
    elif p["form"] == "row_max":
        prog = spec.gemm_row_max(M, N, K, **common)
    else:
        prog = spec.lower_triangular_matmul(M, N, **common)
    kernel = tw.compile(prog, out_idx=[2])
    if gpu:
        return
    dtype = p.get("dtype", "float16")
    if p["form"] == "matmul":
        a = randn(rng, (K, M) if p["trans_A"] else (M, K), dtype)
        b = randn(rng, (N, K) if p["trans_B"] else (K, N), dtype)
        check(("C", kernel(a, b), _gemm_ref(a, b, p["trans_A"], p["trans_B"]),
               worst_tol(dtype, p["out_dtype"] or dtype)))
    elif p["form"] == "row_max":
        a, b = randn(rng, (M, K), dtype), randn(rng, (K, N), dtype)
        full = _gemm_ref(a, b)
        # a last block column past N holds the zero-filled columns of B: their scores 0 enter the max
        padded = np.pad(full, ((0, 0), (0, cdiv(N, bn) * bn - N)))
        ref = np.stack([padded[:, j * bn:(j + 1) * bn].max(1) for j in range(cdiv(N, bn))], 1)
        check(("R", kernel(a, b), ref, 1e-4))
    else:
        a = np.tril(randn(rng, (M, M), dtype).astype(np.float32)).astype(np_dtype(dtype))
        b = randn(rng, (M, N), dtype)
        check(("C", kernel(a, b), _gemm_ref(a, b), TOL["float16"]))


family("gemm_spec")((draw_gemm_spec, run_gemm_spec))


# fp8 gemm --------------------------------------------------------------------------------------------

def draw_gemm_fp8(rng):
    p = _draw_mnk_tiles(rng, bms=(64, 128), bns=(64, 128), bks=(32, 64, 128))
    p.update(dtype=pick(rng, ["float8_e4m3fn", "float8_e5m2"]), num_stages=pick(rng, [0, 1, 2, 3]),
             threads=pick(rng, [128, 256]))
    return p, _steps_gemm(p["M"], p["N"], p["K"], p["block_M"], p["block_N"], p["block_K"])


def run_gemm_fp8(p, rng, gpu):
    from tileworkbench.examples.tilelang_programs import gemm_fp8
    kernel = gemm_fp8.matmul.compile(**{**p, "dtype": tdt(p["dtype"])})
    if gpu:
        return
    a, b = randn(rng, (p["M"], p["K"]), p["dtype"]), randn(rng, (p["N"], p["K"]), p["dtype"])
    out = kernel(a, b)
    ref = _gemm_ref(a, b, trans_b=True)
    # the result is FP8: within half a step (1/16 of its value for e4m3, 1/8 for e5m2), plus the smallest step
    step = {"float8_e4m3fn": 1 / 16, "float8_e5m2": 1 / 8}[p["dtype"]]
    err = np.abs(f64(out) - ref)
    bad = ~(err <= np.abs(ref) * step + 2.0 ** -9)
    if bad.any():
        at = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), ref.shape)
        rows, cols = np.nonzero(bad)
        raise Mismatch(f"C: {int(bad.sum())}/{bad.size} beyond half an FP8 step; worst at {tuple(map(int, at))}: got "
                       f"{f64(out)[at]:.6g}, expected {ref[at]:.6g}; rows {rows.min()}..{rows.max()} cols "
                       f"{cols.min()}..{cols.max()}")


family("gemm_fp8")((draw_gemm_fp8, run_gemm_fp8))


# the examples' thread-level kernels (tileworkbench/examples: T.Parallel nests with guards, reductions,
# masks decided per tile) --------------------------------------------------------------------------------

def _compile_example(prim_func, out_idx, gpu):
    import tileworkbench as tw
    kernel = tw.compile(prim_func, out_idx=out_idx)
    return None if gpu else at_threads(kernel)


def draw_examples(rng):
    form = pick(rng, ["row_sum", "elementwise_add", "overhanging_tiles", "masked_scores"])
    p = dict(form=form, M=pick(rng, SIZES), N=pick(rng, SIZES))
    if form == "row_sum":
        p.update(block_M=pick(rng, [1, 2, 4, 8, 16]), threads=pick(rng, [32, 64, 128, 256]),
                 dtype=pick(rng, ["float32", "float16", "bfloat16"]))
        return p, cdiv(p["M"], p["block_M"])
    if form == "masked_scores":
        block = pick(rng, [16, 32, 64])
        p = dict(form=form, n=block * pick(rng, [1, 2, 3]), block=block, op=pick(rng, [">=", ">", "<=", "<"]),
                 shift=int(rng.integers(-40, 40)))
        return p, (p["n"] // block) ** 2
    p.update(block_M=pick(rng, [8, 16, 32, 64]), block_N=pick(rng, [8, 16, 32, 64, 128]))
    if form == "elementwise_add":
        p.update(threads=pick(rng, [32, 64, 128, 256]), dtype=pick(rng, ["float32", "float16", "bfloat16"]))
    return p, cdiv(p["M"], p["block_M"]) * cdiv(p["N"], p["block_N"])


def run_examples(p, rng, gpu):
    from tileworkbench.examples import edge_cases, elementwise_add, row_sum
    form = p["form"]
    if form == "row_sum":
        kernel = _compile_example(row_sum(p["M"], p["N"], p["block_M"], p["dtype"], p["threads"]), [1], gpu)
        if kernel:
            a = randn(rng, (p["M"], p["N"]), p["dtype"])
            check(("B", kernel(a), f64(a).sum(1), worst_tol(p["dtype"]), 1e-4 * math.sqrt(p["N"])))
    elif form == "elementwise_add":
        kernel = _compile_example(elementwise_add(p["M"], p["N"], p["block_M"], p["block_N"], p["dtype"],
                                                  p["threads"]), [2], gpu)
        if kernel:
            a, b = randn(rng, (p["M"], p["N"]), p["dtype"]), randn(rng, (p["M"], p["N"]), p["dtype"])
            check(("C", kernel(a, b), f64(a) + f64(b), worst_tol(p["dtype"])))
    elif form == "overhanging_tiles":
        kernel = _compile_example(edge_cases.overhanging_tiles(p["M"], p["N"], p["block_M"], p["block_N"]), [1, 2], gpu)
        if kernel:
            a = randn(rng, (p["M"], p["N"]), "float32")
            c, sums = kernel(a)
            cols = cdiv(p["N"], p["block_N"])
            pad = np.zeros((p["M"], cols * p["block_N"]))
            pad[:, :p["N"]] = 2 * f64(a)
            check(("C", c, 2 * f64(a) + 1, 1e-5), ("S", sums, pad.reshape(p["M"], cols, -1).sum(2), 1e-5))
    else:
        kernel = _compile_example(edge_cases.masked_scores(p["n"], p["block"], p["op"], p["shift"]), [0], gpu)
        if kernel:
            r, c = np.arange(p["n"])[:, None], np.arange(p["n"])[None, :] + p["shift"]
            ref = {">=": r >= c, ">": r > c, "<=": r <= c, "<": r < c}[p["op"]]
            check(("Out", kernel(), ref.astype(np.float64), 0.0))


family("examples")((draw_examples, run_examples))


# the shapes of session 41's two miscompiles, not in the default list (adding families to it would
# change which family every earlier seed's draw takes): run them with --families ---------------------

EXTRA_FAMILIES = ("masked_store", "pipelined_twice", "tma_reduce", "ws_reads", "tma_reduce_tiles")
MASKS = {"lower": lambda r, c, s: r >= c + s, "band": lambda r, c, s: r < c + s + 8,
         "checker": lambda r, c, s: (r + c + s) % 2 == 0, "columns": lambda r, c, s: (c + s) % 3 != 1}


def _masked_store(n, threads, dtype, mask, shift):
    """``S = Q K^T`` kept where ``MASKS[mask]`` holds, through a 16-bit shared tile (the stmatrix store
    of a value reading the nest's variables: linear attention's causal mask)."""
    T_ = T()

    @T_.prim_func
    def main(Q: T_.Tensor((n, 64), dtype), K: T_.Tensor((n, 64), dtype), S: T_.Tensor((n, n), dtype)):
        with T_.Kernel(1, threads=threads):
            q = T_.alloc_shared((n, 64), dtype)
            k = T_.alloc_shared((n, 64), dtype)
            s = T_.alloc_fragment((n, n), "float32")
            s_shared = T_.alloc_shared((n, n), dtype)
            T_.copy(Q[0, 0], q)
            T_.copy(K[0, 0], k)
            T_.gemm(q, k, s, clear_accum=True, transpose_B=True)
            for row, col in T_.Parallel(n, n):
                if mask == "lower":
                    s_shared[row, col] = T_.if_then_else(row >= col + shift, s[row, col], 0)
                elif mask == "band":
                    s_shared[row, col] = T_.if_then_else(row < col + shift + 8, s[row, col], 0)
                elif mask == "checker":
                    s_shared[row, col] = T_.if_then_else((row + col + shift) % 2 == 0, s[row, col], 0)
                else:
                    s_shared[row, col] = T_.if_then_else((col + shift) % 3 != 1, s[row, col], 0)
            T_.copy(s_shared, S[0, 0])

    return main


def draw_masked_store(rng):
    p = dict(n=pick(rng, [64, 128]), threads=pick(rng, [128, 256]), dtype=pick(rng, ["float16", "bfloat16"]),
             mask=pick(rng, sorted(MASKS)), shift=int(rng.integers(-8, 9)))
    return p, 1


def run_masked_store(p, rng, gpu):
    import tileworkbench as tw
    kernel = tw.compile(_masked_store(**p), out_idx=[2])
    if gpu:
        return
    n = p["n"]
    q, k = randn(rng, (n, 64), p["dtype"]), randn(rng, (n, 64), p["dtype"])
    rows, cols = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    ref = np.where(MASKS[p["mask"]](rows, cols, p["shift"]), _gemm_ref(q, k, trans_b=True), 0.0)
    check(("S", kernel(q, k), ref, worst_tol(p["dtype"])))


family("masked_store")((draw_masked_store, run_masked_store))


def _pipelined_twice(blocks, first_stages, second_stages, dtype):
    """C = A^T B over ``2 * blocks`` 64-row blocks, the first half in one pipelined loop and the
    second in another, both through the same shared tiles (one allocation of their versions)."""
    T_ = T()
    rows = 128 * blocks

    @T_.prim_func
    def main(A: T_.Tensor((rows, 64), dtype), B: T_.Tensor((rows, 64), dtype), C: T_.Tensor((64, 64), "float32")):
        with T_.Kernel(1, threads=128):
            a = T_.alloc_shared((64, 64), dtype)
            b = T_.alloc_shared((64, 64), dtype)
            acc = T_.alloc_fragment((64, 64), "float32")
            T_.clear(acc)
            for s in T_.Pipelined(blocks, num_stages=first_stages):
                T_.copy(A[s * 64:(s + 1) * 64, :], a)
                T_.copy(B[s * 64:(s + 1) * 64, :], b)
                T_.gemm(a, b, acc, transpose_A=True)
            for s in T_.Pipelined(blocks, num_stages=second_stages):
                T_.copy(A[(blocks + s) * 64:(blocks + s + 1) * 64, :], a)
                T_.copy(B[(blocks + s) * 64:(blocks + s + 1) * 64, :], b)
                T_.gemm(a, b, acc, transpose_A=True)
            T_.copy(acc, C)

    return main


def draw_pipelined_twice(rng):
    p = dict(blocks=pick(rng, [1, 2, 3, 5]), first_stages=pick(rng, [0, 1, 2, 3]),
             second_stages=pick(rng, [0, 1, 2, 3]), dtype=pick(rng, ["float16", "bfloat16"]))
    return p, 2 * p["blocks"]


def run_pipelined_twice(p, rng, gpu):
    import tileworkbench as tw
    kernel = tw.compile(_pipelined_twice(**p), out_idx=[2])
    if gpu:
        return
    rows = 128 * p["blocks"]
    a, b = randn(rng, (rows, 64), p["dtype"]), randn(rng, (rows, 64), p["dtype"])
    check(("C", kernel(a, b), _gemm_ref(a, b, trans_a=True), worst_tol(p["dtype"])))


family("pipelined_twice")((draw_pipelined_twice, run_pipelined_twice))


def _tma_reduce(M, N, K, bm, bn, bk, splits, in_loop, dtype):
    """Split-K ``C += A B``: each of ``splits`` blocks of a tile adds its part through a float32
    shared tile with ``T.atomic_add(..., use_tma=True)`` (a TMA reduction where C's rows allow one,
    element atomics where not: N not a multiple of 4), once after its loop or (``in_loop``) each
    iteration's product, as TileLang's GQA backward adds dQ."""
    T_ = T()
    steps = cdiv(cdiv(K, bk), splits)

    @T_.prim_func
    def main(A: T_.Tensor((M, K), dtype), B: T_.Tensor((K, N), dtype), C: T_.Tensor((M, N), "float32")):
        with T_.Kernel(cdiv(N, bn), cdiv(M, bm), splits, threads=128) as (bx, by, bz):
            a = T_.alloc_shared((bm, bk), dtype)
            b = T_.alloc_shared((bk, bn), dtype)
            acc = T_.alloc_fragment((bm, bn), "float32")
            c_s = T_.alloc_shared((bm, bn), "float32")
            T_.clear(acc)
            for k in T_.Pipelined(steps, num_stages=2):
                T_.copy(A[by * bm, (bz * steps + k) * bk], a)
                T_.copy(B[(bz * steps + k) * bk, bx * bn], b)
                T_.gemm(a, b, acc, clear_accum=in_loop)
                if in_loop:
                    T_.copy(acc, c_s)
                    T_.atomic_add(C[by * bm, bx * bn], c_s, use_tma=True)
            if not in_loop:
                T_.copy(acc, c_s)
                T_.atomic_add(C[by * bm, bx * bn], c_s, use_tma=True)

    return main


def draw_tma_reduce(rng):
    for _ in range(50):
        bm, bn, bk = pick(rng, [16, 32, 64, 128]), pick(rng, [16, 32, 64, 128]), pick(rng, [16, 32, 64])
        p = dict(M=pick(rng, SIZES), N=pick(rng, SIZES), K=pick(rng, SIZES), bm=bm, bn=bn, bk=bk,
                 splits=pick(rng, [1, 2, 3]), in_loop=bool(rng.integers(0, 2)), dtype=pick(rng, ["float16", "bfloat16"]))
        cost = _steps_gemm(p["M"], p["N"], p["K"], bm, bn, bk)
        if cost <= MAX_STEPS:
            break
    return p, cost


def run_tma_reduce(p, rng, gpu):
    import tileworkbench as tw
    kernel = tw.compile(_tma_reduce(**p))
    if gpu:
        return
    a, b = randn(rng, (p["M"], p["K"]), p["dtype"]), randn(rng, (p["K"], p["N"]), p["dtype"])
    c = rng.standard_normal((p["M"], p["N"])).astype(np.float32)
    want = f64(c) + _gemm_ref(a, b)
    kernel(a, b, c)
    check(("C", c, want, 1e-4, 1e-4))


family("tma_reduce")((draw_tma_reduce, run_tma_reduce))


def _ws_reads(n, bm, bn, d, stages, epilogue, dtype):
    """O = sum_k exp2(K Q_k^T / 8 - L_k) Q_k for each row block of K, L_k loaded by the loop and read
    only by the work between its gemms (an attention backward's lse): the split that reads a loaded
    tile's stage version; ``epilogue`` float32 tiles the result passes through after the loop (the
    split's tiles placed by lifetime where they do not fit side by side)."""
    T_ = T()

    @T_.prim_func
    def main(K: T_.Tensor((n, d), dtype), Q: T_.Tensor((n, d), dtype), L: T_.Tensor((n,), "float32"),
             O: T_.Tensor((n, d), "float32")):
        with T_.Kernel(cdiv(n, bm), threads=256) as bx:
            k_s = T_.alloc_shared((bm, d), dtype)
            q = T_.alloc_shared((bn, d), dtype)
            l_s = T_.alloc_shared((bn,), "float32")
            s = T_.alloc_fragment((bm, bn), "float32")
            p = T_.alloc_fragment((bm, bn), dtype)
            acc = T_.alloc_fragment((bm, d), "float32")
            t1 = T_.alloc_shared((bm, d), "float32")
            t2 = T_.alloc_shared((bm, d), "float32")
            T_.copy(K[bx * bm:(bx + 1) * bm, :], k_s)
            T_.clear(acc)
            for k in T_.Pipelined(cdiv(n, bn), num_stages=stages):
                T_.copy(Q[k * bn:(k + 1) * bn, :], q)
                T_.copy(L[k * bn:(k + 1) * bn], l_s)
                T_.clear(s)
                T_.gemm(k_s, q, s, transpose_B=True)
                for i, j in T_.Parallel(bm, bn):
                    s[i, j] = T_.exp2(s[i, j] * 0.125 - l_s[j])
                T_.copy(s, p)
                T_.gemm(p, q, acc)
            if epilogue >= 1:
                T_.copy(acc, t1)
                for i, j in T_.Parallel(bm, d):
                    acc[i, j] = t1[i, j] + 1
            if epilogue >= 2:
                T_.copy(acc, t2)
                for i, j in T_.Parallel(bm, d):
                    acc[i, j] = t2[i, j] + 1
            T_.copy(acc, O[bx * bm:(bx + 1) * bm, :])

    return main


def draw_ws_reads(rng):
    p = dict(n=pick(rng, [128, 256, 384, 512]), bm=128, bn=pick(rng, [32, 64, 128]), d=pick(rng, [64, 128]),
             stages=pick(rng, [1, 2, 3]), epilogue=pick(rng, [0, 1, 2]), dtype=pick(rng, ["float16", "bfloat16"]))
    return p, cdiv(p["n"], p["bm"]) * cdiv(p["n"], p["bn"])


def run_ws_reads(p, rng, gpu):
    import tileworkbench as tw
    kernel = tw.compile(_ws_reads(**p))
    if gpu:
        return
    n, d = p["n"], p["d"]
    k, q = randn(rng, (n, d), p["dtype"]) * 0.5, randn(rng, (n, d), p["dtype"]) * 0.5
    k, q = k.astype(np_dtype(p["dtype"])), q.astype(np_dtype(p["dtype"]))
    lse = (rng.standard_normal(n) + 4).astype(np.float32)
    o = np.zeros((n, d), np.float32)
    kernel(k, q, lse, o)
    probs = np.exp2(f64(k) @ f64(q).T * 0.125 - f64(lse)[None, :])
    probs = f64(probs.astype(np_dtype(p["dtype"])))  # P as the second gemm reads it
    check(("O", o, probs @ f64(q) + p["epilogue"], worst_tol(p["dtype"])))


family("ws_reads")((draw_ws_reads, run_ws_reads))


def _tma_reduce_tiles(heads, seq, dim, rows, splits, threads):
    """Each block (row tile, head, split) scales its rows of a head of X (batch 2) by split + 1 in a
    shared tile and adds the tile into the same rows of Y with ``T.atomic_add(..., use_tma=True)``:
    a tensor map's ``(1, rows, 1, dim)`` box (a flat ``(seq, dim)`` tensor when ``heads`` is 0), the
    last row tile clipped where ``seq`` is no multiple of ``rows``; element atomics where ``dim`` is
    no multiple of 4. No gemm: the thread-level interpreter runs it too (``--threads``)."""
    T_ = T()
    flat = heads == 0
    shape = (seq, dim) if flat else (2, seq, heads, dim)

    @T_.prim_func
    def main(X: T_.Tensor(shape, "float32"), Y: T_.Tensor(shape, "float32")):
        with T_.Kernel(cdiv(seq, rows), max(heads, 1), (1 if flat else 2) * splits, threads=threads) as (bx, by, bz):
            s = T_.alloc_shared((rows, dim), "float32")
            if flat:
                T_.copy(X[bx * rows:(bx + 1) * rows, :], s)
            else:
                T_.copy(X[bz // splits, bx * rows:(bx + 1) * rows, by, :], s)
            for i, j in T_.Parallel(rows, dim):
                s[i, j] = s[i, j] * (bz % splits + 1)
            if flat:
                T_.atomic_add(Y[bx * rows:(bx + 1) * rows, :], s, use_tma=True)
            else:
                T_.atomic_add(Y[bz // splits, bx * rows:(bx + 1) * rows, by, :], s, use_tma=True)

    return main


def draw_tma_reduce_tiles(rng):
    p = dict(heads=pick(rng, [0, 1, 3]), seq=pick(rng, [8, 17, 32, 48, 100, 128]), dim=pick(rng, [4, 6, 8, 16, 32, 64, 100, 128]),
             rows=pick(rng, [8, 16, 32, 64]), splits=pick(rng, [1, 2, 3]), threads=pick(rng, [32, 64, 128]))
    return p, cdiv(p["seq"], p["rows"]) * max(p["heads"], 1) * 2 * p["splits"]


def run_tma_reduce_tiles(p, rng, gpu):
    import tileworkbench as tw
    kernel = tw.compile(_tma_reduce_tiles(**p))
    if gpu:
        return
    shape = (p["seq"], p["dim"]) if p["heads"] == 0 else (2, p["seq"], p["heads"], p["dim"])
    x, y = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    want = f64(y) + f64(x) * sum(range(1, p["splits"] + 1))
    # Y is added into, so each form runs on a copy of it ("both" would add twice into one)
    stages = ["lowered", "codegen"] if THREADS["stage"] == "both" else [THREADS["stage"]]
    for stage in stages:
        out = y.copy()
        with _threads_at(stage):
            at_threads(kernel)(x, out)
        check(("Y", out, want, 1e-5, 1e-5))


family("tma_reduce_tiles")((draw_tma_reduce_tiles, run_tma_reduce_tiles))


# pass configs a draw may compile under (a `with PassContext(config=...)` around it): the switches
# that choose the paths of the tile passes
CONFIGS = [{}] * 6 + [{"tl.disable_warp_specialized": True}, {"tl.disable_tma_lower": True}, {"tw.disable_wgmma": True},
                      {"tw.register_epilogue": True}, {"tw.disable_persistent": True}, {"tw.disable_rasterization": True},
                      {"tw.gemm_overlap": True}, {"tw.gemm_overlap": False}, {"tw.ws_tile_barriers": True},
                      {"tw.disable_matrix_stores": True}]


# ---- the sweep -------------------------------------------------------------------------------------


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def classify(fn, timeout):
    from tileworkbench.errors import CompileError, InternalCompilerError, KernelRuntimeError
    from tileworkbench.interpreter import Unsupported

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        fn()
        return "ok", ""
    except Timeout:
        return "TIMEOUT", ""
    except Mismatch as e:
        return "MISMATCH", str(e)
    except InternalCompilerError as e:
        return "INTERNAL", str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    except CompileError as e:
        return "refused", (str(e).strip().splitlines() or [""])[0]
    except Unsupported as e:
        return "unsupported", str(e).splitlines()[0]
    except KernelRuntimeError as e:
        msg = str(e).splitlines()[0]
        if "does not run" in msg or "interpreter runs" in msg or "interpreter does not" in msg:
            return "unsupported", msg
        return "RUNTIME", msg
    except Exception:
        tb = traceback.format_exc().strip().splitlines()
        return "EXCEPTION", "\n".join(tb[-6:])
    finally:
        signal.alarm(0)


def run_with_configs(run, p, rng, gpu):
    from tileworkbench.target import PassContext

    configs = p.get("configs") or {}
    params = {k: v for k, v in p.items() if k != "configs"}
    if not configs:
        return run(params, rng, gpu)
    with PassContext(config=configs):
        return run(params, rng, gpu)


def fmt(p):
    return " ".join(f"{k}={v}" for k, v in p.items())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default="", help="comma-separated; default all but " + ",".join(EXTRA_FAMILIES)
                    + ": " + ",".join(FAMILIES))
    ap.add_argument("--only", type=int, action="append", help="run just these draw indices (replay)")
    ap.add_argument("--family", help="with --params: run one given parameter set")
    ap.add_argument("--params", help="JSON parameters for --family")
    ap.add_argument("--gpu", action="store_true", help="compile for the GPU (NVRTC) instead of interpreting")
    ap.add_argument("--run-gpu", action="store_true",
                    help="compile for the GPU and run there, each output checked against its float64 reference")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--no-configs", action="store_true", help="draw no pass configs")
    ap.add_argument("--configs", default="", help="JSON pass configs added to every draw's (e.g. "
                    "'{\"tw.reread_thread_index\": true}' with --threads --stage both: the pass checked bit for bit)")
    ap.add_argument("--verbose", action="store_true", help="print the details of refusals too")
    ap.add_argument("--threads", action="store_true", help="run the final lowered IR on the thread-level interpreter")
    ap.add_argument("--stage", default="lowered", choices=["lowered", "codegen", "both"],
                    help="with --threads: the IR after the pipeline, after the codegen phase, or both compared")
    args = ap.parse_args(argv)
    _setup(args.gpu or args.run_gpu)
    if args.run_gpu:
        if args.gpu or args.threads:
            ap.error("--run-gpu runs on the GPU itself; leave out --gpu and --threads")
        _run_on_gpu()
    if args.threads:
        if args.gpu:
            ap.error("--threads runs on the CPU; leave out --gpu")
        THREADS["stage"] = args.stage

    names = [f.strip() for f in args.families.split(",") if f.strip()] or \
        [f for f in (THREAD_FAMILIES if args.threads else FAMILIES) if f not in EXTRA_FAMILIES]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; known: {list(FAMILIES)}")

    if args.family:
        jobs = [(0, args.family, json.loads(args.params))]
    else:
        jobs = []
        for i in range(args.examples):
            if args.only and i not in args.only:
                continue
            name = names[i % len(names)]
            drng = np.random.default_rng([args.seed, i])
            p, _cost = FAMILIES[name][0](drng)
            if not args.no_configs:
                p["configs"] = pick(drng, CONFIGS)
            if args.configs:
                p["configs"] = {**p.get("configs", {}), **json.loads(args.configs)}
            jobs.append((i, name, p))

    counts: dict = defaultdict(Counter)
    failures = []
    for i, name, p in jobs:
        run = FAMILIES[name][1]
        rng = np.random.default_rng([args.seed, i, 1])
        start = time.perf_counter()
        outcome, detail = classify(lambda: run_with_configs(run, p, rng, args.gpu), args.timeout)
        if args.gpu and outcome == "ok":
            outcome = "compiled"
        secs = time.perf_counter() - start
        counts[name][outcome] += 1
        print(f"[{i}] {name} {fmt(p)} -> {outcome} ({secs:.2f}s)", flush=True)
        if detail and (outcome not in ("refused", "unsupported") or args.verbose):
            print("    " + detail.replace("\n", "\n    "), flush=True)
        elif detail:
            print("    " + detail.splitlines()[0][:300], flush=True)
        if outcome in ("MISMATCH", "EXCEPTION", "RUNTIME", "INTERNAL", "TIMEOUT"):
            failures.append((i, name, p, outcome))

    outcomes = ["ok", "compiled", "refused", "unsupported", "MISMATCH", "RUNTIME", "INTERNAL", "EXCEPTION", "TIMEOUT"]
    used = [o for o in outcomes if any(c[o] for c in counts.values())]
    mode = ", GPU compile" if args.gpu else ", run on the GPU" if args.run_gpu else \
        f", thread level ({args.stage})" if args.threads else ""
    print("\nsummary (seed %d, %d draws%s)" % (args.seed, len(jobs), mode))
    print(f"{'family':18s}" + "".join(f"{o:>12s}" for o in used))
    for name in names:
        if counts[name]:
            print(f"{name:18s}" + "".join(f"{counts[name][o]:12d}" for o in used))
    print(f"{'total':18s}" + "".join(f"{sum(c[o] for c in counts.values()):12d}" for o in used))
    if failures:
        print("\nfailures (replay with --seed %d --only I):" % args.seed)
        for i, name, p, outcome in failures:
            print(f"  [{i}] {outcome} {name} --params '{json.dumps(p)}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
