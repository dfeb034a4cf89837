"""lower_tma: TMA copies and mbarrier operations become calls into ``tw/sync.h`` and ``tw/tma.h``.

Expects: tile-level IR with shared layouts chosen (``choose_shared_layouts``).
Guarantees:
  * ``T.tma_copy`` load -> inside ``tw::shuffle_elect<L>()`` (L = leader scope, default the
    whole block): ``bar.expect_transaction(bytes)`` then the TMA load. No arrive, no wait.
  * ``T.tma_copy`` store -> async-proxy fence and block barrier (threads wrote the tile), then
    inside the elected thread (thread 0 in a persistent kernel's tile loop) the bulk store and
    ``tma_store_arrive`` (commit). No wait.
  * ``T.copy(shared, global, prefer_instruction="tma")`` -> the same, then the issuer waits for the
    store's writes; a TMA reduction (``ir.Copy(reduce="add")``, ``T.atomic_add(..., use_tma=True)``)
    is the same sequence with ``tw::tma_store_add``, its issuer waiting only until the tile may be
    written again where nothing else in the kernel names the tensor (no later access of the block
    is ordered after its adds), else for its writes.
  * ``T.copy(..., prefer_instruction="tma")`` -> a synchronous TMA: an automatic barrier
    ``<src>_to_<dst>_mbarrier`` (count 1), elected ``arrive_and_expect_tx`` + load, and every
    thread waits for the phase: 0 outside loops, the iteration's parity inside a loop nest that
    runs each body the product of its extents times; where the count of earlier executions is
    not that (an ``if`` inside the loops skips some, an inner loop's extent changes, a ``while``
    loop runs it) the phase is
    a scalar the wait flips (``<barrier>_phase``), so a skipped copy never makes a later wait
    pass on an old phase.
  * each copy is descriptorless (``cp.async.bulk``) when the global region is contiguous, the
    tile unswizzled, the size a multiple of 16 bytes and the region inside the tensor for every
    block and loop iteration (the ranges ``CodegenWalk`` keeps: a bulk copy neither zero-fills nor
    clips, so a partial last tile would be read or written past the tensor's end); otherwise it
    uses a tiled tensor map,
    recorded in ``func.attrs["tma_descriptors"]`` and passed as a ``__grid_constant__`` param.
  * barrier allocations are followed by their initialisation (one thread, init fence, block
    barrier); arrives/waits/store-waits become member calls; an arrival once the thread's
    ``cp.async`` copies land (``T.cp_async_barrier_noinc``) is ``.arrive_after_copies``, and every
    wait on such a barrier is followed by an async-proxy fence (wgmma and TMA read what they wrote).
``bytes`` counts the payload: 4 bits per FP4 element even when shared memory unpacks them.
"""

from __future__ import annotations

from .. import dtypes
from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.simplify import simplify
from ..ir.visitor import collect
from .rules import tma as tma_rules
from .rules.codegen_ranges import CodegenWalk
from .rules.thread_scopes import ScopedThreads
from .rules.calls import address_of, barrier_init, call, elect, needs_16_byte_alignment, tile_base, tile_column
from .manager import register

FP4_MAP_TYPES = (dtypes.float4_e2m1fn.tma_code, dtypes.float4_e2m1_unpacked.tma_code)  # 16U4 maps: sm_100 on


