"""``make demo``: the main job, end to end.

1. Lower the spec's GEMM (``matmul_tma_copy``, 2 pipeline stages) and print the pass list.
2. NVRTC-compile the generated CUDA for sm_90a (no GPU needed) and write the device source,
   the host launcher, the trace JSON and the workbench report to ``--out``.
3. On a GPU: run the kernel, check it against torch on random data, and print its TFLOP/s next
   to cuBLAS's, measured in the same run.
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


def run_on_gpu(size: int) -> None:
    import torch

    kernel = compile(spec_gemm(size), out_idx=[2], pass_configs=CONFIGS)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    c = kernel(a, b)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).norm() / ref.norm()).item()
    ok = err < 2e-3
    profiler = kernel.get_profiler()
    ours = profiler.do_bench(inputs=[a, b])
    cublas = profiler.do_bench(lambda: torch.matmul(a, b))
    flops = 2 * size**3
    print(f"\nOn {torch.cuda.get_device_name()}: relative error {err:.2e} ({'ok' if ok else 'WRONG'})")
    print(f"  tileworkbench spec GEMM: {flops / ours / 1e9:7.1f} TFLOP/s ({ours:.3f} ms)")
    print(f"  cuBLAS (torch.matmul):   {flops / cublas / 1e9:7.1f} TFLOP/s ({cublas:.3f} ms)")
    print(f"  ratio: {ratio_text(cublas / ours)}x cuBLAS")
    if not ok:
        raise SystemExit("the GEMM's result does not match the reference")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tileworkbench.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="out", help="folder for the generated sources and the report")
    parser.add_argument("--size", type=int, default=4096, help="M = N = K of the GEMM")
    args = parser.parse_args(argv)
    write_artifacts(Path(args.out), args.size)
    if detect_arch() is None:
        print("\nNo GPU here: lowering, code generation and the NVRTC compile-check ran; "
              "run `make demo` on a machine with an H100/H200 to execute and time the kernel.")
        return 0
    run_on_gpu(args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
