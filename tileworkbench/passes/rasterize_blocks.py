"""rasterize_blocks: the order thread blocks run in (panels for L2 reuse, the longest first).

Expects: any IR of a kernel with a launch grid.
Guarantees: ``launch.raster_panel`` is set: to the panel size asked for with
``T.use_swizzle`` (0 when disabled), or — for a 2-D grid of a kernel that contains a
``T.gemm`` and has more block rows than one panel — to ``AUTO_PANEL``. The code generator then
derives ``(bx, by)`` from the hardware block index so that consecutive blocks walk down a panel
of block rows before moving right: blocks that run together share rows of A and columns of B in
L2. Without panels, ``launch.heaviest_first`` is set when a loop runs more iterations the larger
``bx`` is (causal attention's key loop, ``(bx + 1) * block_M / block_N`` tiles): the code
generator then numbers ``bx`` from the last in the order the hardware dispatches blocks, across
the whole grid (with blocks along y or z, such as attention's heads, ``bx`` comes from the
slowest-varying part of that order), so the longest blocks of every head start first and the
short ones fill the tail of the grid instead of the long ones running alone at the end (the
order FlashAttention-3 gives its causal blocks). Across a grid of many heads that order would
have the blocks running together read the keys and values of as many heads, more than L2 holds,
so ``launch.heaviest_first_panel`` takes the (y, z) pairs a panel at a time: as many as keep
what the growing loop loads from global memory (bytes not depending on ``bx``, for the longest
block) within ``L2_PANEL_BYTES``, the longest blocks of the panel first, then the next panel.
Every block still runs exactly once (each mapping is a bijection); the IR inside the kernel is
unchanged, only the order in which blocks run.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as ir
from ..ir.simplify import interval
from ..ir.visitor import collect, uses_var
from ..target import PassConfigKey
from .manager import register

AUTO_PANEL = 10
MAX_ROWS_EVALUATED = 65536  # grids wider than this along x keep the hardware order (no check run)
# What the blocks of one heaviest-first panel may load in common: a third of the H200's 50 MB of
# L2. Causal attention on the H200 (scripts/experiments/causal_block_order.py, docs/experiments.md)
# ran best with panels of 8-16 MB of keys and values: 2 MB heads 4-8 at a time, 4 MB heads 2-4, 8 MB
# heads 1-2; every head at once lost 17% on 128 heads of 4 MB.
L2_PANEL_BYTES = 16 << 20


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
    growing = None if panel else loop_growing_with_block_x(func)
    out = func.with_body(func.body)
    out.launch = dataclasses.replace(launch, raster_panel=panel, heaviest_first=growing is not None,
                                     heaviest_first_panel=heaviest_first_panel(func, *growing) if growing else 0)
    return out


def loop_growing_with_block_x(func: ir.PrimFunc) -> tuple[ir.For, int] | None:
    """The first loop whose trip count, evaluated for every ``bx`` of the grid, never falls as
    ``bx`` grows and is larger for the last block than for the first (nothing else unknown in it),
    with its trip count in the last block; None where there is none."""
    bx = func.launch.block_vars[0]
    blocks = ir.const_int(func.launch.grid[0])
    if blocks is None or not 1 < blocks <= MAX_ROWS_EVALUATED:
        return None
    for loop in collect(func.body, ir.For):
        if not uses_var(loop.extent, bx):
            continue
        trips = [interval(loop.extent, {bx: (x, x)}) for x in range(blocks)]
        if any(lo is None or lo != hi for lo, hi in trips):
            continue  # depends on something besides bx (or on what interval cannot evaluate)
        counts = [lo for lo, _ in trips]
        if counts[-1] > counts[0] and all(a <= b for a, b in zip(counts, counts[1:])):
            return loop, counts[-1]
    return None


def heaviest_first_panel(func: ir.PrimFunc, loop: ir.For, longest: int) -> int:
    """How many (y, z) block index pairs (attention's heads) take their turn together: all of
    them where the grid has no other dimension of known size, else as many as keep the global
    memory the growing ``loop`` loads in ``longest`` iterations, in the tiles that do not depend on
    ``bx`` (keys and values, shared by a head's blocks), within ``L2_PANEL_BYTES``."""
    grid = [ir.const_int(g) for g in func.launch.grid]
    if len(grid) < 2 or None in grid:
        return 0
    pairs = math.prod(grid[1:])
    bx = func.launch.block_vars[0]
    shared_bytes = sum(c.src.buffer.dtype.bytes_for(c.src.numel) for c in collect(loop.body, (ir.Copy, ir.TmaCopy))
                       if c.src.buffer.scope == "global" and c.src.static_extents() is not None
                       and not any(uses_var(start, bx) for start in c.src.starts))
    if shared_bytes == 0:
        return pairs
    return max(1, min(pairs, L2_PANEL_BYTES // (shared_bytes * longest)))
