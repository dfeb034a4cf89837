"""Spec GEMM kernels with and without the per-iteration proxy fence, same process (a tuning
experiment for passes/elide_proxy_fences.py)."""

import torch

import tileworkbench as tw
from tileworkbench.examples import matmul_tma_copy, matmul_tma_copy_store

for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    for builder in (matmul_tma_copy, matmul_tma_copy_store):
        for stages in (2, 3):
            row = []
            for keep in (True, False):
                cfg = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True, tw.PassConfigKey.TW_KEEP_PROXY_FENCES: keep}
                k = tw.compile(builder(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, stages),
                               out_idx=[2], pass_configs=cfg)
                err = ((k(a, b).float() - ref).norm() / ref.norm()).item()
                ms = k.get_profiler().do_bench(inputs=[a, b])
                row.append(f"fence={'kept' if keep else 'elided'}: {2 * n**3 / ms / 1e9:6.1f} TFLOP/s (err {err:.1e})")
            print(n, builder.__name__, f"s{stages}", " | ".join(row), flush=True)
