"""Experiment: the dynamic-shape GEMM's general form with its guarded copies unrolled 4 at a time.

The general form of TileLang's dynamic-shape example (``examples/tilelang_programs/dynamic_shape.py``,
any M, N, K) moves each tile element by element behind a bounds check, in round-robin loops of 32
iterations the code generator unrolled in full: 64 guarded loads a stage, 255 registers and 2 KB of
spills, 2.2 s of NVRTC on the CPU machine (most of the case's cold compile). Here the same source
with those loops unrolled in full and as ``#pragma unroll 4`` (no spills, 0.7 s there), both checked against float32
on random inputs at a size the general form serves (4095^3 by default: no multiple of 8), then
timed in alternating rounds. Prints NVRTC's seconds, registers and spills of both.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/dynamic_unroll.py [size]

Conclusion (H200, 2026-12-03, commit b64c168, when the compiler still unrolled them in full;
4095^3, median of 5 rounds, same bits): in full 19.01 ms (7 TFLOP/s), NVRTC 1.74 s, 255 registers,
1944 bytes spilled; by four 12.07 ms (11 TFLOP/s, 1.575x), NVRTC 0.49 s, 241 registers, no spills.
So the code generator now unrolls such loops by four (``passes/resolve_int_arithmetic.py``'s
``GUARDED_UNROLL``); the script writes both variants from whichever source it compiles.
"""

import re
import sys
import time

from _compare import alternating_medians
from _edited import edited_kernel


def with_copy_unroll(source: str, pragma: str) -> str:
    """The round-robin copy loops (``for (int it...``) under ``pragma`` instead of their own."""
    edited, count = re.subn(r"#pragma unroll(?: 4)?\n(\s*for \(int it)", pragma + r"\n\1", source)
    assert count >= 4, f"expected the four guarded copy loops, found {count}"
    return edited


def main():
    import torch

    from tileworkbench.backend.nvrtc import compile_check
    from tileworkbench.examples.tilelang_programs.dynamic_shape import CONFIG, matmul_dynamic_mnk

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 4095
    general = matmul_dynamic_mnk.compile(**CONFIG).general
    compiled = general.record["device_source"]
    sources = {"in full": with_copy_unroll(compiled, "#pragma unroll"),
               "by four": with_copy_unroll(compiled, "#pragma unroll 4")}
    kernels = {}
    for label, source in sources.items():
        start = time.perf_counter()
        built = compile_check(source, "sm_90a", general.record["kernel_name"])
        print(f"{label}: NVRTC {time.perf_counter() - start:.2f} s, {built.registers} registers, "
              f"{built.spills_bytes} bytes spilled")
        kernels[label] = edited_kernel(general, source, out_idx=general.out_idx)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    results = {}
    for label, kernel in kernels.items():
        results[label] = kernel(a, b)
        torch.testing.assert_close(results[label].float(), ref, rtol=1e-2, atol=1e-2)
    same = torch.equal(*results.values())
    medians = alternating_medians({label: (lambda k=kernel: k(a, b)) for label, kernel in kernels.items()})
    base = medians["in full"]
    for label, ms in medians.items():
        print(f"{label}: {ms:.4f} ms, {2 * size ** 3 / ms / 1e9:.0f} TFLOP/s, {base / ms:.3f}x; same bits: {same}")


if __name__ == "__main__":
    main()
