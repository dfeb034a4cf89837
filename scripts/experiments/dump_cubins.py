"""Write the cubins of the spec GEMM (plain and debug mode) and of the best warp-specialised
GEMM, for `cuobjdump -sass` on the GPU machine:  PYTHONPATH=. python3 scripts/experiments/dump_cubins.py OUTDIR"""

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
           "ws_128x256": (matmul(8192, 8192, 8192, 128, 256, 64, "float16", "float16", 4, 256), {})}
for name, (func, configs) in kernels.items():
    art = tw.lower(func, target={"kind": "cuda", "arch": "sm_90"}, pass_configs=configs)
    (out / f"{name}.cubin").write_bytes(compile_check(art.device_source, "sm_90a", f"{name}.cu").cubin)
    print(name, "written")
