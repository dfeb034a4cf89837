"""Experiment: the dynamic-shape GEMM's general form with its guarded copies unrolled 4 at a time.

The general form of TileLang's dynamic-shape example (``examples/tilelang_programs/dynamic_shape.py``,
any M, N, K) moves each tile element by element behind a bounds check, in round-robin loops of 32
iterations the code generator unrolls in full: 64 guarded loads a stage, 255 registers and 2 KB of
spills, 2.2 s of NVRTC on the CPU machine (most of the case's cold compile). Here the same source
with those loops as ``#pragma unroll 4`` (no spills, 0.7 s there), both checked against float32
on random inputs at a size the general form serves (4095^3 by default: no multiple of 8), then
timed in alternating rounds. Prints NVRTC's seconds, registers and spills of both.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/dynamic_unroll.py [size]
"""

import re
import statistics
import sys
import time

from _edited import edited_kernel


def unrolled_by_four(source: str) -> str:
    """The round-robin copy loops (``for (int it...``) unrolled 4 at a time instead of in full."""
    edited, count = re.subn(r"#pragma unroll\n(\s*for \(int it)", r"#pragma unroll 4\n\1", source)
    assert count >= 4, f"expected the four guarded copy loops, found {count}"
    return edited


def main():
    import torch

    from tileworkbench.backend.nvrtc import compile_check
    from tileworkbench.examples.tilelang_programs.dynamic_shape import CONFIG, matmul_dynamic_mnk
    from tileworkbench.profiler import do_bench

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 4095
    general = matmul_dynamic_mnk.compile(**CONFIG).general
    sources = {"as compiled (full unroll)": general.record["device_source"]}
    sources["unroll 4"] = unrolled_by_four(sources["as compiled (full unroll)"])
    kernels = {}
    for label, source in sources.items():
        start = time.perf_counter()
        built = compile_check(source, "sm_90a", general.record["kernel_name"])
        print(f"{label}: NVRTC {time.perf_counter() - start:.2f} s, {built.registers} registers, "
              f"{built.spills_bytes} bytes spilled")
        kernels[label] = general if label.startswith("as compiled") else \
            edited_kernel(general, source, out_idx=general.out_idx)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    results = {}
    for label, kernel in kernels.items():
        results[label] = kernel(a, b)
        torch.testing.assert_close(results[label].float(), ref, rtol=1e-2, atol=1e-2)
    same = torch.equal(*results.values())
    times = {label: [] for label in kernels}
    for _ in range(5):
        for label, kernel in kernels.items():
            times[label].append(do_bench(lambda k=kernel: k(a, b), warmup=25, rep=100, return_mode="median"))
    base = statistics.median(times["as compiled (full unroll)"])
    for label, samples in times.items():
        ms = statistics.median(samples)
        print(f"{label}: {ms:.4f} ms, {2 * size ** 3 / ms / 1e9:.0f} TFLOP/s, {base / ms:.3f}x; same bits: {same}")


if __name__ == "__main__":
    main()
