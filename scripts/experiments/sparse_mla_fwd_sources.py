"""Experiment: DeepSeek v3.2's sparse MLA forward as this compiler generates it now, beside another
source for the same kernel (another commit's, saved with ``get_kernel_source()``), on the same
inputs in one process: both checked against the script's own reference, then timed in alternating
rounds of ``profiler.do_bench``.

    PYTHONPATH=. python3 scripts/experiments/sparse_mla_fwd_sources.py EXAMPLES OTHER.cu [LABEL [BASE.cu]]

EXAMPLES is TileLang's ``examples`` folder (the script and its ``utils.py`` are loaded from
``deepseek_v32/``), OTHER.cu the other source (same parameters and shared-memory layout: the
launcher is this commit's); with BASE.cu, the source OTHER.cu was edited from, it says whether
that is still this commit's. Session 36 read the kernel at ``4bbc760`` (session 26: 256 TFLOP/s)
and at ``16c53ab`` (242) on the CPU: fewer instructions now (docs/experiments.md); this says
whether the sources differ in speed on one host.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _edited import causal_indices, edited_kernel  # noqa: E402


def main(examples: Path, other: Path, label: str) -> None:
    import torch

    import tilelang_examples as te
    from tileworkbench.profiler import do_bench

    te._install(examples)
    sys.path.insert(0, str(examples / "deepseek_v32"))
    m = te._load(examples / "deepseek_v32" / "sparse_mla_fwd.py")
    B, S, SKV, H, HKV, DQK, topk = 1, 4096, 8192, 128, 1, 576, 2048  # the script's defaults
    torch.manual_seed(0)
    q = torch.randn((B, S, H, DQK), dtype=torch.bfloat16, device="cuda")
    kv = torch.randn((B, SKV, HKV, DQK), dtype=torch.bfloat16, device="cuda")
    indices = causal_indices(torch, S, SKV, HKV, topk)
    args = (q, kv, indices, H, 512, DQK - 512, topk, HKV)
    ours = m.sparse_mla_fwd.compile(*args)
    if len(sys.argv) > 4:  # the source OTHER.cu was edited from: still this commit's?
        print("the edit's base is this commit's source:", Path(sys.argv[4]).read_text() == ours.get_kernel_source())
    kernels = {"now": ours,
               label: edited_kernel(ours, other.read_text(), out_idx=ours.out_idx)}
    want = m.ref_sparse_mla_fwd_interface(q, kv, indices)
    for name, kernel in kernels.items():
        out, _ = kernel(q, kv, indices)
        m.assert_tensors_similar(out, want, eps=1e-2, name=f"out ({name})")
    times = {name: [] for name in kernels}
    for _ in range(5):
        for name, kernel in kernels.items():
            times[name].append(do_bench(lambda kernel=kernel: kernel(q, kv, indices), warmup=25, rep=100))
    flops = B * S * (DQK + 512) * topk * 2 * H
    base = statistics.median(times["now"])
    for name, samples in times.items():
        ms = statistics.median(samples)
        print(f"sparse_mla_fwd {name:8s} {ms:.3f} ms  {flops / ms / 1e9:6.1f} TFLOP/s  {base / ms:.3f}x of now",
              flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "other")
