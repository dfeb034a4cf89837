"""``python -m tileworkbench.bench interpreter``: how long the CPU interpreter takes to run kernels
(no GPU needed): the spec's TMA GEMMs and the GEMM candidates at 256^3, each checked against
float64 first, each run timed (median of three) against issue 19's bar of 5 s for the spec GEMM."""

from __future__ import annotations

import statistics
import time

import numpy as np

GOAL_S = 5.0


def rows(n: int = 256):
    from ..jit.kernel import compile as compile_kernel
    from .gemm import candidate_kernels, spec_kernels

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for c in list(spec_kernels(n, n, n)) + list(candidate_kernels(n, n, n, "float16")):
        kernel = compile_kernel(c.build(), out_idx=[2], target="cpu", pass_configs=c.pass_configs)
        out = kernel(a, b)
        err = float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())
        times = []
        for _ in range(3):
            start = time.perf_counter()
            kernel(a, b)
            times.append(time.perf_counter() - start)
        yield {"kernel": c.name, "n": n, "seconds": statistics.median(times), "rel_error": err,
               "correct": err < 2e-3}


def run(n: int = 256) -> int:
    print(f"| kernel ({n}^3 fp16, CPU interpreter) | seconds | goal {GOAL_S:.0f} s / seconds | rel. error | correct |")
    print("| --- | --- | --- | --- | --- |")
    ok = True
    for row in rows(n):
        ok &= row["correct"]
        print(f"| {row['kernel']} | {row['seconds']:.3f} | {GOAL_S / row['seconds']:.0f}x | {row['rel_error']:.1e} | "
              f"{'yes' if row['correct'] else 'NO'} |")
    return 0 if ok else 1
