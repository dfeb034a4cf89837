"""Experiment: T.copy GEMMs with warp specialisation (epilogue through a TMA store, or from
registers with tw.register_epilogue) and without, next to cuBLAS, same process.

    PYTHONPATH=. python3 scripts/experiments/ws_configs.py [sizes, default 4096,8192]

Every kernel's output is checked against a float32 reference first (NaN-poisoned output).
"""

import sys

import torch

import tileworkbench as tw
from tileworkbench.backend.timing import Timer, rel_err
from tileworkbench.examples.gemm import matmul

CONFIGS = [(128, 256, 64, 3, 256), (128, 256, 64, 4, 256), (256, 128, 64, 4, 256), (128, 128, 64, 4, 128)]
sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "4096,8192").split(",")]
timer = Timer()
for n in sizes:
    flops = 2.0 * n ** 3
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float())
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    t = timer.time(lambda: torch.matmul(a, b, out=c), 5, 30)
    cublas = t.tflops(flops)
    print(f"{n}^3 fp16 cuBLAS {cublas:6.1f} TFLOP/s", flush=True)
    for cfg in CONFIGS:
        row = []
        for ws_off in (False, "regs", True):
            try:
                k = tw.compile(matmul(n, n, n, *cfg[:3], "float16", "float16", cfg[3], cfg[4]), out_idx=[2],
                               pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: ws_off is True,
                                             tw.PassConfigKey.TW_REGISTER_EPILOGUE: ws_off == "regs"})
            except Exception as exc:  # noqa: BLE001 - an experiment: show and go on
                row.append(f"{ws_off}: {type(exc).__name__}: {str(exc)[:60]}")
                continue
            out = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
            k(a, b, out)
            err = rel_err(out, ref)
            tm = timer.time(lambda: k(a, b, out), 5, 30)
            name = {False: "ws", True: "no-ws", "regs": "ws, epilogue from registers"}[ws_off]
            row.append(f"{name}: {tm.tflops(flops):6.1f} ({tm.tflops(flops) / cublas:.2f}x, err {err:.1e})")
        print(f"  {cfg}: " + " | ".join(row), flush=True)
