"""rasterize_blocks: visit thread blocks in panels for L2 reuse.

Expects: any IR of a kernel with a launch grid.
Guarantees: ``launch.raster_panel`` is set: to the panel size asked for with
``T.use_swizzle`` (0 when disabled), or — for a 2-D grid of a kernel that contains a
``T.gemm`` and has more block rows than one panel — to ``AUTO_PANEL``. The code generator then
derives ``(bx, by)`` from the hardware block index so that consecutive blocks walk down a panel
of block rows before moving right: blocks that run together share rows of A and columns of B in
L2. Every block still runs exactly once (the mapping is a bijection); the IR inside the kernel
is unchanged, only the order in which blocks run.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.visitor import collect
from ..target import PassConfigKey
from .manager import register

AUTO_PANEL = 10


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
    out = func.with_body(func.body)
    out.launch = dataclasses.replace(launch, raster_panel=panel)
    return out
