"""Experiment: which kernels cuBLAS runs for the bench's shapes, and at what clock and power.

Measures: part 1, torch.profiler (CUPTI) around torch.matmul and cupy.matmul for each shape and
dtype, printing each kernel launched with its launch geometry (name, grid, block, shared memory,
registers); part 2, ours (the bench's 128x256x64 s3 persistent kernel) and torch.matmul each run
back to back for ~2 s while nvidia-smi samples the SM clock and board power every 50 ms,
printing the medians per phase.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/cublas_kernels.py [shapes, default 4096,8192]

Conclusion (H200, 2026-12-01, commit 088deb9): every large GEMM, cuBLAS's and ours, runs at the
board's ~650 W power limit with the SM clock far under its 1980 MHz top, so their times are set
by energy per tile, not issue rate; per clock ours does at least as much work as cuBLAS at every
shape. cuBLAS runs persistent ``nvjet_sm90`` kernels on 132 blocks in clusters of two (256x128
tiles, 4 stages at 4096^3; 320x128, 3 stages at 8192^3). This is what the runtime's
``balanced_blocks`` rests on (``persistent_grid_size.py``), and BENCHMARKS.md's 'What moved
4096^3: the GPU's power limit'.

Why it was asked: at 8192^3 ours led cuBLAS by 1-5%, at 4096^3 it trailed by 0.1-1%, although
4096^3 wastes more of its last wave (512 tiles on 132 multiprocessors, 12% of the fourth wave
empty) than 8192^3 does (2048 tiles, 0.8%). If cuBLAS ran a kernel like ours at both sizes, the
lead should be the same. So: what does it launch, and does either kernel run below the GPU's top
clock (power limit) at 4096^3?

Measured on the H200, 2026-12-01 (cuBLAS 13 through torch 2.11 and CuPy 14.2; CuPy's fp16 calls
launch the same kernels as torch's):

    shape             cuBLAS kernel (fp16 "hsh", bf16 "tst")        grid     block  smem    us fp16 / bf16
    4096^3            nvjet_sm90_*_256x128_64x4_1x2_h_bz_coopA_NNT  2x66x1   384    213188  181.5 / 176.0
    8192^3            nvjet_sm90_*_320x128_64x3_1x2_h_bz_coopB_NNT  2x66x1   384    188636  1440 / 1384
    4096x14336x4096   nvjet_sm90_*_320x128_64x3_1x2_h_bz_coopB_NNT  2x66x1   384    188636  628 / 601

So cuBLAS runs a persistent grid of 132 blocks in clusters of two, like ours: at 4096^3 256x128
tiles (the same 512 tiles as our 128x256, so the same partial last wave) with 4 stages of
64-deep K and a ~21 KB epilogue buffer; at 8192^3 320x128 tiles with 3 stages.

Clock and power, each kernel back to back for 2 s (cuBLAS first, then ours; medians of ~38
samples):

    shape   dtype  cuBLAS MHz / W   ours MHz / W
    4096^3  fp16   1470 / 653       1462 / 650
    4096^3  bf16   1538 / 652       1500 / 644
    8192^3  fp16   1425 / 652       1425 / 651
    8192^3  bf16   1485 / 669       1478 / 654
    4096x14336x4096 fp16  1425 / 649  1425 / 646
    4096x14336x4096 bf16  1485 / 655  1500 / 655

The smaller shapes, same day (`cublas_kernels.py 1024,2048,16x4096x4096`):

    1024^3        nvjet_sm90_*_128x64_64x8_1x2_h_bz_NNT           2x64x1   384    213268  5.4-5.8
    2048^3        nvjet_sm90_*_256x128_64x4_1x2_h_bz_coopA_NNT    2x64x1   384    213188  23.7-24.1
    16x4096x4096  nvjet_sm90_hsh_128x16_64x11_4x1_v_bz_splitK_NNT (fp16), *_tst_64x16_64x16_2x1_*
                  (bf16), each followed by cublasLt::splitKreduce_kernel                7.2-7.8

At 1024^3 and 16x4096x4096 both run at the top clock (1980 MHz, 180-220 W); at 2048^3 cuBLAS
reaches the power limit (1755-1815 MHz, ~650 W) and ours does not (1980 MHz, ~510 W).

Every large kernel runs at the board's power limit (~650 W) with the SM clock far under its 1980 MHz
top, so these GEMMs are decided by energy per tile, not by issue rate; the clock is within 0.5%
for both at 4096^3 fp16, and 2.5% lower for ours at bf16 (which ran second, on a warmer GPU,
every time). Per clock, ours does at least as much work as cuBLAS at every shape.
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time

import tileworkbench as tw
from tileworkbench.bench.gemm import parse_shapes
from tileworkbench.examples import matmul


def cublas_launches(fn) -> list[dict]:
    """Kernels ``fn`` launches (after one warm-up call), from a torch.profiler trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    out = []
    for e in events:
        if e.get("cat") == "kernel":
            args = e.get("args", {})
            out.append({"name": e["name"], "us": e.get("dur"), "grid": args.get("grid"), "block": args.get("block"),
                        "smem": args.get("shared memory"), "regs": args.get("registers per thread")})
    return out


