"""Experiment: attention's epilogue in its two forms, side by side on the GPU.

Since `b8138b7` (session 32) the attention programs' staged result (``acc_o /= logsum``, then
``T.copy(acc_o, O_shared); T.copy(O_shared, Output)``) goes through a tile over the pipeline's
dead tiles: a consumer barrier first (every consumer past its last wgmma), ``stmatrix``, a fence
and a second barrier, then one elected thread's TMA store, which every thread waits to have read
the tile before the block exits. Before it (``tw.register_epilogue``, which keeps the user's
staging as written), ``O_shared`` had bytes of its own and the 256 consumer threads copied it out
with 16-byte stores, no wait. Session 35 measured the causal rows 5-6% slower than at `bafe46a`
(8192: 568 -> 535 TFLOP/s, head dim 64: 429 -> 408) while the non-causal ones gained 3-5%; the
kernels' CUDA differs only in that epilogue (and the header), and a causal block runs half the
iterations on average, so its epilogue weighs twice as much. This times both forms on the same
inputs (each checked against float32 first, 5 alternating rounds of ``profiler.do_bench``).

    PYTHONPATH=. python3 scripts/experiments/attention_epilogue_forms.py [ROW ...]

ROW is ``SEQxDIM`` with ``c`` for causal (default: 8192x128c 8192x128 8192x64c 4096x128c).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _compare import race_attention  # noqa: E402

from tileworkbench.bench.attention import compile_mha  # noqa: E402
from tileworkbench.target import PassConfigKey  # noqa: E402

ROWS = ["8192x128c", "8192x128", "8192x64c", "4096x128c"]


def main(rows: list) -> None:
    import torch

    for text in rows:
        causal = text.endswith("c")
        seq, dim = (int(x) for x in text.rstrip("c").split("x"))
        kernels = {
            "tma_store_over_pipeline": compile_mha(1, 16, seq, dim, causal),
            "own_tile_thread_copies": compile_mha(1, 16, seq, dim, causal,
                                                  pass_configs={PassConfigKey.TW_REGISTER_EPILOGUE: True}),
        }
        for name, kernel in kernels.items():
            tail = kernel.get_kernel_source()[-1500:]
            print(f"{text} {name}: {'TMA store' if 'tma_store' in tail else 'thread copies'}", flush=True)
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 16, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
        race_attention(kernels, q, k, v, causal, text, "tma_store_over_pipeline")


if __name__ == "__main__":
    main(sys.argv[1:] or ROWS)
