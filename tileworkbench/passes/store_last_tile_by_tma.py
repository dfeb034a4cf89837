"""store_last_tile_by_tma: a kernel's last statement copying a whole shared tile to global memory
becomes one TMA store.

Expects: tile-level IR after ``stage_epilogue``.
Applies on sm_90a, unless TMA lowering is off (``tl.disable_tma_lower``) or the kernel is
warp-specialised or has ``T.ws`` scopes, when the kernel's last top-level statement is a plain
``T.copy(S, G)`` of a whole shared tile ``S`` into a global region ``G`` of the same type and
shape that the threads would copy 16 bytes at a time (``rules.copies``: so the tensor is already
asked to be 16-byte aligned, its rows whole 16-byte units), whose row strides are constants and
for which a tensor map can be built (``rules.tma.build_descriptor``: boxes of at most 256).
Guarantees: that copy becomes ``T.tma_copy(S, G)`` (``lower_tma`` puts an async-proxy fence and a
block barrier before it, since threads wrote ``S``, and issues it from one thread) followed by a
store wait (read) before the block exits; where no gemm reads ``S`` and no other TMA moves it,
``S`` is marked ``rules.tma.STORE_ONLY``, so ``choose_shared_layouts`` leaves it the layout its
writers want (unswizzled, unless a rule of theirs swizzles it) and the tensor map follows that. The result is the same: the tensor map clips a tile that
runs past the tensor's end, as the copy's bounds checks do. Why: TileLang stores such a tile so,
and on the H200 its elementwise example wrote 4202 GB/s that way against our 3891 with 16-byte
stores from every thread (BENCHMARKS.md, "TileLang's programs").
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.simplify import launch_ranges
from ..ir.visitor import collect
from ..target import PassConfigKey
from .manager import register
from .rules import tma as tma_rules
from .rules.copies import CopyLowering
from .rules.thread_scopes import has_thread_scopes


def _tma_store(copy, ranges: dict) -> list | None:
    """The statements that store ``copy`` by TMA, or None where it is not such a copy (module doc)."""
    if not isinstance(copy, ir.Copy) or copy.instruction is not None:
        return None
    src, dst = copy.src, copy.dst
    if src.buffer.scope != "shared" or dst.buffer.scope != "global" or not src.is_full:
        return None
    if src.buffer.dtype != dst.buffer.dtype or src.buffer.attrs.get("versions", 1) > 1 or dst.static_extents() is None:
        return None
    if src.buffer.dtype.packed:  # FP4: sm_90a runs no 4-bit tensor map; the threads move 16-byte runs
        return None
    if [e for e in dst.static_extents() if e != 1] != [n for n in src.buffer.static_shape() if n != 1]:
        return None
    if any(ir.const_int(s) is None for s in dst.buffer.effective_strides()[:-1]):
        return None  # a row stride known only at run time may be no multiple of TMA's 16 bytes
    if CopyLowering(copy, ranges).vector_width() * src.buffer.dtype.storage_bits != 128:
        return None  # the threads' copy would not move 16 bytes at a time: TMA would ask more of the tensor
    try:
        tma_rules.build_descriptor(dst, src.buffer, copy.loc)
    except CompileError:
        return None
    return [ir.TmaCopy(src, dst, loc=copy.loc), ir.TmaStoreWait(read=True, loc=copy.loc)]


def _other_layout_users(tile: ir.Buffer, body) -> bool:
    """Whether a gemm reads ``tile`` or another TMA moves it: their layout rules then choose its swizzle."""
    for op in collect(body, (ir.Gemm, ir.TmaCopy, ir.Copy)):
        if isinstance(op, ir.Copy) and op.instruction != "tma":
            continue
        regions = (op.a, op.b) if isinstance(op, ir.Gemm) else (op.src, op.dst)
        if any(r.buffer is tile for r in regions):
            return True
    return False


@register("store_last_tile_by_tma", "tile")
def store_last_tile_by_tma(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if ctx.target.arch != "sm_90a" or ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER):
        return func
    if func.attrs.get("warp_specialized", {}).get("applied") or has_thread_scopes(func) or func.launch.producer_threads:
        return func
    top = ir.statements(func.body)
    stmts = _tma_store(top[-1], launch_ranges(func)) if top else None
    if stmts is None:
        return func
    tile = top[-1].src.buffer
    if not _other_layout_users(tile, func.body):
        tile.attrs[tma_rules.STORE_ONLY] = True  # the layout its writers want; the tensor map follows it
    return func.with_body(ir.seq(top[:-1] + stmts))
