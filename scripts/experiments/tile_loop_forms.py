"""Experiment: the persistent GEMM's tile loops written so ptxas sees they run at least once.

The launcher gives a persistent kernel at most one block per tile, so every block's tile loop
runs at least once, but the loop's bound, ``(tiles - blockIdx.x + gridDim.x - 1) / gridDim.x``,
does not show it. ``zero_trip_loops.py`` found a wgmma main loop 16-18% slower when ptxas had to
allow it to run zero times; the tile loop wraps the main loop. Variants of the compiler's
persistent GEMM (128x256x64, 3 stages), edited by hand: both roles' tile loops as do-whiles;
and as ``for (tile = blockIdx.x; tile < tiles; tile += gridDim.x)``. Checked bit for bit against
the compiler's kernel, then timed beside cuBLAS in rotating rounds.

    PYTHONPATH=. python3 scripts/experiments/tile_loop_forms.py [sizes, default 4096,8192]

Measured on the H200 (2026-12-01, 4096^3, median TFLOP/s of 9 rotating rounds, same bits): no
effect. fp16: cuBLAS 741.1, persistent 739.7, do-while 738.8, strided 739.4; bf16: 759.8, 755.9,
756.6, 756.9. The main loop inside has a constant trip count, which is what ptxas needs to see.
"""

import re
import sys

from _compare import race_persistent_variants
from _edited import edited_kernel

TILE_LOOP = re.compile(r"for \(int (tile_iter\w*) = 0; \1 < (tw::floordiv\(.+?\)); \+\+\1\) \{\n")


def _close(source: str, start: int) -> int:
    """Index of the brace closing the block opened just before ``start``."""
    depth, i = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        i += 1
    return i - 1


def do_while(source: str) -> str:
    while (m := TILE_LOOP.search(source)) is not None:
        var, bound = m.groups()
        end = _close(source, m.end())
        source = (source[:m.start()] + f"int {var} = 0;\n    do {{\n" + source[m.end():end]
                  + f"}} while (++{var} < {bound});" + source[end + 1:])
    return source


def strided(source: str) -> str:
    while (m := TILE_LOOP.search(source)) is not None:
        var, _ = m.groups()
        tiles = int(re.search(r"\+ (\d+)\), \(int\)gridDim\.x\)", m.group(0)).group(1)) + 1
        end = _close(source, m.end())
        body = source[m.end():end]
        body = re.sub(r"int (tile\w*) = \(\(int\)blockIdx\.x \+ \(" + var + r" \* \(int\)gridDim\.x\)\);\n\s*", "", body, count=1)
        tile = re.search(r"int (tile\w*) = \(\(int\)blockIdx\.x \+ \(" + var, source[m.end():end]).group(1)
        source = (source[:m.start()] + f"int {var} = 0;\n    for (int {tile} = (int)blockIdx.x; {tile} < {tiles}; "
                  f"{tile} += (int)gridDim.x, ++{var}) {{\n" + body + source[end:])
    return source


if __name__ == "__main__":
    race_persistent_variants(lambda pers: {
        "tile loops do-while": edited_kernel(pers, do_while(pers.record["device_source"])),
        "tile loops strided": edited_kernel(pers, strided(pers.record["device_source"]))}, sys.argv)
