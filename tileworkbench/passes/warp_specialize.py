"""warp_specialize: a producer warpgroup feeds the pipelined GEMM loop through full/empty mbarriers.

Expects: tile-level IR straight from the front end (after ``rasterize_blocks``), with at most
one ``T.Pipelined`` loop at the kernel's top level.
Applies to that loop when every condition below holds (otherwise the IR is unchanged and
``func.attrs["warp_specialized"]`` says why, so ``inject_software_pipeline`` pipelines it the
plain way): sm_90a; neither ``tl.disable_warp_specialized`` nor ``tl.disable_tma_lower`` nor debug
mode; the kernel uses no barriers, TMA copies or other pipelined loops of its own; the block has
whole warpgroups; ``num_stages >= 2`` (or 1 for a loop with work between its gemms); the loop body is ``T.copy`` global -> shared of whole tiles
with constant extents, ``T.gemm`` on the wgmma path reading A and B from those tiles or from shared
tiles the loop does not write (an indexer's query block, loaded once before it; A also from a
fragment), and any other work that writes none of the loaded
tiles (attention's softmax between its two gemms; a backward's ``exp2(s - lse_shared[j])``, which
reads one, on that stage's version of it, waited for and released as a gemm's read is, then
without the overlapped schedule, and only with two consumer warpgroups or more, whose register
hand-over keeps the producer's registers from costing the SM blocks: ``rules.warp_specialization``);
room for the shared tiles, side by side, or for such a loop placed by lifetime over the consumers'
statements as ``plan_shared_memory`` places them (``shares_bytes`` in the record); the loaded tiles
used nowhere outside the loop (their versions are the roles' alone); the loads'
addresses and the loop's bounds read only what the producer computes too: the loop body's names
that read nothing the kernel writes (``rules.loop_lets``), and the scalar work before the loop.
Guarantees, when it applies (``s`` = ``num_stages``, ``C`` = the kernel's threads):
  * the launch gets ``producer_threads = 128`` more threads (``tx`` in ``[C, C + 128)``); every
    layout and thread loop still uses the ``C`` consumer threads;
  * every tile the loop loads gets ``s`` versions (slot ``(k - k0) % s``), and two barrier
    arrays of ``s`` slots: ``stage_full`` (count 32) and ``stage_empty`` (count ``C``);
  * a ``WarpSpecialize`` statement replaces the loop and everything after it. Producer: the
    first producer warp, for every ``k``, waits until the slot is empty (parity
    ``((k - k0) // s + 1) % 2``: the first ``s`` waits pass at once), loads each tile with a TMA
    copy completing on ``full`` (one elected lane, ``expect_tx`` of the tile bytes) and arrives on
    ``full``. Consumer: for every ``k``, waits for ``full`` (parity ``(k - k0) // s % 2``); in a
    loop of loads and gemms alone it issues the gemms leaving their wgmma group running
    (``in_flight=1``: it waits only for iteration ``k - 1``'s group) and then releases iteration
    ``k - 1``'s slot on ``empty``, and after the loop it waits for the last group and releases the
    last slot; in a loop with other work it runs the body's statements in order, each gemm
    complete before the next statement, and releases slot ``k`` at the end of the iteration, and
    with one stage each loaded tile has a full/empty pair of its own instead (``<tile>_full``,
    ``<tile>_empty``; with more stages too under ``tw.ws_tile_barriers``): the producer waits
    for and fills each tile in turn, the consumer waits for
    a tile before the first gemm that reads it and releases it after the last, so the producer
    loads K while the softmax and P @ V run. With two stages (unless ``tw.gemm_overlap`` is
    False), where ``rules.overlap_plan`` finds the cut (attention and flash
    decoding: two gemms, the second accumulating with A in registers, the three fragments fitting
    the registers), the tiles have a pair each and the consumer overlaps
    (``_overlapped_protocol``): iteration k issues its first gemm and iteration k - 1's second back
    to back and runs the statements between them (the softmax) while the second is still running;
    the last second gemm runs after the loop, and the codegen phase peels the first iteration off
    (``peel_first_iteration``). Then it runs the statements that followed the loop
    (the epilogue). An epilogue that is one ``T.copy`` of the accumulator fragment to a
    16-bit global tile goes through a shared tile (over the pipeline's dead tiles, after a
    consumer barrier) and one TMA store (``tw.register_epilogue`` keeps it as stores from
    registers). The scalar work before the loop (stores to ``T.alloc_var`` scalars from global
    tensors the kernel never writes: a grouped GEMM's search for its group,
    ``rules.warp_specialization.both_roles_prologue``) runs on every thread ahead of the split;
    the other statements before the loop move to the start of the consumer side. The producer
    computes the loop body's names its loads read again, as ``<name>_producer``. With ``C >= 256`` both sides rebalance registers
    (``setmaxnreg``: producer 24, consumers as many as fit).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import interval, launch_ranges, simplify
from ..ir.visitor import collect, substitute
from ..target import PassConfigKey
from .rules import epilogue as epilogue_rules
from .rules import persistent as persistent_rules
from .rules.versions import OnVersion
from .rules.warp_specialization import (FULL_ARRIVALS, PRODUCER_THREADS, OverlapPlan,
                                      consumer_work_only_gemms, register_split, is_tile_load,
                                      work_reads_loaded_tiles,
                                      both_roles_prologue, overlap_plan, producer_lets,
                                      smem_bytes_with_own_epilogue_tile, why_not)
from .manager import register
from .peel_first_iteration import PEEL_FIRST
from .plan_shared_memory import pack_by_lifetime, smem_limit

def _role_loop(loop: ir.For, body: list, role: str, stages: int, annotations: dict | None = None) -> ir.For:
    var = ir.Var(loop.var.name)
    return ir.For(var, loop.extent, substitute(ir.seq(body), {loop.var: var}), "serial", loop.start,
                  annotations=dict(annotations or {}), pipeline=ir.PipelineInfo(stages, role), loc=loop.loc)


def _stage_barriers(name: str, stages: int, consumers: int, loc) -> tuple:
    full = ir.Buffer(f"{name}_full", (ir.const(stages),), ir.dtypes.uint64, "barrier",
                     attrs={"counts": [FULL_ARRIVALS] * stages, "auto": True, "role": "full"}, loc=loc)
    empty = ir.Buffer(f"{name}_empty", (ir.const(stages),), ir.dtypes.uint64, "barrier",
                      attrs={"counts": [consumers] * stages, "auto": True, "role": "empty"}, loc=loc)
    return full, empty


def _staged_gemm(g: ir.Gemm, tile, in_flight: int) -> ir.Gemm:
    """``g`` on this stage's versions of its tiles, leaving ``in_flight`` wgmma groups running."""
    return ir.Gemm(tile(g.a), tile(g.b), g.c, g.trans_a, g.trans_b, g.clear_accum, in_flight, loc=g.loc)


