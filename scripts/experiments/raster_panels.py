"""Experiment: does the raster panel size (block rows per panel, T.use_swizzle) move the persistent
warp-specialised 128x256x64 GEMM? The compiler's default is 10 (rasterize_blocks.AUTO_PANEL).

    PYTHONPATH=. python3 scripts/experiments/raster_panels.py

Measured on the H200, 2026-12-01 (TFLOP/s, 6 interleaved rounds, medians; panel: 2, 4, 8, 10, 16,
32): 4096^3 fp16 739.0 739.5 741.4 739.2 739.3 739.0 (cuBLAS 742.6); bf16 761.4 760.7 760.3
760.2 759.0 762.0 (764.3); 8192^3 fp16 675.5 672.8 663.5 663.2 670.6 669.0 (653.5); bf16 706.4
688.2 695.0 692.0 689.0 692.3 (688.4). No size is better everywhere: the default stays 10.
"""


from _compare import race

import tileworkbench as tw
import tileworkbench.language as T

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
    for n in sizes:
        for dtype in ("float16", "bfloat16"):
            race({f"panel {p}": tw.compile(gemm(n, dtype, p), out_idx=[2]) for p in PANELS}, n, dtype, rounds=6)


if __name__ == "__main__":
    main()
