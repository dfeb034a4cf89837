"""The block indices a kernel takes from the hardware's: the order its blocks run in.

``rasterize_blocks`` decides the order (``Launch.raster_panel``, ``heaviest_first`` and
``heaviest_first_panel``); this spells it in CUDA. The hardware dispatches blocks in the order of
``blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)``: every mapping here is a
bijection from that number to the kernel's (bx, by[, bz]), chosen so that the blocks dispatched
together are the ones the decision wants together. A persistent kernel binds its indices in its
own tile loop (none of this).
"""

from __future__ import annotations

import math

from ..ir import nodes as ir

# Names the orders' lines declare; a kernel's own names for these get another spelling.
RASTER_NAMES = ("tw_block", "tw_panel_first", "tw_panel_rows", "tw_in_panel")
HEAVIEST_NAMES = ("tw_block", "tw_panel", "tw_panel_pairs", "tw_in_panel", "tw_pair")


def reserved_names(launch: ir.Launch) -> tuple[str, ...]:
    """The names ``block_index_lines`` declares for ``launch`` besides the block indices."""
    if launch.persistent_tiles:
        return ()
    if launch.raster_panel:
        return RASTER_NAMES
    return HEAVIEST_NAMES if _heaviest_first_across_grid(launch) else ()


def block_index_lines(launch: ir.Launch, names: list[str]) -> list[str]:
    """The statements that declare the block indices ``names`` (spelled for C++, x first)."""
    if launch.persistent_tiles:
        return []  # the kernel's tile loops bind the block indices, one tile at a time
    if launch.raster_panel:
        return _rasterized(launch, names)
    if _heaviest_first_across_grid(launch):
        return _heaviest_first_across(launch, names)
    lines = []
    for name, axis in zip(names, "xyz"):
        if axis == "x" and launch.heaviest_first:
            lines.append(f"const int {name} = {ir.const_int(launch.grid[0]) - 1} - blockIdx.x;"
                         "  // the blocks with the longest loops first")
        else:
            lines.append(f"const int {name} = blockIdx.{axis};")
    return lines


def _rasterized(launch: ir.Launch, names: list[str]) -> list[str]:
    """(bx, by) from the hardware order so that consecutive blocks walk down a panel of
    ``raster_panel`` block rows (the last panel may be shorter), then move right."""
    gx, gy = (ir.const_int(g) for g in launch.grid)
    panel = launch.raster_panel
    bx, by = names
    return [f"// blocks visited in panels of {panel} block rows (L2 reuse)",
            "const int tw_block = blockIdx.y * gridDim.x + blockIdx.x;",
            f"const int tw_panel_first = (tw_block / {panel * gx}) * {panel};",
            f"const int tw_panel_rows = min({gy} - tw_panel_first, {panel});",
            f"const int tw_in_panel = tw_block % {panel * gx};",
            f"const int {by} = tw_panel_first + tw_in_panel % tw_panel_rows;",
            f"const int {bx} = tw_in_panel / tw_panel_rows;"]


def _heaviest_first_across(launch: ir.Launch, names: list[str]) -> list[str]:
    """(bx, by[, bz]) for ``launch.heaviest_first`` over a grid with several blocks along y or z
    (causal attention's heads and batches): the dispatch-order number is cut into panels of
    ``launch.heaviest_first_panel`` (y, z) pairs, and within a panel bx, numbered from the last,
    comes from its slowest-varying part and the pair from the rest: the longest blocks of the
    panel's heads start before any of their shorter ones, and the panel's heads are what the
    blocks running together read. (Numbering along x alone would run head 0's blocks from the
    longest down, then head 1's, ..., leaving the last head's longest blocks to start near the end.)"""
    grid = [ir.const_int(g) for g in launch.grid]
    pairs = math.prod(grid[1:])
    panel = min(launch.heaviest_first_panel or pairs, pairs)
    lines = ["const int tw_block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);"
             "  // the order blocks are dispatched in"]
    if panel == pairs:
        lines.append(f"const int {names[0]} = {grid[0] - 1} - tw_block / {pairs};"
                     "  // the blocks with the longest loops first, across the whole grid")
        pair = "tw_block"
    else:
        lines.append(f"const int tw_panel = tw_block / {grid[0] * panel};"
                     f"  // {panel} (y, z) pairs a panel, the longest blocks of each panel first")
        if pairs % panel:  # the last panel has fewer pairs
            lines.append(f"const int tw_panel_pairs = min({pairs} - tw_panel * {panel}, {panel});")
        in_panel = "tw_panel_pairs" if pairs % panel else panel
        lines += [f"const int tw_in_panel = tw_block % {grid[0] * panel};",
                  f"const int {names[0]} = {grid[0] - 1} - tw_in_panel / {in_panel};",
                  f"const int tw_pair = tw_panel * {panel} + tw_in_panel % {in_panel};"]
        pair = "tw_pair"
    below = 1  # the blocks of the dimensions before this one
    for name, count in zip(names[1:], grid[1:]):
        index = pair if below == 1 else f"{pair} / {below}"
        lines.append(f"const int {name} = {index} % {count};" if count > 1 else f"const int {name} = 0;")
        below *= count
    return lines