def _tile_pairs_and_producer(loads, tile, slot, round_, stages, consumers, loop) -> tuple:
    """A full/empty pair per loaded tile, and the producer body that waits for each tile's slot
    to be empty and fills it in turn."""
    pairs = {id(ld.dst.buffer): _stage_barriers(ld.dst.buffer.name, stages, consumers, loop.loc) for ld in loads}
    produce = []
    for ld in loads:
        full, empty = pairs[id(ld.dst.buffer)]
        produce += [ir.BarrierWait(ir.BarrierRef(empty, slot), simplify((round_ + 1) % 2), loc=ld.loc),
                    ir.TmaCopy(ld.src, tile(ld.dst), ir.BarrierRef(full, slot), FULL_ARRIVALS, loc=ld.loc),
                    ir.BarrierArrive(ir.BarrierRef(full, slot), loc=ld.loc)]
    return pairs, produce


def _per_tile_protocol(loads, work, tile, slot, round_, stages, consumers, loop) -> tuple:
    """(barriers, producer body, consumer body) for a loop with work between its gemms: each
    loaded tile has a full/empty pair of its own, the consumer waits for a tile just before the
    first gemm that reads it and releases it right after the last, so the producer refills K while
    the softmax and P @ V run, and V while the next Q @ K^T runs (with one stage)."""
    pairs, produce = _tile_pairs_and_producer(loads, tile, slot, round_, stages, consumers, loop)

    def reads(x) -> list:
        if not isinstance(x, ir.Gemm):  # other work reading a tile (on its version already)
            return list(dict.fromkeys(key for b in collect(x, ir.Buffer) if (key := unversioned.get(id(b))) in pairs))
        return list(dict.fromkeys(id(r.buffer) for r in (x.a, x.b) if id(r.buffer) in pairs))

    # a tile's versioned buffer -> the loop's tile (the pairs' key)
    unversioned = {id(tile(ld.dst).buffer): id(ld.dst.buffer) for ld in loads} | {key: key for key in pairs}

    first, last = {}, {}
    for i, x in enumerate(work):
        for key in reads(x):
            first.setdefault(key, i)
            last[key] = i
    consume = []
    for i, x in enumerate(work):
        tiles = reads(x)  # of the tiles as the loop names them, before their versions
        consume += [ir.BarrierWait(ir.BarrierRef(pairs[key][0], slot), simplify(round_ % 2), loc=x.loc)
                    for key in tiles if first[key] == i]
        if isinstance(x, ir.Gemm):  # complete where it stands: the next statements read its result
            x = _staged_gemm(x, tile, 0)
        consume.append(x)
        consume += [ir.BarrierArrive(ir.BarrierRef(pairs[key][1], slot), loc=x.loc)
                    for key in tiles if last[key] == i]
    barriers = [b for pair in pairs.values() for b in pair]
    return barriers, produce, consume