class _LowerTma(ScopedThreads, CodegenWalk):
    """Lowers the copies and barrier operations; ``self.ranges`` (``CodegenWalk``) bounds the block
    indices and loop variables, which say whether a region lies inside its tensor."""

    def __init__(self, func: ir.PrimFunc, arch: str = "sm_90a"):
        super().__init__(func)
        self.func = func
        self.threads = func.launch.threads
        self.tid = func.launch.thread_var  # inside a T.ws scope: the scope's (rules.thread_scopes)
        self.descriptors: dict = {}  # key -> TmaDescriptor
        self.arch = arch
        self.auto_barriers: list[ir.Buffer] = []
        self.phase_vars: list[ir.Var] = []  # auto barriers whose phase is counted in a scalar
        self.loops: list[ir.For] = []
        self.branches_in_loops = 0  # ifs entered inside a loop around the statement being lowered
        # barriers ``cp.async`` copies arrive on (``T.cp_async_barrier_noinc``): their waits fence
        self.copy_barriers = {s.barrier.buffer for s in collect(func.body, ir.BarrierArrive) if s.after_copies}
        self.only_reduced = _only_reduced(func.body)

    # ---- helpers -----------------------------------------------------------------------------
    def descriptor(self, g_region: ir.Region, shared: ir.Buffer, loc):
        desc = tma_rules.build_descriptor(g_region, shared, loc)
        if desc.data_type in FP4_MAP_TYPES and not self.arch.startswith("sm_10"):
            raise CompileError(f"moving FP4 {g_region.buffer.name} by TMA here takes a tensor map of 4-bit elements "
                               f"({dtypes.TMA_TYPE_NAMES[desc.data_type]}), which only sm_100 and later run, not "
                               f"{self.arch}: copy it by threads (T.copy without prefer_instruction='tma', whose "
                               "threads move packed tiles in whole bytes), or as whole contiguous rows (one bulk "
                               "copy, which moves bytes as they are)", loc)
        existing = self.descriptors.get(desc.key())
        if existing is not None:
            return existing
        names = {d.name for d in self.descriptors.values()}
        base, n = desc.name, 1
        while desc.name in names:
            desc.name = f"{base}_{n}"
            n += 1
        self.descriptors[desc.key()] = desc
        return desc

    def load_call(self, g: ir.Region, s: ir.Region, bar: ir.BarrierRef, loc) -> ir.Stmt:
        if tma_rules.can_bulk_copy(g, s.buffer, self.ranges):
            needs_16_byte_alignment(g.buffer)
            return call("tw::tma_load", tile_base(s), address_of(g.buffer, g.starts),
                        ir.const(tma_rules.region_bytes(g)), bar)
        desc = self.descriptor(g, s.buffer, loc)
        return ir.seq([call("tw::tma_load", ir.Raw(desc.name), bar, tile_column(s, col), *coords)
                       for col, coords in tma_rules.tma_copies(g, s.buffer)])

    def store_call(self, s: ir.Region, g: ir.Region, loc, reduce: str | None = None) -> ir.Stmt:
        name = ir.TMA_REDUCE_CALLS[reduce] if reduce else ir.TMA_STORE
        if tma_rules.can_bulk_copy(g, s.buffer, self.ranges):
            needs_16_byte_alignment(g.buffer)
            return call(name, address_of(g.buffer, g.starts), tile_base(s), ir.const(tma_rules.region_bytes(g)))
        desc = self.descriptor(g, s.buffer, loc)
        return ir.seq([call(name, ir.Raw(desc.name), tile_column(s, col), *coords)
                       for col, coords in tma_rules.tma_copies(g, s.buffer)])

    def store_sequence(self, s: ir.Region, g: ir.Region, loc, wait: bool, reduce: str | None = None) -> ir.Stmt:
        issue = [self.store_call(s, g, loc, reduce), call("tw::tma_store_arrive")]
        if wait:
            # A reduction into a tensor the kernel touches nowhere else waits only until its tile
            # may be written again: no later access of this block's orders after its adds.
            read_only = reduce is not None and g.buffer in self.only_reduced
            issue.append(call(f"tw::tma_store_wait<{'true' if read_only else 'false'}>"))
        return ir.seq([
            call("tw::fence_proxy_async"),  # make the threads' writes to the tile visible to TMA
            ir.SyncThreads(),
            ir.IfThenElse(self.store_issuer(), ir.seq(issue)),
        ])

    def store_issuer(self) -> ir.Expr:
        """Which thread issues a bulk store: the elected one, or thread 0 inside a persistent
        kernel's tile loop, where an elect costs the whole GEMM about 6% (ptxas; measured on the
        H200, docs/experiments.md, 'Store issuer in the persistent kernel'). Any one thread will
        do: every thread waits."""
        if any(loop.annotations.get(ir.TILE_LOOP) for loop in self.loops):
            return ir.cmp("==", self.func.launch.thread_var, 0)
        return elect(self.threads)

    def counts_by_iteration(self) -> bool:
        """Whether the iteration indices count the executions of the statement being lowered: no
        ``if`` inside the loops and every loop but the outermost of one constant extent."""
        return not self.branches_in_loops and all(
            ir.const_int(loop.extent) is not None and ir.const_int(loop.start) is not None
            for loop in self.loops[1:])

    def iteration_parity(self) -> ir.Expr:
        """Parity of the current execution count of the innermost statement (0 outside loops)."""
        linear, scale = ir.const(0), ir.const(1)
        for loop in reversed(self.loops):
            linear = linear + (loop.var - loop.start) * scale
            scale = scale * loop.extent
        return simplify(linear % 2)

    # ---- visitors ----------------------------------------------------------------------------
    def visit_For(self, node):
        self.loops.append(node)
        try:
            return super().visit_For(node)  # CodegenWalk: the loop variable's range, then the body
        finally:
            self.loops.pop()

    def visit_While(self, node):
        # A statement in a while loop runs an unknown number of times: no iteration index counts
        # it, so a synchronous TMA copy there waits on a phase it flips (counts_by_iteration).
        self.branches_in_loops += 1
        try:
            return self.generic_visit(node)
        finally:
            self.branches_in_loops -= 1

    def visit_IfThenElse(self, node):
        inside = bool(self.loops)
        self.branches_in_loops += inside
        try:
            return self.generic_visit(node)
        finally:
            self.branches_in_loops -= inside

    def visit_TmaCopy(self, node: ir.TmaCopy):
        if node.is_load:
            leader = node.leader_scope_threads or self.threads
            if self.threads % leader:
                raise CompileError(f"leader_scope_threads={leader} does not divide the block's "
                                   f"{self.threads} threads", node.loc)
            body = ir.seq([
                call(".expect_transaction", node.barrier, ir.const(tma_rules.region_bytes(node.src))),
                self.load_call(node.src, node.dst, node.barrier, node.loc),
            ])
            return ir.IfThenElse(elect(leader), body, loc=node.loc)
        return self.store_sequence(node.src, node.dst, node.loc, wait=False)

    def visit_Copy(self, node: ir.Copy):
        if node.instruction != "tma":
            return node
        scopes = (node.src.buffer.scope, node.dst.buffer.scope)
        if scopes == ("shared", "global"):
            return self.store_sequence(node.src, node.dst, node.loc, wait=True, reduce=node.reduce)
        if node.reduce:
            raise CompileError(f"internal: a TMA reduction from {scopes[0]} to {scopes[1]} memory", node.loc)
        if scopes != ("global", "shared"):
            raise CompileError(f"prefer_instruction='tma' copies global <-> shared, not "
                               f"{scopes[0]} -> {scopes[1]}", node.loc)
        bar_buf = self.auto_barrier(node)
        bar = ir.BarrierRef(bar_buf, ir.const(0))
        issue = ir.seq([
            call(".arrive_and_expect_tx", bar, ir.const(tma_rules.region_bytes(node.src))),
            self.load_call(node.src, node.dst, bar, node.loc),
        ])
        if self.counts_by_iteration():
            return ir.seq([ir.IfThenElse(elect(self.threads), issue), call(".wait", bar, self.iteration_parity())])
        phase = ir.Var(f"{bar_buf.name}_phase")
        self.phase_vars.append(phase)
        return ir.seq([
            ir.IfThenElse(elect(self.threads), issue),
            call(".wait", bar, phase),
            ir.Assign(phase, phase ^ 1),
        ])

    def auto_barrier(self, node: ir.Copy) -> ir.Buffer:
        name = f"{node.src.buffer.name}_to_{node.dst.buffer.name}_mbarrier"
        taken = {b.name for b in self.auto_barriers}
        base, n = name, 1
        while name in taken:
            name = f"{base}_{n}"
            n += 1
        buf = ir.Buffer(name, (ir.const(1),), ir.dtypes.uint64, "barrier", attrs={"counts": [1], "auto": True},
                        loc=node.loc)
        self.auto_barriers.append(buf)
        return buf

    def visit_BarrierArrive(self, node):
        stmt = call(".arrive_after_copies" if node.after_copies else ".arrive", node.barrier)
        stmt.loc = node.loc  # keep the user's line: the checker and the timeline point at it
        return stmt

    def visit_BarrierWait(self, node):
        stmt = call(".wait", node.barrier, node.parity)
        stmt.loc = node.loc
        if node.barrier.buffer in self.copy_barriers:
            # cp.async wrote through the generic proxy: wgmma and TMA (the async proxy) read the
            # tiles only after this fence, in the threads that saw the copies land
            return ir.seq([stmt, call("tw::fence_proxy_async")])
        return stmt

    def visit_TmaStoreWait(self, node):
        return call(f"tw::tma_store_wait<{'true' if node.read else 'false'}>")

    def visit_Allocate(self, node: ir.Allocate):
        if node.buffer.scope != "barrier":
            return node
        return ir.seq([node, barrier_init(node.buffer, self.func.launch.thread_var)])


def _only_reduced(body: ir.Stmt) -> set:
    """The global tensors whose every mention in ``body`` is the destination of a TMA reduction."""
    reduced = [c.dst.buffer for c in collect(body, ir.Copy) if c.reduce]
    mentions = collect(body, ir.Buffer)
    viewed = {id(m.attrs.get("view_of")) for m in mentions}  # T.Tensor(shape, dtype, t.data) reads t too
    return {b for b in reduced
            if id(b) not in viewed and sum(m is b for m in mentions) == sum(r is b for r in reduced)}


@register("lower_tma", "lower")
def lower_tma(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    lowering = _LowerTma(func, ctx.target.arch)
    body = lowering.visit(func.body)
    prelude = []
    for buf in lowering.auto_barriers:
        prelude += [ir.Allocate(buf), barrier_init(buf, func.launch.thread_var)]
    prelude += [ir.LetStmt(phase, ir.const(0)) for phase in lowering.phase_vars]
    out = func.with_body(ir.seq(prelude + [body]))
    out.attrs["tma_descriptors"] = list(lowering.descriptors.values())
    return out
