"""Persistent tile loops: the rules and pieces ``warp_specialize`` uses to make a GEMM kernel persistent.

A persistent kernel launches at most as many blocks as fit the GPU at once (the host launcher
asks ``Runtime.persistent_blocks`` for them: of those, the fewest that take as few rounds of
``Launch.persistent_tiles`` tiles) and each block walks
the output tiles ``blockIdx.x, blockIdx.x + gridDim.x, ...`` in a loop of its own, binding the
kernel's block indices (``bx``, ``by``) per tile, in the same rasterised order that
``rasterize_blocks`` gives a one-block-per-tile launch. What it buys in a warp-specialised GEMM:
the producer goes on loading the next tile's stages while the consumers store this one, and the
block's set-up (barrier init, register rebalancing) is paid once per multiprocessor, not per tile.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.printer import expr_text
from ...ir.visitor import collect, reassigned_vars
from ...target import PassConfigKey



def why_not(func: ir.PrimFunc, ctx, loop: ir.For, block_lets, block_work, consumer_stmts, own_tile_bytes: int,
            smem_limit: int) -> str | None:
    """None when the warp-specialised kernel can walk its tiles persistently, else why not.

    ``loop``: the pipelined loop (the ring's stage counter runs on across tiles as
    ``tile_iter * extent + k``, so every tile must run the same number of stages);
    ``block_lets``: the scalars the kernel declares before the loop, which stay outside the tile
    loop (once per block, so none may depend on the block index or be re-assigned: a tile would
    see another tile's value); ``block_work``: the scalar statements both roles run before the
    split (``rules.warp_specialization.both_roles_prologue``), once per block too, so there must be
    none; ``consumer_stmts``: what the consumers run per tile besides the
    role loop (they must not use shared memory: the producer refills it meanwhile);
    ``own_tile_bytes``: the bytes the kernel needs in shared memory when the epilogue tile cannot
    reuse the pipeline's."""
    if ctx.flag(PassConfigKey.TW_DISABLE_PERSISTENT):
        return "tw.disable_persistent is set"
    grid = [ir.const_int(g) for g in func.launch.grid]
    if None in grid or len(grid) > 2:
        return "the grid is not a static 1-D or 2-D one"
    block_vars = set(func.launch.block_vars)
    if any(v in block_vars for bound in (loop.start, loop.extent) for v in collect(bound, ir.Var)):
        return (f"the pipelined loop's trip count ({expr_text(loop.extent)}) or start depends on the block "
                f"index, and the ring's stage counter needs every tile to run the same number of stages")
    reassigned = reassigned_vars(func.body)
    for let in block_lets:
        if let.var in reassigned:
            return (f"{let.var.name} is re-assigned in the kernel, and a block walking several tiles would "
                    f"carry its value from one tile to the next")
        if block_vars & set(collect(let.value, ir.Var)):
            return (f"{let.var.name} = {expr_text(let.value)} depends on the block index but is computed once "
                    f"per block, before the tile loop")
    if block_work:
        names = sorted({n.buffer.name for x in block_work for n in collect(x, ir.BufferStore)})
        return (f"the scalars computed before the loop ({', '.join(names)}) are computed once per block, "
                f"before the tile loop, and a block walking several tiles would need them per tile")
    for stmt in consumer_stmts:
        if any(b.scope == "shared" for b in collect(stmt, ir.Buffer)):
            return "the consumers' statements around the loop use shared memory the producer refills"
    if own_tile_bytes > smem_limit:
        return (f"the epilogue tile would need shared memory of its own ({own_tile_bytes} bytes in all, "
                f"more than {smem_limit})")
    return None


def tile_count(launch: ir.Launch) -> int:
    count = 1
    for g in launch.grid:
        count *= ir.const_int(g)
    return count


def block_index_lets(launch: ir.Launch, tile: ir.Expr) -> list:
    """``LetStmt``s binding the kernel's block indices for linear tile number ``tile``: the
    panel order of ``rasterize_blocks`` (blocks walk down ``raster_panel`` block rows, then
    right) when it is on, else row-major (x fastest)."""
    vars_ = launch.block_vars
    if len(vars_) == 1:
        return [ir.LetStmt(vars_[0], tile)]
    bx, by = vars_
    gx, gy = (ir.const_int(g) for g in launch.grid)
    panel = launch.raster_panel
    if not panel:
        return [ir.LetStmt(bx, tile % gx), ir.LetStmt(by, tile // gx)]
    first, rows, in_panel = ir.Var("tw_panel_first"), ir.Var("tw_panel_rows"), ir.Var("tw_in_panel")
    return [
        ir.Comment(f"tiles visited in panels of {panel} tile rows (L2 reuse)"),
        ir.LetStmt(first, tile // (panel * gx) * panel),
        ir.LetStmt(rows, ir.binop("min", ir.const(gy) - first, ir.const(panel))),
        ir.LetStmt(in_panel, tile % (panel * gx)),
        ir.LetStmt(by, first + in_panel % rows),
        ir.LetStmt(bx, in_panel // rows),
    ]


def tile_loop(launch: ir.Launch, tile_iter: ir.Var, body: list, loc=None) -> ir.For:
    """``for tile_iter in range(this block's tile count)``: tile ``blockIdx.x + tile_iter *
    gridDim.x``, the block indices bound from it, then ``body``."""
    tiles = tile_count(launch)
    tile = ir.Var("tile")
    extent = (ir.const(tiles) - ir.HW_BLOCK + ir.HW_BLOCKS - 1) // ir.HW_BLOCKS
    lets = [ir.LetStmt(tile, ir.HW_BLOCK + tile_iter * ir.HW_BLOCKS), *block_index_lets(launch, tile)]
    return ir.For(tile_iter, extent, ir.seq(lets + list(body)), "serial", ir.const(0), {ir.TILE_LOOP: tiles}, loc=loc)
