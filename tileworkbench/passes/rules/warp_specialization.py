"""When ``warp_specialize`` applies and what it sizes: the conditions on the kernel
(:func:`why_not` says which one fails), the registers each side keeps, the shared memory an
epilogue tile of its own would take. The pass itself builds the split."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.visitor import buffers_written, collect, reassigned_vars
from ...target import PassConfigKey
from . import gemm as gemm_rules
from . import tma as tma_rules
from .loop_lets import lets_read_by, written_buffer_ids

PRODUCER_THREADS = 128
PRODUCER_REGISTERS = 24
REGISTER_FILE = 65536
FULL_ARRIVALS = 32  # the producer warp arrives on ``full``; one lane adds the expected bytes


def is_tile_load(s) -> bool:
    """A load the producer can issue as one TMA copy: a whole shared tile from a global tensor of the
    same dtype (TMA moves bytes as they are; a load that converts stays the threads'), not packed FP4
    (its tensor map is sm_100's)."""
    return (isinstance(s, ir.Copy) and s.instruction is None and s.src.buffer.scope == "global"
            and s.dst.buffer.scope == "shared" and s.src.static_extents() is not None
            and s.dst.is_full and s.src.buffer.dtype == s.dst.buffer.dtype and not s.dst.buffer.dtype.packed)


def launch_registers(threads: int) -> int:
    """Registers each thread of a block of ``threads`` that hands registers over (``setmaxnreg``)
    starts with: its share of the register file, as the launch bounds let ptxas give it (a
    multiple of 8)."""
    return REGISTER_FILE // threads // 8 * 8


def starting_registers(consumer_threads: int) -> int:
    """Registers each thread of the split block starts with (``launch_registers``)."""
    return launch_registers(consumer_threads + PRODUCER_THREADS)


def block_registers(consumer_threads: int) -> int:
    """The registers the block holds for its whole life: every thread's starting count. What the
    producer gives back with ``setmaxnreg.dec`` is all ``setmaxnreg.inc`` can hand the consumers;
    asking for more than the block holds blocks them for ever (640 threads start with 96 each,
    61440 in all: consumers at 120 hung on the H100, 2026-12-06, at 112 they ran)."""
    return starting_registers(consumer_threads) * (consumer_threads + PRODUCER_THREADS)


def consumer_registers(consumer_threads: int, producer_registers: int = PRODUCER_REGISTERS) -> int:
    """Registers per consumer thread once the producer warpgroup has given its surplus back."""
    free = block_registers(consumer_threads) - PRODUCER_THREADS * producer_registers
    return min(240, free // consumer_threads // 8 * 8)


def register_split(launch, consumer_threads: int, loc=None) -> tuple[int, int] | None:
    """(producer, consumer) registers per thread for the ``setmaxnreg`` hand-over, or None where
    there is none: fewer than two consumer warpgroups, or ``T.disable_warp_group_reg_alloc()``.
    Counts the program gives (``T.annotate_*_reg_*``) must fit the block's registers together
    (``block_registers``), the producer's at most and the consumers' at least what each thread
    starts with."""
    if consumer_threads < 256 or not launch.register_handover:
        return None
    producer = launch.producer_registers or PRODUCER_REGISTERS
    consumer = launch.consumer_registers or consumer_registers(consumer_threads, producer)
    # setmaxnreg.dec may only lower a thread's count and .inc only raise it
    start = starting_registers(consumer_threads)
    if producer > start or consumer < start:
        raise CompileError(f"the producer warpgroup can only give registers back and the consumers only take "
                           f"them: each thread starts with {start}, so the producer keeps at most {start} (not "
                           f"{producer}) and the consumers grow to at least {start} (not {consumer})", loc)
    held = block_registers(consumer_threads)
    if PRODUCER_THREADS * producer + consumer_threads * consumer > held:
        raise CompileError(f"the warp-specialised kernel's registers do not fit the {held} its block holds "
                           f"({consumer_threads + PRODUCER_THREADS} threads x {start}): {PRODUCER_THREADS} producer "
                           f"threads x {producer} + {consumer_threads} consumer threads x {consumer} "
                           "(T.annotate_producer_reg_dealloc / T.annotate_consumer_reg_alloc)", loc)
    return producer, consumer


def _accesses(stmt) -> list:
    return collect(stmt, (ir.Region, ir.BufferLoad, ir.BufferStore))


def why_not(func: ir.PrimFunc, ctx) -> str | None:
    """None when the kernel can be warp-specialised, else the reason it is not."""
    if ctx.target.arch != "sm_90a":
        return f"target {ctx.target.arch} (warp specialisation is for sm_90a)"
    for key, what in ((PassConfigKey.TL_DISABLE_WARP_SPECIALIZED, "tl.disable_warp_specialized"),
                      (PassConfigKey.TL_DISABLE_TMA_LOWER, "tl.disable_tma_lower")):
        if ctx.flag(key):
            return f"{what} is set"
    if ctx.flag(PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT):
        return "debug mode keeps the single-role pipeline, whose every wait can be bounded"
    if func.launch.threads % 128:
        return f"{func.launch.threads} threads are not whole warpgroups"
    if collect(func.body, ir.ThreadScope):
        return "the kernel is warp-specialised by hand (T.ws)"
    if ir.syncs_grid(func.body):
        return "the kernel has grid barriers (T.sync_grid), which all of each block's threads meet together"
    if collect(func.body, (ir.TmaCopy, ir.BarrierArrive, ir.BarrierWait)) or \
            any(a.buffer.scope == "barrier" for a in collect(func.body, ir.Allocate)):
        return "the kernel synchronises with barriers of its own"
    loops = [f for f in collect(func.body, ir.For) if f.kind == "pipelined"]
    if len(loops) != 1:
        return f"{len(loops)} pipelined loops (one is handled)"
    loop = loops[0]
    if loop.pipeline.stages < 1:
        return "num_stages=0 (no pipelining asked for: the loop runs its copies and gemms in turn)"
    if loop.pipeline.stages < 2 and consumer_work_only_gemms(loop):
        return "num_stages < 2 (the producer could not run ahead)"
    if not any(s is loop for s in ir.statements(func.body)):
        return "the pipelined loop is nested in another statement"
    body = [s for s in ir.statements(loop.body) if not isinstance(s, ir.Comment)]
    loads = [s for s in body if is_tile_load(s)]
    gemms = [s for s in body if isinstance(s, ir.Gemm)]
    if any(isinstance(s, ir.Copy) and s.instruction == "threads" and s.src.buffer.scope == "global" for s in body):
        return "a load in the loop is T.copy(..., disable_tma=True): the producer would load it by TMA"
    if not loads or not gemms:
        return "the loop body has no whole-tile T.copy load or no T.gemm at its top level"
    loaded = {id(s.dst.buffer) for s in loads}
    if len(loaded) != len(loads):
        return "a tile is loaded twice in one iteration"
    # each loaded tile becomes versions only the loop's roles use: a use elsewhere would name the
    # tile as it was, no longer allocated (a second loop over the same tiles wrote them unswizzled
    # while its wgmma read them swizzled); inject_software_pipeline handles that case
    in_loop = {id(node) for node in _accesses(loop)}
    outside = [node.buffer.name for node in _accesses(func.body) if id(node.buffer) in loaded and id(node) not in in_loop]
    if outside:
        return f"tile {outside[0]} is also used outside the pipelined loop"
    others = [s for s in body if not is_tile_load(s) and not isinstance(s, ir.Gemm)]
    reason = _why_not_consumer_work(others, loaded)
    if reason is not None:
        return reason
    if work_reads_loaded_tiles(others, loaded) and (func.launch.threads < 256 or not func.launch.register_handover):
        # Without the hand-over a producer warpgroup holds as many registers as a consumer one: a
        # kernel at the register limit fits half the blocks an SM ran (TileLang's MHA backward at
        # 128 threads: 0.74 -> 0.87 ms split, its GQA backward at 256: 1.90 -> 1.81; H100, 2026-12-07)
        return ("work besides the gemms reads a tile the loop loads, and with one consumer warpgroup (no "
                "register hand-over) the producer's registers would cost the SM blocks")
    reason = _why_not_producer_names(func, loop, body, loads)
    if reason is not None:
        return reason
    written = {id(b) for s in body if not is_tile_load(s) for b in buffers_written(s)}
    # a GEMM main loop's accumulators must fit what the split leaves (a loop with work between its
    # gemms, attention's, is left to ptxas, whose refusal names the registers: tests/robustness)
    accumulators = {id(g.c.buffer): g.c.buffer for g in gemms if g.c.buffer.scope == "fragment"}
    live = sum(_registers(b, func.launch.threads) for b in accumulators.values())
    budget = max(consumer_registers(func.launch.threads), starting_registers(func.launch.threads))
    if consumer_work_only_gemms(loop) and live + SPLIT_REGISTER_MARGIN > budget:
        return (f"the gemms' accumulators take {live} registers a consumer thread, and the split leaves "
                f"{budget} (with {SPLIT_REGISTER_MARGIN} for the rest); the one-role block keeps them")
    # the panels the gemms' plans will store their operand tiles in (choose_shared_layouts sets
    # them later): TMA moves such a tile a panel wide, so a tile of 512 columns is no box too wide
    plans = [gemm_rules.wgmma_plan(g, func.launch.threads, ctx) for g in gemms]
    panels = {}
    for g, plan in zip(gemms, plans):
        if plan is not None:
            panels.setdefault(id(g.b.buffer), plan.b_panel)
            if not plan.a_registers:
                panels.setdefault(id(g.a.buffer), plan.a_panel)
    for ld in loads:
        try:
            tma_rules.build_descriptor(ld.src, ld.dst.buffer, ld.loc, panels.get(id(ld.dst.buffer)))
        except CompileError as err:
            return f"T.copy of {ld.src.buffer.name} cannot be a TMA copy ({err.message})"
        stride = tma_rules.unproven_stride(ld.src.buffer)
        if stride is not None:
            return (f"T.copy of {ld.src.buffer.name} cannot be a TMA copy for every call: its stride {stride} "
                    "(elements) is set by the call's sizes and may not be a multiple of 16 bytes")
    # every loaded tile read in the loop (a consumer's wait and release of it stand at its reads)
    read = {id(r.buffer) for g in gemms for r in (g.a, g.b)}
    read |= {id(b) for x in others for b in collect(x, ir.Buffer)}
    unread = [ld.dst.buffer.name for ld in loads if id(ld.dst.buffer) not in read]
    if unread:
        return f"the loop loads {unread[0]}, which nothing in it reads"
    # an operand tile the loop does not load stays where it is: the consumers may write it (the
    # MLA decode's scores, S_shared = P, read by P @ KV) where each gemm completes before the next
    # statement, but not under a gemm whose wgmma group runs into the next iteration
    work = [s for s in body if not is_tile_load(s)]
    groups_run_on = consumer_work_only_gemms(loop) or (
        not work_reads_loaded_tiles(work, loaded) and overlap_plan(work, loaded, func.launch.threads) is not None)
    pairs = [(ld.src, ld.dst.buffer) for ld in loads]
    for g, plan in zip(gemms, plans):
        if groups_run_on:
            for operand in (g.a.buffer, g.b.buffer):
                if id(operand) not in loaded and operand.scope == "shared" and id(operand) in written:
                    return f"a gemm reads {operand.name}, which the loop writes in shared memory but does not load"
        if plan is None:
            # mma.sync (a block too short for a warpgroup's 64 rows: a backward's dQ = dS^T K over
            # 32 rows) on tiles the loop does not load, where each gemm completes where it stands
            if groups_run_on or any(id(r.buffer) in loaded for r in (g.a, g.b)):
                return "a gemm is not on the wgmma path"
            continue
        if not gemm_rules.plan_fits(plan, g, pairs):
            return "TMA cannot fill an operand tile in the 128-byte panels wgmma reads it from"
        step = _k_step_bytes(g)
        if step is not None and step < MIN_K_STEP_BYTES and consumer_work_only_gemms(loop):
            return (f"a k-step of {step} bytes per row (block_K {step // g.a.buffer.dtype.bytes_for(1)}): too little "
                    f"work per stage for a producer warpgroup to pay for itself (docs/experiments.md, "
                    f"'Warp specialisation by tile'); k-steps of {MIN_K_STEP_BYTES} bytes or more (block_K >= 64 for "
                    "16-bit types) are warp-specialised")
    return None


# What a statement both roles run may hold: scalar work only (no tile operation, no call)
_SCALAR_WORK = (ir.BufferStore, ir.For, ir.IfThenElse, ir.LetStmt, ir.Assign, ir.SeqStmt, ir.Comment)


def _is_scalar_work(stmt, thread_var, written: set) -> bool:
    """``stmt`` computes per-thread scalars from what every thread reads alike: it stores only to
    local buffers (``T.alloc_var``, ``T.alloc_local``) in serial loops and ifs, and reads
    constants, names, local buffers and global tensors the kernel never writes (``written``);
    no thread index, no call."""
    if not all(isinstance(n, _SCALAR_WORK) for n in collect(stmt, ir.Stmt)):
        return False
    if any(f.kind not in ("serial", "unrolled") for f in collect(stmt, ir.For)):
        return False
    if any(n.buffer.scope != "local" for n in collect(stmt, ir.BufferStore)):
        return False
    if any(ld.buffer.scope != "local" and (ld.buffer.scope != "global" or id(ld.buffer) in written)
           for ld in collect(stmt, ir.BufferLoad)):
        return False
    return not collect(stmt, (ir.Call, ir.Raw)) and thread_var not in collect(stmt, ir.Var)


def _reads_and_writes(stmt) -> tuple[set, set]:
    """(what ``stmt`` reads, what it writes): buffer ids and names, conservatively (every buffer
    it names counts as read)."""
    writes = written_buffer_ids(stmt) | reassigned_vars(stmt)
    return {id(b) for b in collect(stmt, ir.Buffer)} | set(collect(stmt, ir.Var)), writes


def both_roles_prologue(func: ir.PrimFunc, before: list) -> list:
    """The statements before the pipelined loop (``before``, in order) that every thread runs
    ahead of the split into producer and consumers, so that both have their results: scalar work
    (``_is_scalar_work``), which is how TileLang's grouped GEMM finds its group and its FP8
    indexer its range of keys before the loop whose loads read them. One goes there only if no
    statement left on the consumer side before it writes what it reads, or reads or writes what it
    writes (it moves ahead of them). Lets and allocations are not listed: they stay ahead anyway."""
    written = written_buffer_ids(func.body)
    moved, staying = [], []
    for x in before:
        if isinstance(x, (ir.LetStmt, ir.Allocate, ir.Comment)):
            continue
        reads, writes = _reads_and_writes(x)
        clash = any(w & (reads | writes) or r & writes for r, w in map(_reads_and_writes, staying))
        if not clash and _is_scalar_work(x, func.launch.thread_var, written):
            moved.append(x)
        else:
            staying.append(x)
    return moved


def producer_lets(func: ir.PrimFunc, loop: ir.For, loads: list) -> list | None:
    """The loop body's ``LetStmt``s the loads' addresses read (``rules.loop_lets``), for the
    producer to compute again (TileLang's varlen attention: ``actual_k = k + start``); None where
    one reads what the producer cannot compute."""
    body = [x for x in ir.statements(loop.body) if not isinstance(x, ir.Comment)]
    return lets_read_by(loads, body, loop, written_buffer_ids(func.body))


def _why_not_producer_names(func: ir.PrimFunc, loop: ir.For, body: list, loads: list) -> str | None:
    """None when the two sides know the names they read. The producer runs the loop, its loads
    and the loop body's names those read (``producer_lets``), and, ahead of the split, the scalar
    work before the loop (``both_roles_prologue``); every other statement before the loop runs on
    the consumer side only. So the loads' addresses and the loop's bounds may not read, directly
    or through other names, a name one of those statements assigns or a buffer one writes (a
    statement assigning the group index after a tile copy, say). And the names bound before the
    loop move ahead of the consumers' statements to serve both sides, so none bound after one of
    them may read what those write."""
    top = ir.statements(func.body)
    before = top[:next(i for i, x in enumerate(top) if x is loop)]
    prologue = both_roles_prologue(func, before)
    moved = {id(x) for x in prologue}
    staying = [x for x in before if id(x) not in moved]
    # assigned where the producer does not run: on the consumer side before the loop, or in it
    # (after it: the epilogue, past the producer's last load; a persistent kernel's tiles have a
    # rule of their own)
    assigned = reassigned_vars(ir.seq(staying)) | reassigned_vars(loop.body)
    written = written_buffer_ids(ir.seq([x for x in top if id(x) not in moved]))

    def changing(e) -> tuple[str, str] | None:
        """(name, "writes" or "assigns") of a buffer ``e`` reads that a statement the producer
        does not run writes (a scalar, a tile, a tensor the kernel stores to) or that is no
        global tensor or local scalar, or of a name such a statement assigns; None."""
        for ld in collect(e, ir.BufferLoad):
            if ld.buffer.scope not in ("global", "local") or id(ld.buffer) in written:
                return ld.buffer.name, "writes"
        return next(((v.name, "assigns") for v in collect(e, ir.Var) if v in assigned), None)

    after_work = False
    for x in staying:
        found = changing(x.value) if isinstance(x, ir.LetStmt) and after_work else None
        if found is not None:
            return f"{x.var.name} is computed after statements whose results it may read ({found[0]})"
        after_work |= not isinstance(x, (ir.LetStmt, ir.Allocate, ir.Comment))
    in_loop = producer_lets(func, loop, loads)
    if in_loop is None:
        inner = next(v for ld in loads for v in collect(ld.src, ir.Var)
                     if any(v is x.var for x in body if isinstance(x, ir.LetStmt)))
        return (f"a T.copy's address reads {inner.name}, which the loop body computes from what the "
                "producer cannot compute ahead")
    lets = {x.var: x.value for x in collect(func.body, ir.LetStmt)}
    bound_in_loop = {x.var for x in body if isinstance(x, ir.LetStmt)} - {x.var for x in in_loop}
    exprs, seen = [loop.start, loop.extent, *[i for ld in loads for i in ld.src.starts]], set()
    while exprs:  # the addresses and bounds, and the values of the names they read, in turn
        e = exprs.pop()
        names = [v for v in dict.fromkeys(collect(e, ir.Var)) if v not in seen]
        seen.update(names)
        inner = next((v for v in names if v in bound_in_loop), None)
        if inner is not None:
            return f"a T.copy's address reads {inner.name}, which the loop body computes"
        found = changing(e)
        if found is not None:
            return f"a T.copy's address or the loop's bounds read {found[0]}, which the kernel {found[1]}"
        exprs += [lets[v] for v in names if v in lets]
    return None


def _why_not_consumer_work(work: list, loaded: set) -> str | None:
    """None when the loop's statements besides its tile loads and gemms (attention's softmax
    between Q @ K^T and P @ V; a backward's ``exp2(s * scale - lse_shared[j])``) can run on the
    consumer side: they write none of the tiles the producer refills (reading them is waited for
    and released as the gemms' reads are: ``work_reads_loaded_tiles``) and load nothing from
    global memory into shared memory."""
    for stmt in work:
        written = written_buffer_ids(stmt) & loaded  # stores, copies, fills, gemms, atomic targets
        if written:
            name = next(b.name for b in collect(stmt, ir.Buffer) if id(b) in written)
            return f"a statement besides the T.copy loads and T.gemm writes {name}, a tile the loop loads"
        for copy in collect(stmt, (ir.Copy, ir.Im2Col)):
            if copy.src.buffer.scope == "global" and copy.dst.buffer.scope == "shared":
                return "the loop copies global memory to shared memory other than in whole tiles of the tensor's dtype"
    return None  # (a pipelined loop inside it: why_not refuses a second pipelined loop already)


def work_reads_loaded_tiles(work: list, loaded: set) -> bool:
    """Whether a consumer statement other than a gemm reads a tile the producer loads (then the
    loop takes no overlapped schedule: its cut knows the gemms' reads alone)."""
    return any(id(b) in loaded for x in work if not isinstance(x, ir.Gemm) for b in collect(x, ir.Buffer))


def consumer_work_only_gemms(loop: ir.For) -> bool:
    """The loop body is only tile loads and gemms (a GEMM main loop): the consumer may keep a gemm's
    wgmma group running into the next iteration. Otherwise each gemm completes where it stands."""
    return all(is_tile_load(s) or isinstance(s, (ir.Gemm, ir.Comment)) for s in ir.statements(loop.body))


# Below this many bytes of K per stage (block_K = 32 of 16-bit types) the plain pipeline of a GEMM
# main loop is faster: 0.67x / 0.72x at 128x128x32 (4096^3 / 8192^3), while every block_K = 64 tile
# gains 1.4-1.8x. A loop with work besides its gemms (the FP8 indexers' scoring and stores each
# stage) is split whatever its k-step: the producer loads ahead while the consumers do that work
# (the FP8 indexer at 64-byte k-steps: 0.144 ms split, 0.199 ms not, H100, 2026-12-06).
MIN_K_STEP_BYTES = 128


def _k_step_bytes(g: ir.Gemm) -> int | None:
    """The bytes of K a gemm consumes per call, per row of A (None if not constant)."""
    extents = g.a.static_extents()
    if not extents:
        return None
    return g.a.buffer.dtype.bytes_for(extents[0] if g.trans_a else extents[-1])


def smem_bytes_with_own_epilogue_tile(tiles, epilogue_tile, stages: int) -> int:
    """Shared memory of ``tiles`` (the pipeline's, or all the split keeps), the ring's barriers and
    an epilogue tile of its own (each tile 1024-aligned, as ``plan_shared_memory`` places swizzled
    tiles)."""
    def aligned(n):
        return -(-n // 1024) * 1024
    total = sum(aligned(t.dtype.bytes_for(t.numel)) for t in tiles)
    if epilogue_tile is not None:
        total += aligned(epilogue_tile.dtype.bytes_for(epilogue_tile.numel))
    return total + 2 * 8 * stages


@dataclass
class OverlapPlan:
    """A two-gemm loop body (attention's) cut for FlashAttention-3's intra-warpgroup overlap:
    iteration k issues ``first`` (S = Q @ K_k^T) and then iteration k - 1's ``second``
    (O += P @ V_{k-1}), waits for ``first`` only, runs ``overlapped`` while ``second`` is still on
    the tensor cores, waits for it, then runs ``rest``."""

    before: list  # statements before the first gemm (S's initial value): beside the previous second gemm too
    first: ir.Gemm
    overlapped: list  # after the first gemm, touching neither register operand of the second (the softmax)
    rest: list  # from the first statement that does (P's cast, O's rescale) to the second gemm
    second: ir.Gemm


# Registers a consumer thread needs beside its gemms' accumulators (addresses, loop counters): a
# 512-column accumulator of 256 registers a thread, where the split leaves 240, would spill.
SPLIT_REGISTER_MARGIN = 32

# Registers a consumer thread needs beside the three fragments the overlap keeps alive at once
# (addresses, loop counters, a row's max and sum): with head dim 64 and 256-key tiles the three
# take 224 of 240 and ptxas spilled and serialised the wgmmas; with head dim 128 and 176 or 192
# keys a tile (FlashAttention-3's non-causal tile is 128 x 176) they take 196 or 208, and NVRTC
# 13.5 compiles both overlapped without a spill (it was 48 until 2026-12-07, which kept those two
# plain).
OVERLAP_REGISTER_MARGIN = 32


def _registers(buf: ir.Buffer, threads: int) -> int:
    return -(-buf.dtype.bytes_for(buf.numel) // (4 * threads))


def overlap_plan(work: list, loaded: set, threads: int) -> OverlapPlan | None:
    """The cut of a warp-specialised loop's consumer statements (``work``: everything but the tile
    loads, in order), or None where the schedule would change what the loop computes or gain
    nothing. It needs: exactly two gemms, the second last, accumulating (not clearing) into a
    fragment and reading A from a fragment (registers the in-flight wgmma reads); the two gemms
    reading different loaded tiles (each then has its own barrier pair); nothing before the second
    gemm but the first gemm itself touching the loaded tiles; and, between them, a first statement
    that touches neither the second gemm's A nor its accumulator (that part runs while the
    previous iteration's second gemm still reads and writes them). The first gemm's accumulator,
    the second's A and its accumulator are all alive at once then, and must fit the consumer's
    registers with ``OVERLAP_REGISTER_MARGIN`` to spare."""
    positions = [i for i, x in enumerate(work) if isinstance(x, ir.Gemm)]
    if len(positions) != 2 or positions[1] != len(work) - 1:
        return None
    first, second = work[positions[0]], work[positions[1]]
    if second.may_clear or second.a.buffer.scope != "fragment" or second.c.buffer.scope != "fragment":
        return None
    live = sum(_registers(b, threads) for b in (first.c.buffer, second.a.buffer, second.c.buffer))
    if live + OVERLAP_REGISTER_MARGIN > consumer_registers(threads):
        return None
    busy = {id(second.a.buffer), id(second.c.buffer)}
    if any(id(r.buffer) in busy for r in (first.a, first.b, first.c)):
        return None
    first_tiles = {id(r.buffer) for r in (first.a, first.b)} & loaded
    second_tiles = {id(r.buffer) for r in (second.a, second.b)} & loaded
    if not first_tiles or not second_tiles or first_tiles & second_tiles:
        return None
    before, between = work[:positions[0]], work[positions[0] + 1:positions[1]]

    def touches(stmt) -> bool:
        return any(id(b) in busy for b in collect(stmt, ir.Buffer))

    if any(touches(x) for x in before):
        return None
    cut = next((i for i, x in enumerate(between) if touches(x)), len(between))
    if cut == 0:
        return None
    return OverlapPlan(before, first, between[:cut], between[cut:], second)