def _heaviest_first_across_grid(launch: ir.Launch) -> bool:
    return _across(describe(launch))


def _across(order: dict) -> bool:
    """Heaviest first on a static grid with more than one block along y or z (whose block count is
    an int) and panels of more than one (y, z) pair: the whole grid's order is renumbered, not x's
    alone (``order``: ``describe``'s)."""
    grid = order["grid"]
    return (order["heaviest_first"] and len(grid) > 1 and None not in grid and math.prod(grid[1:]) > 1
            and math.prod(grid) <= 2**31 - 1 and order["heaviest_first_panel"] != 1)


def describe(launch: ir.Launch) -> dict:
    """What ``kernel_block`` needs to know of ``launch``'s block order (JSON: the trace keeps it)."""
    return {"grid": [ir.const_int(g) for g in launch.grid], "raster_panel": launch.raster_panel,
            "heaviest_first": launch.heaviest_first, "heaviest_first_panel": launch.heaviest_first_panel,
            "persistent": bool(launch.persistent_tiles)}


def kernel_block(order: dict, block_idx: tuple) -> tuple | None:
    """The kernel's block indices (bx, by, bz) of the hardware block ``block_idx`` (x, y, z), as
    ``block_index_lines`` computes them in the kernel (``order``: ``describe``'s); None where the
    kernel walks tiles (persistent: a block has no one index). The orders that renumber across
    dimensions (raster panels, across the grid) are only taken on static grids."""
    if order["persistent"]:
        return None
    dims = (list(order["grid"]) + [1, 1])[:3]
    x, y, z = block_idx
    if order["raster_panel"]:
        gx, gy = dims[0], dims[1]
        panel = order["raster_panel"]
        block = y * gx + x
        first = block // (panel * gx) * panel
        rows = min(gy - first, panel)
        in_panel = block % (panel * gx)
        return (in_panel // rows, first + in_panel % rows, 0)
    if _across(order):
        pairs = dims[1] * dims[2]
        panel = min(order["heaviest_first_panel"] or pairs, pairs)
        block = x + dims[0] * (y + dims[1] * z)
        panel_pairs = min(pairs - block // (dims[0] * panel) * panel, panel)
        in_panel = block % (dims[0] * panel)
        bx = dims[0] - 1 - in_panel // panel_pairs
        pair = block // (dims[0] * panel) * panel + in_panel % panel_pairs
        return (bx, pair % dims[1], pair // dims[1])
    if order["heaviest_first"]:
        return (dims[0] - 1 - x, y, z)
    return (x, y, z)


def kernel_blocks(order: dict, numbers, grid) -> dict:
    """Dispatch number (``blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)``, as a
    measured timeline names its blocks) -> the kernel's ``[bx, by, bz]``, for ``numbers`` on the
    launch ``grid``; empty where the kernel has no indices of its own per block (persistent)."""
    gx, gy = int(grid[0]), int(grid[1]) if len(grid) > 1 else 1
    out = {}
    for number in numbers:
        number = int(number)
        found = kernel_block(order, (number % gx, number // gx % gy, number // (gx * gy)))
        if found is not None:
            out[number] = list(found)
    return out
