"""rasterize_blocks: visit thread blocks in panels for L2 reuse.

Expects: any IR of a kernel with a launch grid.
Guarantees: ``launch.raster_panel`` is set: to the panel size asked for with
``T.use_swizzle`` (0 when disabled), or — for a 2-D grid of a kernel that contains a
``T.gemm`` and has more block rows than one panel — to ``AUTO_PANEL``. The code generator then
derives ``(bx, by)`` from the hardware block index so that consecutive blocks walk down a panel
of block rows before moving right: blocks that run together share rows of A and columns of B in
L2. Without panels, ``launch.heaviest_first`` is set when a loop runs more iterations the larger
``bx`` is (causal attention's key loop, ``(bx + 1) * block_M / block_N`` tiles): the code
generator then numbers blocks along x from the last, so the longest blocks start first and the
short ones fill the tail of the grid instead of the long ones running alone at the end (the
order FlashAttention-3 gives its causal blocks). Every block still runs exactly once (each
mapping is a bijection); the IR inside the kernel is unchanged, only the order in which blocks
run.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import interval
from ..ir.visitor import collect, uses_var
from ..target import PassConfigKey
from .manager import register

AUTO_PANEL = 10
MAX_ROWS_EVALUATED = 65536  # grids wider than this along x keep the hardware order (no check run)


@register("rasterize_blocks", "tile")
def rasterize_blocks(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    launch = func.launch
    grid = [ir.const_int(g) for g in launch.grid]
    panel = launch.raster_request
    if panel is None:
        two_d = len(grid) == 2 and None not in grid
        wanted = two_d and grid[1] > AUTO_PANEL and collect(func.body, ir.Gemm)
        panel = AUTO_PANEL if wanted and not ctx.flag(PassConfigKey.TW_DISABLE_RASTERIZATION) else 0
    if panel and (len(grid) != 2 or None in grid or grid[0] * grid[1] > 2**31 - 1):
        panel = 0  # only static 2-D grids are rasterised (their block count an int)
    heaviest_first = not panel and loops_grow_with_block_x(func)
    out = func.with_body(func.body)
    out.launch = dataclasses.replace(launch, raster_panel=panel, heaviest_first=heaviest_first)
    return out


def loops_grow_with_block_x(func: ir.PrimFunc) -> bool:
    """Some loop's trip count, evaluated for every ``bx`` of the grid, never falls as ``bx`` grows
    and is larger for the last block than for the first (nothing else unknown in it)."""
    bx = func.launch.block_vars[0]
    blocks = ir.const_int(func.launch.grid[0])
    if blocks is None or not 1 < blocks <= MAX_ROWS_EVALUATED:
        return False
    for loop in collect(func.body, ir.For):
        if not uses_var(loop.extent, bx):
            continue
        trips = [interval(loop.extent, {bx: (x, x)}) for x in range(blocks)]
        if any(lo is None or lo != hi for lo, hi in trips):
            continue  # depends on something besides bx (or on what interval cannot evaluate)
        counts = [lo for lo, _ in trips]
        if counts[-1] > counts[0] and all(a <= b for a, b in zip(counts, counts[1:])):
            return True
    return False
