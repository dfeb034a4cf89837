"""Experiment: the order causal attention's blocks start in, across heads and batches.

``rasterize_blocks`` sets ``heaviest_first`` for causal attention (block bx's key loop runs bx + 1
tiles). The code generator first numbered blocks from the last along x alone, so the hardware
(which dispatches x fastest, then y, then z) ran head 0's query blocks from the longest down,
then head 1's, ...: the last head's longest blocks started near the end of the grid and ran on
alone. It now numbers bx from the slowest-varying part of the dispatch order, so the longest blocks
start before any shorter one (``codegen/block_order.py``).

Across many heads that order has the blocks running together read every head's keys and values,
more than L2 holds, so the compiler takes the heads a panel at a time (``rasterize_blocks``'
``heaviest_first_panel``: as many as keep 16 MB of keys and values). This times the orders on the
same kernel in one process: ours "as compiled", the same source with the block indices taken the
old way ("x alone"), every head at once ("across the grid") and panels of g (head, batch) pairs,
the longest blocks of a panel first ("panels of g"). Each is checked against a float32 reference
on random inputs first, then all are timed in 3 alternating rounds of ``profiler.do_bench``
(median ms, L2 flushed).

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/causal_block_order.py [ROW ...]

ROW: ``BxHxSxD[xG]`` (causal; G query heads a K/V head; default: the attention suite's causal
rows). Findings: docs/experiments.md, "Causal attention: the order blocks start in".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _compare import race_attention  # noqa: E402
from _edited import edited_kernel  # noqa: E402

from tileworkbench.bench.attention import compile_mha  # noqa: E402

ROWS = ["1x16x4096x128", "1x16x8192x128", "1x16x16384x128", "1x16x8192x64", "4x32x8192x128", "1x32x8192x128x4"]
ROUNDS = 3
# The generated block indices, from the dispatch-order number to the last index (bz).
_INDICES = re.compile(r"  const int tw_block = blockIdx\.x \+ gridDim\.x[^\n]*\n(?:  const int \w+ = [^\n]*\n)*?"
                      r"  const int bz = [^\n]*\n")
_LAST_BX = re.compile(r"const int bx = (\d+) - ")


def x_alone(source: str) -> str:
    """The same kernel with its blocks numbered from the last along x only (the order before)."""
    found = _found(source)
    old = (f"  const int bx = {found.group(1)} - blockIdx.x;\n  const int by = blockIdx.y;\n"
           "  const int bz = blockIdx.z;\n")
    return source[:found.start()] + old + source[found.end():]


def in_panels(source: str, heads_per_panel: int, heads: int, batch: int) -> str:
    """The same kernel with its (head, batch) pairs taken ``heads_per_panel`` at a time: within a
    panel the longest blocks of its heads first, panel after panel (so the K and V of a panel's
    heads are what the blocks running together read)."""
    found = _found(source)
    last = int(found.group(1))
    x, g, pairs = last + 1, heads_per_panel, heads * batch
    text = ("  const int tw_block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
            f"  const int tw_panel = tw_block / {x * g};\n"
            f"  const int tw_panel_heads = min({pairs} - tw_panel * {g}, {g});\n"
            f"  const int tw_in_panel = tw_block % {x * g};\n"
            f"  const int bx = {last} - tw_in_panel / tw_panel_heads;\n"
            f"  const int tw_head = tw_panel * {g} + tw_in_panel % tw_panel_heads;\n"
            f"  const int by = tw_head % {heads};\n"
            f"  const int bz = tw_head / {heads};\n")
    return source[:found.start()] + text + source[found.end():]


class _Found:
    """Where the kernel's block indices are, and its last bx (``group(1)``)."""

    def __init__(self, match):
        self.match = match
        self.last = _LAST_BX.search(match.group(0)).group(1)

    def start(self):
        return self.match.start()

    def end(self):
        return self.match.end()

    def group(self, i):
        return self.last if i == 1 else self.match.group(i)


def _found(source: str) -> _Found:
    found = _INDICES.search(source)
    if found is None:
        raise SystemExit("the kernel does not number its blocks across the grid: nothing to compare")
    return _Found(found)


PANELS = (2, 4, 8)


def compare(batch: int, heads: int, seq: int, dim: int, groups: int = 1) -> None:
    import torch

    ours = compile_mha(batch, heads, seq, dim, True, groups=groups)
    source = ours.get_kernel_source()
    kernels = {"as compiled": ours,
               "x alone": edited_kernel(ours, x_alone(source), out_idx=(3,)),
               "across the grid": edited_kernel(ours, in_panels(source, heads * batch, heads, batch), out_idx=(3,))}
    for g in PANELS:
        if g < heads * batch:
            kernels[f"panels of {g}"] = edited_kernel(ours, in_panels(source, g, heads, batch), out_idx=(3,))
    torch.manual_seed(0)
    q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(batch, heads // groups, seq, dim, device="cuda", dtype=torch.float16) for _ in range(2))
    label = f"{batch}x{heads}x{seq}x{dim}{f' gqa{heads // groups}' if groups > 1 else ''} causal"
    race_attention(kernels, q, k, v, True, label, "x alone", rounds=ROUNDS)


if __name__ == "__main__":
    for row in sys.argv[1:] or ROWS:
        compare(*(int(x) for x in row.split("x")))
