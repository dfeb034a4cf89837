"""The spec's GEMM kernels with one pass config off and on, timed in the same process.

    PYTHONPATH=. python3 scripts/compare_configs.py tw.keep_proxy_fences
    PYTHONPATH=. python3 scripts/compare_configs.py tw.disable_rasterization

A tuning experiment: same inputs, same process, so the difference is not run-to-run noise.
"""

import sys

import torch

import tileworkbench as tw
from tileworkbench.examples import matmul_tma_copy, matmul_tma_copy_store

key = sys.argv[1] if len(sys.argv) > 1 else "tw.keep_proxy_fences"
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    for builder in (matmul_tma_copy, matmul_tma_copy_store):
        for stages in (2, 3):
            row = []
            for value in (False, True):
                cfg = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True, key: value}
                k = tw.compile(builder(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, stages),
                               out_idx=[2], pass_configs=cfg)
                err = ((k(a, b).float() - ref).norm() / ref.norm()).item()
                ms = k.get_profiler().do_bench(inputs=[a, b])
                row.append(f"{key}={value}: {2 * n**3 / ms / 1e9:6.1f} TFLOP/s (err {err:.1e})")
            print(n, builder.__name__, f"s{stages}", " | ".join(row), flush=True)