def _overlapped_protocol(plan: OverlapPlan, pairs: dict, tile, slot, round_, loop,
                         runs_once: bool) -> tuple:
    """(consumer body, drain) under FlashAttention-3's intra-warpgroup overlap
    (``rules.OverlapPlan``). Iteration k:

        wait K_k; before; issue S = Q K_k^T
        k > k0: wait V_{k-1}; issue O += P V_{k-1}; wait for S     k = k0: wait for S
        release K_k; softmax of S (P @ V still running); wait for P @ V
        k > k0: release V_{k-1}
        rest (P's cast, O's rescale)

    and after the loop: wait V_last; O += P V_last; release V_last. Each loaded tile has its own
    full/empty pair: K's slot is free once S is computed, V's only once the next iteration's P @ V
    is. The statements run in the order the program gives them up to moving P @ V_{k-1} ahead of
    iteration k's softmax, which touches neither its operands (P, O) nor its V tile, so every
    value is what the loop as written computes. The loop keeps its iterations (the producer's),
    as the GEMM main loop does with its one group in flight."""
    k = loop.var
    first_keys = [id(r.buffer) for r in (plan.first.a, plan.first.b) if id(r.buffer) in pairs]
    second_keys = [id(r.buffer) for r in (plan.second.a, plan.second.b) if id(r.buffer) in pairs]

    def waits(keys):
        return [ir.BarrierWait(ir.BarrierRef(pairs[key][0], slot), simplify(round_ % 2), loc=loop.loc) for key in keys]

    def releases(keys):
        return [ir.BarrierArrive(ir.BarrierRef(pairs[key][1], slot), loc=loop.loc) for key in keys]

    def at(stmts: list, value) -> list:
        return [substitute(x, {k: value}) for x in stmts]

    previous = simplify(k - 1)
    later = ir.cmp(">", k, loop.start)
    issue_second = at(waits(second_keys) + [_staged_gemm(plan.second, tile, 1)], previous)  # waits for S too
    body = (waits(first_keys) + plan.before + [_staged_gemm(plan.first, tile, 1)]
            + [ir.IfThenElse(later, ir.seq(issue_second), ir.wgmma_wait(0), loc=loop.loc)]
            + releases(first_keys) + plan.overlapped + [ir.wgmma_wait(0)]
            + [ir.IfThenElse(later, ir.seq(at(releases(second_keys), previous)), loc=loop.loc)]
            + plan.rest)
    last = simplify(loop.start + loop.extent - 1)
    drain = at(waits(second_keys) + [_staged_gemm(plan.second, tile, 0)] + releases(second_keys), last)
    if runs_once:  # the loop runs at least once: no guard needed
        return body, drain
    return body, [ir.IfThenElse(ir.cmp(">", loop.extent, 0), ir.seq(drain), loc=loop.loc)]


