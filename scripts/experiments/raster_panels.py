"""Experiment: does the raster panel size (block rows per panel, T.use_swizzle) move the persistent
warp-specialised 128x256x64 GEMM? The compiler's default is 10 (rasterize_blocks.AUTO_PANEL).

    PYTHONPATH=. python3 scripts/experiments/raster_panels.py

Measured on the H200, 2026-12-01 (TFLOP/s, 6 interleaved rounds, medians; panel: 2, 4, 8, 10, 16,
32): 4096^3 fp16 739.0 739.5 741.4 739.2 739.3 739.0 (cuBLAS 742.6); bf16 761.4 760.7 760.3
760.2 759.0 762.0 (764.3); 8192^3 fp16 675.5 672.8 663.5 663.2 670.6 669.0 (653.5); bf16 706.4
688.2 695.0 692.0 689.0 692.3 (688.4). No size is better everywhere: the default stays 10.
"""

import statistics

import torch

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.bench.timing import Timer, rel_err

PANELS = (2, 4, 8, 10, 16, 32)


def gemm(n, dtype, panel):
    @T.prim_func
    def main(A: T.Tensor((n, n), dtype), B: T.Tensor((n, n), dtype), C: T.Tensor((n, n), dtype)):
        with T.Kernel(T.ceildiv(n, 256), T.ceildiv(n, 128), threads=256) as (bx, by):
            T.use_swizzle(panel_size=panel)
            A_shared = T.alloc_shared((128, 64), dtype)
            B_shared = T.alloc_shared((64, 256), dtype)
            C_local = T.alloc_fragment((128, 256), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(n, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], A_shared)
                T.copy(B[k * 64, bx * 256], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 256])

    return main


def main(sizes=(4096, 8192)):
    timer = Timer()
    for n in sizes:
        for dtype, tdt in (("float16", torch.float16), ("bfloat16", torch.bfloat16)):
            kernels = {p: tw.compile(gemm(n, dtype, p), out_idx=[2]) for p in PANELS}
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = a.float() @ b.float()
            c = torch.empty(n, n, device="cuda", dtype=tdt)
            for k in kernels.values():
                out = torch.full((n, n), float("nan"), device="cuda", dtype=tdt)
                k(a, b, out)
                assert rel_err(out, ref) < 1e-2
            flops = 2.0 * n ** 3
            names = ["cublas", *kernels]
            fns = {"cublas": lambda: torch.matmul(a, b, out=c)} | {p: (lambda k=k: k(a, b, c)) for p, k in kernels.items()}
            times = {name: [] for name in names}
            for r in range(6):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    times[name].append(timer.time(fns[name], 3, 10).tflops(flops))
            line = "  ".join(f"{name}: {statistics.median(v):.1f}" for name, v in times.items())
            print(f"{n} {dtype} {line}", flush=True)


if __name__ == "__main__":
    main()
