"""choose_shared_layouts: decide the layout of every shared tile and each gemm's tensor-core path.

Expects: tile-level IR after pipelining (shared buffers may carry a version dimension).
Guarantees:
  * every ``T.gemm`` carries its tensor-core path in ``Gemm.plan`` (a ``rules.gemm.WgmmaPlan``,
    or None for ``mma.sync``); operand tiles of a wgmma gemm get the layout wgmma reads: each
    swizzled by its row bytes or, when its rows are wider than 128 bytes, split into 128-byte
    panels with the 128B swizzle (``attrs["panel"]``); an A in a fragment has no tile here;
  * the gemms of one accumulator share one accumulator layout, and every wgmma gemm reading a
    tile wants the same layout of it: where two would disagree (one accumulator fed by a wgmma
    and an mma.sync gemm, or by two wgmma forms; two accumulators a ``T.Parallel`` loop reads or
    writes whole alike, fed so; one tile read K-major by one gemm and N-major by another), the
    gemms involved take the mma.sync path, whose layouts always agree; an mma.sync gemm reading
    a tile a wgmma gemm stores in panels reads those panels (the panel arguments of
    ``tw::gemm_ss`` and ``tw::gemm_ss_tf32``);
  * other gemm operand tiles and tiles moved by a descriptor TMA (but for the tile of a final
    store, ``rules.tma.STORE_ONLY``) get the swizzle their inner
    dimension allows (``rules.tma.swizzle_for_tile``), or, when their rows are wider than 128
    bytes (an epilogue tile, say), 128-byte panels with the 128B swizzle where TMA can move
    them so; every other tile stays unswizzled, so contiguous TMA copies into it can be
    descriptorless bulk copies;
  * an mma.sync operand tile that threads fill (not TMA) and whose rows are a power of two wider
    than 128 bytes gets the wide-row swizzle (``attrs["swizzle"]`` = its row bytes, 256 to 2048:
    each 16-byte chunk XOR its row's low three bits, ``tw::swizzle``), so ldmatrix reads it
    without bank conflicts;
  * ``attrs["swizzle"]`` (bytes: 0, 32, 64, 128, or a wide row's 256 to 2048) and
    ``attrs["panel"]`` (elements, 0: none) are set on every shared buffer. TMA, threads and
    tensor cores all use the one layout chosen here.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect
from .rules import gemm as gemm_rules
from .rules.fragments import ParallelNest, parallel_nest
from .rules import tma as tma_rules
from .rules.thread_scopes import threads_of
from .manager import register


def _tma_pairs(body):
    """(global region, shared buffer) of every TMA copy, explicit or preferred."""
    for op in collect(body, (ir.TmaCopy, ir.Copy)):
        if isinstance(op, ir.Copy) and op.instruction != "tma":
            continue
        src, dst = op.src, op.dst
        if src.buffer.scope == "global" and dst.buffer.scope == "shared":
            yield src, dst.buffer
        elif src.buffer.scope == "shared" and dst.buffer.scope == "global":
            yield dst, src.buffer


WIDE_ROW_SPANS = (256, 512, 1024, 2048)  # tw::swizzle's wide-row spans (runtime/include/tw/common.h)


def _wide_row_swizzle(buf: ir.Buffer) -> int:
    """The row bytes of an mma.sync operand tile whose rows are a power of two wider than 128
    bytes (256 to 2048) and come in whole groups of 8, else 0: threads fill it (not TMA) and
    ldmatrix reads it, so it takes ``tw::swizzle``'s wide-row pattern (each 16-byte chunk XOR its row's low three bits). Without
    a swizzle the 8 rows one ldmatrix phase reads sit on one bank group (an eight-way conflict:
    the convolution's 32 x 128 fp16 filter tile spent most of its time there)."""
    shape = tma_rules.tile_shape(buf)
    rows = 1
    for extent in shape[:-1]:
        rows *= extent
    # whole groups of 8 rows (gemm operands always are: 16-row mma tiles): the swizzle leaves a
    # stage's base where it is, as the gemm takes the stage's swizzled base and swizzles from there
    if len(shape) < 2 or buf.dtype.bits not in (8, 16, 32) or rows % 8:
        return 0
    row_bytes = buf.dtype.bytes_for(shape[-1])
    return row_bytes if row_bytes in WIDE_ROW_SPANS else 0


def _accumulator_layout(plan):
    return None if plan is None else (plan.m, plan.n, plan.warpgroups, plan.n_groups)


def _layout_sharers(body) -> dict:
    """id(fragment) -> a representative of the fragments that must share its thread layout because
    one ``T.Parallel`` nest reads or writes them whole, each at the nest's variables in order
    (``b_dh[i, j] += b_dh_1[i, j] - b_dh_2[i, j]``: TileLang's GDN backward adds a TF32 gemm's
    accumulator to a wgmma's), directly or through other such nests."""
    parent: dict = {}

    def find(key):
        while parent.get(key, key) != key:
            key = parent[key]
        return key

    for nest in _outer_parallel_nests(body):
        loops, inner = parallel_nest(nest)
        shape_of = ParallelNest.of(loops)
        whole = {id(a.buffer) for a in collect(inner, (ir.BufferLoad, ir.BufferStore))
                 if a.buffer.scope == "fragment"
                 and (shape_of.match(a.indices, a.buffer.static_shape()) or (None,))[0] == "whole"}
        keys = sorted(whole)
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])
    return {key: find(key) for key in list(parent)}  # a key not here is its own representative


