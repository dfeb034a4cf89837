"""Experiment: where a TileLang program's cold compile goes: our passes, NVRTC, and of NVRTC the
part before ptxas (the same source compiled to PTX only, for ``compute_90a``).

Runs without a GPU (NVRTC needs none). Each case of ``examples/tilelang_programs`` is compiled
with our disk cache off, after one warm-up compile so that one-time costs (imports, NVRTC's
library) land on none of them; the pass pipeline and each NVRTC call are timed where they run
(NVRTC in its own thread, beside the analyses), and each kernel's source is then compiled once
more to PTX alone.

    PYTHONPATH=. python3 scripts/experiments/compile_parts.py [family.case ...]
    PYTHONPATH=. python3 scripts/experiments/compile_parts.py --with-option=--Ofast-compile=min [family.case ...]

With ``--with-option=OPT`` each kernel is instead compiled with our NVRTC options and again with
``OPT`` added: seconds, ptxas's registers and spill bytes, and whether the cubin is the same
(docs/experiments.md: ``-Ofast-compile`` was tried this way).

Without arguments: the cases whose cold compile passed 0.5 s on the H200 at ``81dce62``
(BENCHMARKS.md, "Where each case stands"). Findings (CPU machine, 2026-12-04): lowering
0.05-0.15 s a kernel; NVRTC about 0.5 s for the big kernels, most of it ptxas (attention: 0.21 s
to PTX of 0.71 s to a cubin).
"""

import importlib
import os
import sys
import threading
import time

DEFAULT = ["flash_decoding.flash_decoding", "attention.attention_gqa", "hadamard.hadamard", "attention.attention",
           "attention_bwd.attention_bwd", "attention.attention_1stage", "blocksparse_gemm.blocksparse_gemm",
           "dynamic_shape.gemm_dynamic", "streamk_gemm.streamk_gemm"]


def ptx_seconds(source: str) -> float:
    """NVRTC's time to PTX alone (no ptxas) for ``source``."""
    from cuda.bindings import nvrtc

    from tileworkbench.backend.nvrtc import nvrtc_options

    options = [o if not o.startswith("--gpu-architecture") else "--gpu-architecture=compute_90a"
               for o in nvrtc_options("sm_90a") if o != "-Xptxas=-v"]
    _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    start = time.perf_counter()
    nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
    seconds = time.perf_counter() - start
    nvrtc.nvrtcDestroyProgram(prog)
    return seconds


def main(cases):
    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"
    from tileworkbench.backend import nvrtc as backend
    from tileworkbench.passes import manager

    lock, log = threading.Lock(), []
    run_pipeline, compile_check = manager.run_pipeline, backend.compile_check

    def timed_pipeline(*args, **kwargs):
        start = time.perf_counter()
        out = run_pipeline(*args, **kwargs)
        with lock:
            log.append(("passes", time.perf_counter() - start, None))
        return out

    def timed_nvrtc(source, *args, **kwargs):
        start = time.perf_counter()
        out = compile_check(source, *args, **kwargs)
        with lock:
            log.append(("nvrtc", time.perf_counter() - start, source))
        return out

    manager.run_pipeline, backend.compile_check = timed_pipeline, timed_nvrtc
    lower = importlib.import_module("tileworkbench.jit.lower")
    lower.run_pipeline = timed_pipeline
    importlib.import_module("tileworkbench.examples.tilelang_programs.gemm").CASES["gemm"]["compile"]()  # warm-up
    print("| case | whole s | passes s | NVRTC s (per kernel) | of it to PTX s |")
    print("| --- | --- | --- | --- | --- |")
    for name in cases:
        family, case = name.split(".")
        program = importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}")
        log.clear()
        start = time.perf_counter()
        program.CASES[case]["compile"]()
        whole = time.perf_counter() - start
        passes = sum(s for kind, s, _ in log if kind == "passes")
        nvrtc = [(s, src) for kind, s, src in log if kind == "nvrtc"]
        print(f"| {name} | {whole:.3f} | {passes:.3f} | {' + '.join(f'{s:.3f}' for s, _ in nvrtc)} | "
              f"{' + '.join(f'{ptx_seconds(src):.3f}' for _, src in nvrtc)} |", flush=True)


def compare_option(option: str, cases) -> None:
    """Each kernel of ``cases`` compiled with our options and with ``option`` added."""
    import re

    from cuda.bindings import nvrtc

    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"
    from tileworkbench.backend import nvrtc as backend

    sources, real = [], backend.compile_check

    def keep(source, *args, **kwargs):
        sources.append((current[0], source, kwargs.get("extra_options", ())))
        return real(source, *args, **kwargs)

    backend.compile_check, current = keep, [None]
    for name in cases:
        family, case = name.split(".")
        current[0] = name
        importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}").CASES[case]["compile"]()

    def compiled(source, options):
        _, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
        start = time.perf_counter()
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        seconds = time.perf_counter() - start
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        if int(status) != 0:
            raise SystemExit(f"NVRTC refused {options[-1]}: {log.decode(errors='replace').strip()[:300]}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        nvrtc.nvrtcDestroyProgram(prog)
        text = log.decode(errors="replace")
        return (seconds, cubin, re.findall(r"Used (\d+) registers", text),
                re.findall(r"(\d+) bytes spill stores", text))

    print(f"| kernel | s | s with {option} | registers | spill bytes | same cubin |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, source, extra in sources:
        base = list(backend.nvrtc_options("sm_90a", tuple(extra)))
        t0, c0, r0, s0 = compiled(source, base)
        t1, c1, r1, s1 = compiled(source, base + [option])
        print(f"| {name} | {t0:.3f} | {t1:.3f} | {','.join(r0)} -> {','.join(r1)} | {','.join(s0)} -> "
              f"{','.join(s1)} | {c0 == c1} |", flush=True)


if __name__ == "__main__":
    options = [a for a in sys.argv[1:] if a.startswith("--with-option=")]
    names = [a for a in sys.argv[1:] if not a.startswith("--with-option=")]
    if options:
        compare_option(options[0].split("=", 1)[1], names or DEFAULT)
    else:
        main(names or DEFAULT)
