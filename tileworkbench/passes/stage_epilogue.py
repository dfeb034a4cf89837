"""stage_epilogue: a pipelined GEMM's result leaves through shared memory and one TMA store.

Expects: tile-level IR after ``warp_specialize`` (which stages its own consumers' epilogue).
Applies on sm_90a, unless the kernel was warp-specialised, TMA lowering is off
(``tl.disable_tma_lower``) or ``tw.register_epilogue`` asks for stores from registers, when the
kernel's last top-level statement is ``T.copy(accumulator fragment, 16-bit or FP8 global tile)``
right after its one top-level ``T.Pipelined`` loop, whose gemms are on the wgmma path, and the result
tile fits in the bytes of that loop's shared tiles (``num_stages`` versions each).
Guarantees: that copy becomes: the fragment copied into a new shared tile ``<fragment>_out``
(swizzled 128-byte panels, paired stores), one TMA store of the tile, a store wait (read) before
the block exits. ``plan_shared_memory`` places the tile over the pipeline's tiles, dead by then,
behind an async-proxy fence and a block barrier, so it costs no shared memory.
``func.attrs["staged_epilogue"]`` names the tile (None: not applied).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import collect
from ..target import PassConfigKey
from .rules import epilogue as epilogue_rules
from .rules import gemm as gemm_rules
from .rules.thread_scopes import has_thread_scopes
from .manager import register


def _pipeline_bytes(loop: ir.For) -> int:
    """Bytes of the shared tiles the loop writes, times its stages (their versions, once pipelined)."""
    stages = loop.pipeline.stages
    tiles = {id(r.buffer): r.buffer for r in collect(loop.body, ir.Region) if r.buffer.scope == "shared"}
    return stages * sum(b.dtype.bytes_for(b.numel) for b in tiles.values())


@register("stage_epilogue", "tile")
def stage_epilogue(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    out = func.with_body(func.body)
    out.attrs["staged_epilogue"] = None
    if ctx.target.arch != "sm_90a" or func.attrs.get("warp_specialized", {}).get("applied"):
        return out
    if ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER) or ctx.flag(PassConfigKey.TW_REGISTER_EPILOGUE):
        return out
    top = ir.statements(func.body)
    loops = [i for i, s in enumerate(top) if isinstance(s, ir.For) and s.kind == "pipelined"]
    if len(loops) != 1 or loops[0] != len(top) - 2:
        return out
    gemms = collect(top[loops[0]].body, ir.Gemm)
    if not gemms or has_thread_scopes(func) or any(gemm_rules.wgmma_plan(g, func.launch.threads, ctx) is None for g in gemms):
        return out  # the mma.sync path keeps its stores from registers
    staged = epilogue_rules.staged_store(top[-1:], _pipeline_bytes(top[loops[0]]), "block")
    if staged is None:
        return out
    tile, stmts = staged
    allocs = [i for i, s in enumerate(top) if isinstance(s, ir.Allocate)]
    at = allocs[-1] + 1 if allocs else 0
    body = top[:at] + [ir.Allocate(tile, loc=tile.loc)] + top[at:-1] + stmts
    out = func.with_body(ir.seq(body))
    out.attrs["staged_epilogue"] = tile.name
    return out