def _outer_parallel_nests(body) -> list:
    """The ``T.Parallel`` loops not inside another."""
    inner = {id(f.body) for f in collect(body, ir.For) if f.kind == "parallel"}
    return [f for f in collect(body, ir.For) if f.kind == "parallel" and id(f) not in inner]


def _agreeing_plans(gemms, plans: dict, sharers: dict) -> dict:
    """``plans`` (id(gemm) -> WgmmaPlan | None) with the gemms whose plans disagree (module doc)
    moved to the mma.sync path, until every accumulator and every operand tile has one layout;
    accumulators that must share a layout (``_layout_sharers``) count as one."""
    plans = dict(plans)
    changed = True
    while changed:
        changed = False
        by_accumulator: dict = {}
        for g in gemms:
            key = id(g.c.buffer)
            by_accumulator.setdefault(sharers.get(key, key), []).append(g)
        for group in by_accumulator.values():
            if len({_accumulator_layout(plans[id(g)]) for g in group}) > 1:
                for g in group:
                    changed |= plans[id(g)] is not None
                    plans[id(g)] = None
        wants: dict = {}  # id(tile) -> {(swizzle, panel): [gemms]}
        for g in gemms:
            plan = plans[id(g)]
            if plan is not None:
                if not plan.a_registers:
                    wants.setdefault(id(g.a.buffer), {}).setdefault((plan.a_span, plan.a_panel), []).append(g)
                wants.setdefault(id(g.b.buffer), {}).setdefault((plan.b_span, plan.b_panel), []).append(g)
        for layouts in wants.values():
            if len(layouts) > 1:
                for group in layouts.values():
                    for g in group:
                        changed |= plans[id(g)] is not None
                        plans[id(g)] = None
    return plans


class _SetPlans(IRMutator):
    def __init__(self, plans: dict):
        self.plans = plans

    def visit_Gemm(self, node: ir.Gemm):
        return dataclasses.replace(node, plan=self.plans[id(node)])


@register("choose_shared_layouts", "tile")
def choose_shared_layouts(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    shared = [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.scope == "shared"]
    pairs = list(_tma_pairs(func.body))
    layout: dict[int, tuple[int, int]] = {}  # id(buffer) -> (swizzle, panel)
    wanted = set()
    gemms = collect(func.body, ir.Gemm)
    plans = {}
    gemm_threads, _ = threads_of(func)  # a gemm inside `T.ws(1)` runs on that warpgroup only
    for gemm in gemms:
        plan = gemm_rules.wgmma_plan(gemm, gemm_threads[id(gemm)], ctx)
        plans[id(gemm)] = plan if plan is not None and gemm_rules.plan_fits(plan, gemm, pairs) else None
    plans = _agreeing_plans(gemms, plans, _layout_sharers(func.body))
    for gemm in gemms:
        plan = plans[id(gemm)]
        if plan is not None:
            if not plan.a_registers:
                layout[id(gemm.a.buffer)] = (plan.a_span, plan.a_panel)
            layout[id(gemm.b.buffer)] = (plan.b_span, plan.b_panel)
        else:
            wanted.update(id(r.buffer) for r in (gemm.a, gemm.b) if r.buffer.scope == "shared")
    for g_region, buf in pairs:
        if buf.attrs.get(tma_rules.STORE_ONLY):
            continue  # the layout its writers want (a tensor map of any swizzle stores it)
        if not tma_rules.is_contiguous(g_region) or tma_rules.region_bytes(g_region) % 16:
            wanted.add(id(buf))  # a descriptor is needed anyway: give it the fast layout
    # a tile only mma.sync gemms read keeps rows of its own width (a swizzle, but never panels)
    operands = {id(r.buffer) for gemm in collect(func.body, ir.Gemm) for r in (gemm.a, gemm.b)}
    tma_filled = {id(buf) for _, buf in pairs}
    for buf in shared:
        if id(buf) in layout:
            buf.attrs["swizzle"], buf.attrs["panel"] = layout[id(buf)]
        elif id(buf) in wanted:
            buf.attrs["swizzle"], buf.attrs["panel"] = tma_rules.swizzle_for_tile(buf), 0
            if not buf.attrs["swizzle"] and id(buf) in operands and id(buf) not in tma_filled:
                buf.attrs["swizzle"] = _wide_row_swizzle(buf)
            panel = 0 if id(buf) in operands else tma_rules.wide_tile_panel(buf)
            if not buf.attrs["swizzle"] and panel and gemm_rules.panels_fit(buf, panel, pairs):
                buf.attrs["swizzle"], buf.attrs["panel"] = 128, panel
        else:
            buf.attrs["swizzle"], buf.attrs["panel"] = 0, 0
    return func.with_body(_SetPlans(plans).visit(func.body))