def _overlap_wanted(ctx) -> bool:
    """``tw.gemm_overlap`` when given; otherwise yes. Causal attention, whose trip count grows with
    the query block, was left out until 2026-12-07: 0.97x on the H200 at the time, but 1.09-1.11x
    on an H100 at ``810477c`` on every head-dim-128 causal row and level at head dim 64
    (docs/experiments.md, "Attention: intra-warpgroup overlap and ping-pong")."""
    asked = ctx.configs.get(PassConfigKey.TW_GEMM_OVERLAP.value)
    return True if asked is None else bool(asked)


def _why_not_room(keep: list, epilogue: list, staged, stages: int, ctx, order=None) -> tuple[str | None, bool]:
    """(None when the shared tiles the split allocates fit, else why not; whether they fit only by
    sharing bytes). The tiles: those kept ahead of it (each loaded tile in ``stages`` versions
    already), those the epilogue allocates, and an epilogue tile of its own unless it lies over the
    pipeline's dead tiles, side by side (``smem_bytes_with_own_epilogue_tile``), or where that is
    too much and ``order`` is given (a split with no tile loop), placed by lifetime
    (``_bytes_by_lifetime``) as ``plan_shared_memory`` will place them."""
    tiles = [x.buffer for x in keep + collect(ir.seq(epilogue), ir.Allocate)
             if isinstance(x, ir.Allocate) and x.buffer.scope == "shared"]
    own = staged[0] if staged is not None and not staged[0].attrs.get("reuses_pipeline_tiles") else None
    need = smem_bytes_with_own_epilogue_tile(tiles, own, stages)
    limit = smem_limit(ctx.target.arch)
    if need <= limit:
        return None, False
    if order is not None and _bytes_by_lifetime(tiles, own, stages, *order) <= limit:
        return None, True
    return (f"the shared tiles with {stages} versions of each loaded tile need {need} bytes, more than "
            f"the {limit} of {ctx.target.arch}"), False


def _bytes_by_lifetime(tiles: list, own, stages: int, stmts: list, loop_at: int, versioned: dict) -> int:
    """The bytes of the split's tiles placed by lifetime over the consumers' statements ``stmts``
    (the pipelined loop at ``loop_at``; each tile 1024-aligned, as a swizzled one is): a loaded
    tile's versions live from the split to the loop's end (the producer fills them ahead), a TMA
    store's source and what the epilogue uses to the end, a tile nothing uses throughout, every
    other tile from its first statement to its last; plus the ring's barriers."""
    loop_tile = {id(v): k for k, v in versioned.items()}
    uses: dict = {}
    for i, x in enumerate(stmts):
        for b in collect(x, ir.Buffer):
            uses.setdefault(id(b), []).append(i)
    stored = {id(c.src.buffer) for c in collect(ir.seq(stmts), (ir.Copy, ir.TmaCopy))
              if c.src.buffer.scope == "shared" and c.dst.buffer.scope == "global"}
    last = len(stmts) - 1
    items = []
    for t in tiles:
        key = id(loop_tile.get(id(t), t))
        if id(t) in loop_tile:
            life = (0, loop_at)
        elif key not in uses:
            life = (0, last)
        else:
            ends_late = key in stored or max(uses[key]) > loop_at
            life = (min(uses[key]), last if ends_late else max(uses[key]))
        items.append((id(t), t.dtype.bytes_for(t.numel), 1024, life))
    if own is not None:
        items.append((id(own), own.dtype.bytes_for(own.numel), 1024, (loop_at + 1, last)))
    return max(end for _, end in pack_by_lifetime(items).values()) + 2 * 8 * stages


