"""``make demo``: the main job, end to end.

1. Lower the spec's GEMM (``matmul_tma_copy``, 2 pipeline stages) and print the pass list.
2. NVRTC-compile the generated CUDA for sm_90a (no GPU needed) and write the device source,
   the host launcher, the trace JSON and the workbench report to ``--out``.
3. On a GPU: run the spec kernel and our fastest GEMM on random CuPy inputs, check each against
   float32, and print their TFLOP/s next to cuBLAS's (``cupy.matmul``), measured in the same run.
   Without one: run the spec kernel at 256^3 on the CPU interpreter and check it against float64.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .jit.kernel import compile
from .jit.lower import lower
from .target import PassConfigKey, detect_arch
from .bench.table import ratio_text
from .examples.gemm import matmul_tma_copy

SM90 = {"kind": "cuda", "arch": "sm_90"}
CONFIGS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def spec_gemm(size: int, stages: int = 2):
    return matmul_tma_copy(size, size, size, 128, 128, 32, "float16", "float16", "float32", 128, stages)


def write_artifacts(out: Path, size: int) -> None:
    start = time.perf_counter()
    # enable_device_compile: NVRTC for sm_90a (no GPU needed); registers and spills go into the trace
    artifact = lower(spec_gemm(size), target=SM90, pass_configs=CONFIGS, enable_device_compile=True)
    seconds = time.perf_counter() - start
    print(f"Lowered the spec GEMM ({size}^3, 2 stages): {len(artifact.trace.passes)} passes\n")
    print(artifact.trace.summary())
    res = artifact.trace.resources
    print(f"\nNVRTC sm_90a: {res['registers']} registers, {res['spills_bytes']} bytes spilled; "
          f"lowering + NVRTC {seconds * 1e3:.0f} ms")
    out.mkdir(parents=True, exist_ok=True)
    (out / "matmul_tma_copy.cu").write_text(artifact.device_source)
    (out / "matmul_tma_copy_host.py").write_text(artifact.host_source)
    (out / "matmul_tma_copy.trace.json").write_text(json.dumps(artifact.trace.to_dict(), indent=1))
    report = out / "report.html"
    try:
        from .report import write_report
    except ImportError:
        from .cli import write_report  # type: ignore[no-redef]
    write_report(artifact, report)
    print(f"Wrote {out}/matmul_tma_copy.cu, matmul_tma_copy_host.py, matmul_tma_copy.trace.json, {report.name}")


def gpu_kernels(size: int) -> list:
    """(label, kernel) for each GEMM the demo times: the spec's kernel as the spec runs it, and
    our fastest tile for this size (the GEMM suite's winner at 4096^3: 128x256x64, 3 stages, 256
    threads, warp-specialised and persistent)."""
    from .bench.gemm import Config, matmul_candidate

    best = matmul_candidate(size, size, size, "float16", Config(128, 256, 64, 3, 256))
    return [("spec GEMM (matmul_tma_copy, 128x128x32, 2 stages, no warp specialisation)",
             compile(spec_gemm(size), out_idx=[2], pass_configs=CONFIGS)),
            (f"{best.name} (warp-specialised, persistent)", compile(best.build(), out_idx=[2]))]


def run_on_gpu(size: int) -> None:
    """Each kernel checked against float32 on random inputs, then timed next to cuBLAS
    (``cupy.matmul``) in the same process: CuPy is what ``make demo`` installs (torch is not)."""
    import cupy

    from .backend.timing import do_bench, rel_err

    rng = cupy.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    b = rng.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    ref = a.astype(cupy.float32) @ b.astype(cupy.float32)
    cublas = do_bench(lambda: cupy.matmul(a, b))
    flops = 2 * size**3
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    print(f"\nOn {props['name'].decode()}, {size}^3 fp16 (float32 accumulation), random inputs:")
    print(f"  {'cuBLAS (cupy.matmul)':<76} {flops / cublas / 1e9:7.1f} TFLOP/s")
    wrong = []
    for label, kernel in gpu_kernels(size):
        err = rel_err(kernel(a, b), ref)
        ms = do_bench(lambda k=kernel: k(a, b))
        ok = err < 2e-3
        wrong += [] if ok else [label]
        print(f"  {label:<76} {flops / ms / 1e9:7.1f} TFLOP/s  {ratio_text(cublas / ms)}x cuBLAS  "
              f"(relative error {err:.1e}{'' if ok else ', WRONG'})")
    if wrong:
        raise SystemExit(f"results do not match the float32 reference: {', '.join(wrong)}")


def run_on_cpu(size: int = 256) -> None:
    """The spec kernel on the CPU interpreter (its pipeline and barriers as the GPU runs them),
    checked against float64; not timed (interpreter results are no GPU's)."""
    import numpy as np

    kernel = compile(spec_gemm(size), out_idx=[2], target="cpu", pass_configs=CONFIGS)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(np.float16) for _ in range(2))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(kernel(a, b).astype(np.float64) - ref).max() / np.abs(ref).max())
    print(f"\nCPU interpreter (not a GPU): the spec GEMM at {size}^3 is within {err:.1e} of float64 "
          "(relative to the largest value)")
    if err > 2e-3:
        raise SystemExit("the CPU interpreter's result does not match the float64 reference")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tileworkbench.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out", help="folder for the generated sources and the report")
    parser.add_argument("--size", type=int, default=4096, help="M = N = K of the GEMM")
    args = parser.parse_args(argv)
    write_artifacts(Path(args.out), args.size)
    if detect_arch() is None:
        run_on_cpu()
        print("\nNo GPU here: lowering, code generation and the NVRTC compile-check ran, and the CPU interpreter "
              "ran the kernel; run `make demo` on a machine with an H100/H200 to execute and time it on the GPU.")
        return 0
    run_on_gpu(args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