def sample_clocks(run, seconds: float = 2.0) -> dict:
    """Median SM clock (MHz) and power (W) while ``run`` is called repeatedly for ``seconds``."""
    import torch

    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)  # let nvidia-smi start sampling before the load begins
        start = time.perf_counter()
        calls = 0
        while time.perf_counter() - start < seconds:
            for _ in range(20):
                run()
            calls += 20
            torch.cuda.synchronize()
    finally:
        smi.terminate()
    lines = [ln.split(",") for ln in smi.communicate()[0].splitlines() if ln.count(",") == 1]
    # drop the idle samples before the load starts and after it ends: keep the busy middle
    busy = [(float(c), float(p)) for c, p in lines][6:-2]
    return {"clock_mhz": statistics.median(c for c, _ in busy) if busy else None,
            "power_w": statistics.median(p for _, p in busy) if busy else None, "samples": len(busy)}


def main():
    import cupy
    import torch

    shapes = parse_shapes(sys.argv[1] if len(sys.argv) > 1 else "4096,8192")
    for M, N, K in shapes:
        for dtype in ("float16", "bfloat16"):
            tdt = getattr(torch, dtype)
            a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(K, N, device="cuda", dtype=tdt)
            c = torch.empty(M, N, device="cuda", dtype=tdt)
            paths = {"torch": lambda: torch.matmul(a, b, out=c)}
            if dtype == "float16":
                ca, cb, cc = cupy.asarray(a), cupy.asarray(b), cupy.asarray(c)
                paths["cupy"] = lambda: cupy.matmul(ca, cb, out=cc)
            for path, fn in paths.items():
                for launch in cublas_launches(fn):
                    print(f"{M}x{N}x{K} {dtype} {path}: {launch}", flush=True)

    print("\nclock and power, each kernel run back to back for 2 s:", flush=True)
    for M, N, K in shapes:
        for dtype in ("float16", "bfloat16"):
            tdt = getattr(torch, dtype)
            a, b = torch.randn(M, K, device="cuda", dtype=tdt), torch.randn(K, N, device="cuda", dtype=tdt)
            c = torch.empty(M, N, device="cuda", dtype=tdt)
            ours = tw.compile(matmul(M, N, K, 128, 256, 64, dtype, dtype, 3, 256), out_idx=[2])
            for name, run in {"cublas": lambda: torch.matmul(a, b, out=c), "ours": lambda: ours(a, b, c)}.items():
                s = sample_clocks(run)
                print(f"{M}x{N}x{K} {dtype} {name:6s} SM clock {s['clock_mhz']} MHz, power {s['power_w']} W "
                      f"({s['samples']} samples)", flush=True)


if __name__ == "__main__":
    main()