@register("warp_specialize", "tile")
def warp_specialize(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    reason = why_not(func, ctx)
    if reason is not None:
        out = func.with_body(func.body)
        out.attrs["warp_specialized"] = {"applied": False, "reason": reason}
        return out
    top = ir.statements(func.body)
    at = next(i for i, s in enumerate(top) if isinstance(s, ir.For) and s.kind == "pipelined")
    loop = top[at]
    s = loop.pipeline.stages
    consumers = func.launch.threads
    body = [x for x in ir.statements(loop.body) if not isinstance(x, ir.Comment)]
    loads = [x for x in body if is_tile_load(x)]
    # the loop body's names the loads read, computed again by the producer under names of its own
    # (the consumers keep theirs where they are)
    in_loop = producer_lets(func, loop, loads)
    fresh = {x.var: ir.Var(f"{x.var.name}_producer", x.var.dtype) for x in in_loop}
    ahead_lets = [ir.LetStmt(fresh[x.var], substitute(x.value, fresh), loc=x.loc) for x in in_loop]
    loads = [substitute(ld, fresh) for ld in loads]
    work = [x for x in body if not is_tile_load(x)]  # the gemms and what runs between them, in order
    gemm_loop = consumer_work_only_gemms(loop)
    versioned = {ld.dst.buffer: ld.dst.buffer.versioned(s) for ld in loads} if s > 1 else {}  # one stage: the tiles as they are
    reads_loaded = work_reads_loaded_tiles(work, {id(ld.dst.buffer) for ld in loads})
    ring = list({ld.dst.buffer: versioned.get(ld.dst.buffer, ld.dst.buffer) for ld in loads}.values())  # the ring's tiles

    # Which consumer statements run around the loop, and whether the kernel can be persistent:
    # the tile loop then wraps each side, and the stage counter runs on across tiles.
    # The scalar work before the loop runs on every thread ahead of the split (the producer's
    # loads may read its results); the rest of it on the consumer side.
    both = {id(x) for x in both_roles_prologue(func, top[:at])}
    keep, before = [], []
    for x in top[:at]:
        if isinstance(x, ir.Allocate):
            buf = versioned.get(x.buffer)
            keep.append(ir.Allocate(buf, loc=x.loc) if buf is not None else x)
        elif isinstance(x, (ir.LetStmt, ir.Comment)) or id(x) in both:
            keep.append(x)
        else:
            before.append(x)
    epilogue = top[at + 1:]
    register_epilogue = ctx.flag(PassConfigKey.TW_REGISTER_EPILOGUE)
    users = epilogue, keep
    staged = None if register_epilogue else epilogue_rules.staged_store(epilogue, None, "persistent")
    round_trip = None if register_epilogue or staged else epilogue_rules.shared_round_trip(epilogue, top)
    if round_trip is not None:
        staged = epilogue_rules.staged_store(round_trip[0], None, "persistent")
        if staged is not None:  # the user's own staging tile: ours takes its place (and its bytes)
            epilogue = round_trip[0]
            keep = [x for x in keep if not (isinstance(x, ir.Allocate) and x.buffer is round_trip[1])]
    own_bytes = smem_bytes_with_own_epilogue_tile(ring, staged[0] if staged else None, s)
    per_tile_stmts = before + ([] if staged else epilogue)  # the staged epilogue's tile is its own
    block_lets = [x for x in keep if isinstance(x, ir.LetStmt)]
    block_work = [x for x in keep if id(x) in both]
    not_persistent = persistent_rules.why_not(func, ctx, loop, block_lets, block_work, per_tile_stmts, own_bytes,
                                             smem_limit(ctx.target.arch))
    persistent = not_persistent is None
    if not persistent and not register_epilogue:
        staged = epilogue_rules.staged_store(epilogue, sum(t.dtype.bytes_for(t.numel) for t in ring),
                                             "consumers")
        if staged is None:  # no room for ours over the pipeline's tiles: the user's staging stays
            epilogue, keep = users
    # Tiles placed by lifetime, where side by side they do not fit: for a loop whose work reads the
    # loaded tiles (the attention backwards: TileLang's GQA backward with TMA reductions 1.98 ->
    # 1.92 ms split); the MLA decode at one split measured 1.6% slower split (0.364 -> 0.370 ms,
    # H100, 2026-12-07), so other loops keep the side-by-side rule and its one-role pipeline.
    order = None if persistent or not reads_loaded else (before + [loop] + epilogue, len(before), versioned)
    reason, shares_bytes = _why_not_room(keep, epilogue, staged, s, ctx, order)
    if reason is not None:
        out = func.with_body(func.body)
        out.attrs["warp_specialized"] = {"applied": False, "reason": reason}
        return out
    tile_iter = ir.Var("tile_iter") if persistent else None

    # The stage counter: iteration k of this block's tile_iter-th tile is stage
    # tile_iter * extent + (k - k0) of the ring (just k - k0 without a tile loop).
    counter = loop.var - loop.start
    if persistent:
        counter = tile_iter * loop.extent + counter
    slot = simplify(counter % s)
    round_ = simplify(counter // s)
    def tile(region: ir.Region) -> ir.Region:
        buf = versioned.get(region.buffer)
        return region if buf is None else region.in_version(buf, slot)

    if reads_loaded and versioned:  # what else reads a loaded tile reads the stage's version (gemms: _staged_gemm)
        work = [x if isinstance(x, ir.Gemm) else OnVersion(versioned, slot).visit(x) for x in work]

    overlap = None
    if (not gemm_loop and not persistent and s == 2 and _overlap_wanted(ctx) and not reads_loaded
            and not ctx.flag(PassConfigKey.TW_WS_TILE_BARRIERS)):
        overlap = overlap_plan(work, {id(ld.dst.buffer) for ld in loads}, consumers)
    if overlap is not None:
        pairs, produce = _tile_pairs_and_producer(loads, tile, slot, round_, s, consumers, loop)
        barriers = [b for pair in pairs.values() for b in pair]
        runs_once = (interval(loop.extent, launch_ranges(func))[0] or 0) >= 1
        consume, drain = _overlapped_protocol(overlap, pairs, tile, slot, round_, loop, runs_once)
    elif not gemm_loop and (s == 1 or ctx.flag(PassConfigKey.TW_WS_TILE_BARRIERS)):
        barriers, produce, consume = _per_tile_protocol(loads, work, tile, slot, round_, s, consumers, loop)
        drain = []
    else:
        # One full/empty pair for the whole stage: every tile of stage k lands on it.
        full, empty = _stage_barriers("stage", s, consumers, loop.loc)
        barriers = [full, empty]
        produce = [ir.BarrierWait(ir.BarrierRef(empty, slot), simplify((round_ + 1) % 2), loc=loop.loc)]
        produce += [ir.TmaCopy(ld.src, tile(ld.dst), ir.BarrierRef(full, slot), FULL_ARRIVALS, loc=ld.loc)
                    for ld in loads]
        produce.append(ir.BarrierArrive(ir.BarrierRef(full, slot), loc=loop.loc))
        consume = [ir.BarrierWait(ir.BarrierRef(full, slot), simplify(round_ % 2), loc=loop.loc)]
        if gemm_loop:
            # The consumer keeps its last gemm's wgmma group running into the next iteration: after
            # issuing stage k it waits for stage k - 1's group only, then releases that slot.
            previous = simplify((counter + s - 1) % s)
            consume += [_staged_gemm(g, tile, 1) for g in work]
            consume.append(ir.IfThenElse(ir.cmp(">", loop.var, loop.start),
                                         ir.BarrierArrive(ir.BarrierRef(empty, previous), loc=loop.loc)))
            last = simplify(substitute(counter, {loop.var: loop.start + loop.extent - 1}) % s)
            drain = [ir.wgmma_wait(0),
                     ir.BarrierArrive(ir.BarrierRef(empty, last), loc=loop.loc)]
        else:
            # Work between the gemms reads their results: each gemm completes where it stands, and
            # the stage is released once the iteration's last statement has run. (A pair per tile,
            # as for one stage, measured 7% slower here: 545 against 587 TFLOP/s for attention at
            # 4096 x 128, docs/experiments.md, "Barriers of a two-gemm pipeline".)
            consume += [_staged_gemm(x, tile, 0) if isinstance(x, ir.Gemm) else x for x in work]
            consume.append(ir.BarrierArrive(ir.BarrierRef(empty, slot), loc=loop.loc))
            drain = []

    produce = ahead_lets + produce

    def per_tile(stmts: list) -> list:
        return [persistent_rules.tile_loop(func.launch, tile_iter, stmts, loc=loop.loc)] if persistent else stmts

    tid = func.launch.thread_var
    producer = [ir.IfThenElse(ir.cmp("<", tid, consumers + 32),
                              ir.seq(per_tile([_role_loop(loop, produce, "producer", s)])))]
    consumer = []
    registers = register_split(func.launch, consumers, loop.loc)
    if registers is not None:
        producer.insert(0, ir.set_max_registers(registers[0], increase=False))
        consumer.append(ir.set_max_registers(registers[1], increase=True))
    if staged is not None:
        epilogue_tile, epilogue = staged
        keep.append(ir.Allocate(epilogue_tile, loc=epilogue_tile.loc))
    what = (f"consumer: stage {loop.var.name}'s first gemm beside stage {loop.var.name} - 1's second, the work "
            "between them while the second runs" if overlap is not None else
            f"consumer: wait for stage {loop.var.name}, gemm, release the slot")
    # the overlapped loop's first iteration issues no P @ V: peeled off in the codegen phase
    peel = {PEEL_FIRST: True} if overlap is not None else None
    consumer += per_tile(before + [ir.Comment(what), _role_loop(loop, consume, "consumer", s, peel), *drain,
                                   *epilogue])
    if persistent and staged is not None:
        consumer.append(ir.TmaStoreWait(read=True, loc=epilogue_tile.loc))  # the last tile read before exit
    split = ir.WarpSpecialize(
        ir.seq([ir.Comment(f"producer: one warp issues the TMA loads, up to {s} stage{'s' if s > 1 else ''} ahead"), *producer]),
        ir.seq(consumer), consumers, PRODUCER_THREADS, loc=loop.loc)
    out = func.with_body(ir.seq(keep + [ir.Allocate(b, loc=loop.loc) for b in barriers] + [split]))
    out.launch = dataclasses.replace(func.launch, producer_threads=PRODUCER_THREADS,
                                     persistent_tiles=persistent_rules.tile_count(func.launch) if persistent else 0)
    out.attrs["warp_specialized"] = {
        "applied": True, "stages": s, "consumer_threads": consumers, "producer_threads": PRODUCER_THREADS,
        "tiles": [ld.dst.buffer.name for ld in loads], "barriers": [b.name for b in barriers],
        "registers": {"producer": registers[0], "consumer": registers[1]} if registers is not None else None,
        "epilogue": "shared memory + TMA store" if staged is not None else "stores from registers",
        "persistent": {"applied": True, "tiles": persistent_rules.tile_count(func.launch)} if persistent
        else {"applied": False, "reason": not_persistent},
        "gemm_overlap": overlap is not None,
        "shares_bytes": shares_bytes,  # fits only with tiles placed by lifetime (plan_shared_memory)
    }
    out.attrs.setdefault("pipelines", []).append({
        "loop": loop.var.name, "stages": s, "buffers": [b.name for b in ring],
        "barriers": [b.name for b in barriers], "producers": len(loads), "mode": "warp_specialized"})
    return out
