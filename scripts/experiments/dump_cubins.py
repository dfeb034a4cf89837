"""Tool: write the cubins of the spec GEMM (plain and debug mode) and of the bench's
warp-specialised GEMM, to read their SASS.

Measures nothing: it lowers ``matmul_tma_copy`` (8192^3 fp16, 128x128x32, 128 threads, 2 stages,
warp specialisation off), the same in debug mode (``tw.debug_barrier_timeout`` 2 s) and the
persistent warp-specialised ``matmul`` (8192^3 fp16, 128x256x64, 3 stages, 256 threads: the
bench's pick at 4096^3 and 8192^3), compiles each with NVRTC for sm_90a and writes
``OUTDIR/<name>.cubin``. It needs no GPU.

Run (anywhere with NVRTC; on the H200 as well):

    PYTHONPATH=. python3 scripts/experiments/dump_cubins.py OUTDIR     # default OUTDIR: out
    cuobjdump -sass OUTDIR/spec_debug.cubin | less

Use: comparing the plain and the debug-mode SASS. BENCHMARKS.md ('Debug mode') records what that
reading found: ptxas keeps each bounded wait's out-of-line call and its argument set-up inside
the loop, where a plain wait's retry loop is moved out of it; ``__builtin_expect``,
``__attribute__((cold))`` and a loop around the call did not change that.
"""

import sys
from pathlib import Path

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples.gemm import matmul, matmul_tma_copy

out = Path(sys.argv[1] if len(sys.argv) > 1 else "out")
out.mkdir(parents=True, exist_ok=True)
spec = matmul_tma_copy(8192, 8192, 8192, 128, 128, 32, "float16", "float16", "float32", 128, 2)
no_ws = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
kernels = {"spec_plain": (spec, no_ws), "spec_debug": (spec, {**no_ws, tw.PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT: 2.0}),
           "ws_128x256_s3": (matmul(8192, 8192, 8192, 128, 256, 64, "float16", "float16", 3, 256), {})}
for name, (func, configs) in kernels.items():
    art = tw.lower(func, target={"kind": "cuda", "arch": "sm_90"}, pass_configs=configs)
    (out / f"{name}.cubin").write_bytes(compile_check(art.device_source, "sm_90a", f"{name}.cu").cubin)
    print(name, "written")
