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
inputs (each checked against float32 first, 5 alternating rounds of ``profiler.do_bench``), and on
causal rows each form again with the intra-warpgroup overlap (``tw.gemm_overlap``) asked for; and a
third and fourth form edited by hand (``own_tile_store``): the own tile stored by one bulk store
(the shipped form without its first barrier), and by each consumer warpgroup on its own.

    PYTHONPATH=. python3 scripts/experiments/attention_epilogue_forms.py [ROW ...]

ROW is ``SEQxDIM`` with ``c`` for causal (default: 8192x128c 8192x128 8192x64c 4096x128c).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _compare import race_attention  # noqa: E402
from _edited import edited_kernel  # noqa: E402

from tileworkbench.bench.attention import compile_mha  # noqa: E402
from tileworkbench.target import PassConfigKey  # noqa: E402

ROWS = ["8192x128c", "8192x128", "8192x64c", "4096x128c"]


_THREAD_COPIES = re.compile(
    r"    tw::fence_proxy_async\(\);\n    tw::sync_consumers<256>\(\);\n    #pragma unroll\n"
    r"    for \(int it_1 = 0; it_1 < \d+; \+\+it_1\) \{\n.*?tw::copy_vec<16>\(\(&Output\[(.*?)\]\), "
    r"\(&O_shared\[.*?\]\)\);\n    \}\n", re.S)


def own_tile_store(source: str, dim: int, per_warpgroup: bool) -> str:
    """The own-tile form's epilogue with its thread copies replaced by bulk stores (edited by hand):
    after its ``stmatrix`` and fence, either the consumers' barrier and one thread's store of the
    whole tile (``per_warpgroup=False``: the shipped form's store, without its first barrier, since
    the tile has bytes of its own), or each consumer warpgroup's barrier of its 128 threads (named
    barriers 2 and 3) and one store of its own 64 rows (FlashAttention-3's epilogue, no barrier
    across the two); the storing thread waits for the store to have read the tile."""
    match = _THREAD_COPIES.search(source)
    if match is None:
        raise SystemExit("the own-tile form's thread copies were not found")
    if per_warpgroup:
        row, sync, who, rows = ("((tx / 128) * 64)", "if (tx < 128) { tw::sync_named<2, 128>(); } "
                                "else { tw::sync_named<3, 128>(); }", "(tx % 128) == 0", 64)
    else:
        row, sync, who, rows = "0", "tw::sync_consumers<256>();", "tx == 0", 128
    at = match.group(1).replace("i0_1", row).replace("i1_1", "0")
    edit = ("    tw::fence_proxy_async();\n"
            f"    {sync}\n"
            f"    if ({who}) {{\n"
            f"      tw::tma_store((&Output[{at}]), (&O_shared[{row} * {dim}]), {rows * dim * 2});\n"
            "      tw::tma_store_arrive();\n"
            "    }\n"
            "    tw::tma_store_wait<true>();\n")
    return source[:match.start()] + edit + source[match.end():]


def main(rows: list) -> None:
    import torch

    own, overlap = PassConfigKey.TW_REGISTER_EPILOGUE, PassConfigKey.TW_GEMM_OVERLAP
    for text in rows:
        causal = text.endswith("c")
        seq, dim = (int(x) for x in text.rstrip("c").split("x"))
        kernels = {
            "tma_store_over_pipeline": compile_mha(1, 16, seq, dim, causal),
            "own_tile_thread_copies": compile_mha(1, 16, seq, dim, causal, pass_configs={own: True}),
        }
        own_tile = kernels["own_tile_thread_copies"]
        for name, per_warpgroup in (("own_tile_one_store", False), ("own_tile_per_warpgroup_store", True)):
            kernels[name] = edited_kernel(own_tile, own_tile_store(own_tile.record["device_source"], dim,
                                                                   per_warpgroup), out_idx=(3,))
        if causal:  # the intra-warpgroup overlap, off by default for a growing trip count
            kernels["overlap_tma_store"] = compile_mha(1, 16, seq, dim, causal, pass_configs={overlap: True})
            kernels["overlap_own_tile"] = compile_mha(1, 16, seq, dim, causal,
                                                      pass_configs={overlap: True, own: True})
        for name, kernel in kernels.items():
            tail = kernel.get_kernel_source()[-1500:]
            print(f"{text} {name}: {'TMA store' if 'tma_store' in tail else 'thread copies'}", flush=True)
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 16, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
        race_attention(kernels, q, k, v, causal, text, "tma_store_over_pipeline")


if __name__ == "__main__":
    main(sys.argv[1:] or ROWS)
