"""partition_parallel_loops: map ``T.Parallel`` iterations onto the block's threads.

Expects: lowered tile ops; fragments with layouts (``infer_fragment_layouts``).
Guarantees: no parallel loop and no fragment remains.
  * A parallel nest that touches a fragment becomes ``for j in T.unroll(local_size)`` over the
    thread's own elements, with the loop indices recovered from the fragment's layout, so the
    thread that holds an element is the one that computes it.
    When the nest only stores fp32 fragment values into a 16-bit global tensor or shared tile
    (swizzles and 128-byte panels move 16-byte chunks, so an aligned pair stays one), the layout
    keeps element pairs ``(2m, 2m + 1)`` side by side in a row, and the store's indices provably
    put them side by side in the tensor too (the simplifier must reduce the distance to 1), the
    loop runs over pairs and each thread stores both with one 32-bit ``tw::store_pair`` (the
    tensor must be 4-byte aligned: the launcher checks ``align_bytes``). A nest that only
    ``T.atomic_add``s fp32 fragment values into a float32 global tensor, pairs likewise side by
    side, adds both with one 8-byte ``tw::atomic_add_pair`` (sm_90's float2 atomic; 8-byte aligned).
    Into a shared tile on sm_90+ from a wgmma accumulator, whose pairs are 8x8 matrices across a
    warp, four pairs go out with one ``tw::store_matrix_x4`` (``stmatrix``) instead: a quarter of
    the store instructions, and a quarter of the unrolled address arithmetic NVVM and ptxas
    compile (the spec GEMM's NVRTC time: 0.21 -> 0.16 s on the CPU machine); each matrix row
    must be 8 neighbours in the tensor starting 16-byte aligned. ``stmatrix`` is a
    warp-wide instruction, so only where every condition around the store is the same for a whole
    warp (``tx < 256`` splitting warpgroups is; anything finer keeps ``store_pair``), and not with
    ``tw.disable_matrix_stores``.
  * A nest that indexes a fragment holding rows of another (``ir.fragment_parts.ProjectedLayout``) by
    the leading loop variables (``s[i]`` in a loop over ``(i, j)``) reads the thread's own copy of
    the row; a nest over such a fragment alone runs over its slots, every thread that shares a
    row updating its own copy, and only one of them (``owner``) storing it to memory. A nest over a
    shared tile that reads rows of a fragment runs over the layout they are rows of; where the
    tile is of another width, over the rows each thread holds, each of the threads sharing a row
    taking its share of the columns (``over_rows``).
  * A copy between a fragment held in runs (``BlockedLayout.vec``) and a global tensor moves each
    run with 16-byte accesses (``rules.fragment_runs``).
  * An element-wise nest touching no fragment whose store or loads can move in vectors goes to the
    threads in runs of neighbours, each run loaded and stored with one vector access
    (``rules.vector_runs``); one a software pipeline issues ahead (``ir.ASYNC_COPY``) with ``cp.async``
    where its runs are whole copies.
  * Any other parallel nest is split round-robin: flat iteration ``it * threads + tx``, each index
    written from it already simplified (``rules.vector_runs.thread_share``).
  * Fragments become per-thread ``local`` arrays of ``local_size`` elements.
  * A nest with an extent of 0 (or less) runs nothing and is removed.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.layout import slice_layout, with_shape
from ..ir.fragment_parts import ProjectedLayout
from ..ir.simplify import RangeTracker, launch_ranges, loop_range
from ..ir.visitor import IRMutator, collect, reassigned_vars, uses_var
from ..target import PassConfigKey
from .manager import register
from .rules.fragments import EACH_WARP, PARTIAL_ROWS, FragmentAccess, FragmentsToLocal, ParallelNest, parallel_nest
from .rules.fragment_runs import run_copies
from .rules.vector_runs import launcher_checked, thread_share, vector_runs
from .rules.result_stores import ResultStores
from .rules.thread_scopes import ScopedThreads

UNROLL_LIMIT = 32


def _nest(loop: ir.For):
    """The perfectly nested parallel loops starting at ``loop`` and the innermost body."""
    loops, body = parallel_nest(loop)
    for inner in collect(body, ir.For):
        if inner.kind == "parallel":
            raise CompileError("nested T.Parallel loops must be perfectly nested "
                               "(write T.Parallel(M, N) for a 2-D loop)", inner.loc or loop.loc)
    return loops, body


class _Partition(ScopedThreads, ResultStores, RangeTracker, IRMutator):
    def __init__(self, func: ir.PrimFunc, to_local, matrix_stores: bool):
        self.threads = func.launch.threads
        self.tid = func.launch.thread_var
        self.to_local = to_local
        self.ranges = launch_ranges(func)
        self.reassigned = reassigned_vars(func.body)
        self.matrix_stores = matrix_stores
        self.conditions: list = []  # the conditions of the ifs around the statement being visited
        self.thread_index = {self.tid}  # the thread index and the kernel's names for it (tid = tx)
        self.thread_dependent = {self.tid}  # every scalar whose value may differ between threads
        self.checked = launcher_checked(func)

    def visit_ThreadScope(self, node: ir.ThreadScope):
        self.thread_index.add(node.var)  # the scope's index counts the threads from its first
        self.thread_dependent.add(node.var)
        return super().visit_ThreadScope(node)

    def visit_LetStmt(self, node: ir.LetStmt):
        if node.value in self.thread_index:
            self.thread_index.add(node.var)
        if any(uses_var(node.value, v) for v in self.thread_dependent):
            self.thread_dependent.add(node.var)
        self.track_let(node)  # a bounds check on it may be proven (sid = bz)
        return self.generic_visit(node)

    def visit_IfThenElse(self, node: ir.IfThenElse):
        self.conditions.append(node.cond)
        try:
            return self.generic_visit(node)
        finally:
            self.conditions.pop()

    def visit_For(self, node: ir.For):
        if node.kind != "parallel":
            return self.within_loop(node)
        loops, body = _nest(node)
        loop_vars = [lp.var for lp in loops]
        extents = [ir.const_int(lp.extent) for lp in loops]
        if None in extents:
            raise CompileError("T.Parallel needs constant extents", node.loc)
        if min(extents) <= 0:  # no iteration: the nest runs nothing (its threads' share would divide by 0)
            return None
        accesses = [a for a in collect(body, (ir.BufferLoad, ir.BufferStore)) if a.buffer.scope == "fragment"]
        nest = ParallelNest(tuple(loop_vars), tuple(extents))
        kinds = [(a.buffer, nest.match(a.indices, a.buffer.static_shape()) or (None, 0)) for a in accesses]
        whole = [b for b, (kind, _) in kinds if kind == "whole"]
        whole.sort(key=lambda b: tuple(b.static_shape()) != tuple(extents))  # one of the loop's own shape first
        if whole:  # the loop runs over the layout of a fragment it indexes whole (rows of it come along)
            layout = whole[0].attrs["layout"]
            return self.by_layout(node, loop_vars, extents, body, whole[0], with_shape(layout, extents) or layout)
        rows = [b for b, (kind, _) in kinds if kind == "row"
                and isinstance(layout := b.attrs["layout"], ProjectedLayout)
                and tuple(layout.base.shape) == tuple(extents)]
        if rows:  # a loop over a shared tile reading rows of a fragment: over the layout they are rows of
            return self.by_layout(node, loop_vars, extents, body, rows[0], rows[0].attrs["layout"].base)
        slices = [(b, slice_layout(b.attrs["layout"], lead)) for b, (kind, lead) in kinds if kind == "slice"]
        slices = [(b, inner) for b, inner in slices if inner is not None]
        if slices:  # a loop over one slice of a fragment (F[k, j] in a loop over j): over the slice's layout
            return self.by_layout(node, loop_vars, extents, body, slices[0][0], with_shape(slices[0][1], extents)
                                  or slices[0][1])
        wider = [b for b, (kind, _) in kinds if kind == "row" and len(extents) == 2
                 and isinstance(layout := b.attrs["layout"], ProjectedLayout) and layout.kept == (0,)
                 and layout.shape[0] == extents[0]]
        if wider:  # rows of a fragment read over a tile of another width (S_shared[h, k], scores_max[h])
            return self.over_rows(node, loop_vars, extents, body, wider[0].attrs["layout"])
        unrelated = [b for b, (kind, _) in kinds if kind == "row"]
        if unrelated:
            name = unrelated[0].name
            raise CompileError(f"fragment {name} is indexed by part of this loop's indices, which works where it "
                               f"holds the rows of a fragment of the loop's shape (one the loop also indexes whole, "
                               f"or one reduced into it with T.reduce_*(x, {name}, dim=1)); no fragment here gives "
                               f"{name} its rows: keep it in shared memory, or loop over {name} alone", node.loc)
        if accesses:
            buf = accesses[0].buffer
            return self.by_layout(node, loop_vars, extents, body, buf, buf.attrs["layout"])  # names the problem
        return self.round_robin(node, loop_vars, extents, body)

    def within_loop(self, node: ir.For):
        """A serial loop's body, its variable's range known (a bounds check on it may be proven)."""
        lo, hi = loop_range(node, self.ranges)
        if lo is None or hi is None or hi < lo or node.var in self.ranges:
            return self.generic_visit(node)
        self.ranges[node.var] = (lo, hi)
        try:
            return self.generic_visit(node)
        finally:
            del self.ranges[node.var]

    def by_layout(self, node, loop_vars, extents, body, frag: ir.Buffer, layout):
        if tuple(extents) != tuple(layout.shape):
            raise CompileError(f"this T.Parallel loop is {tuple(extents)} but fragment {frag.name} is "
                               f"{tuple(layout.shape)}; loop over the whole fragment", node.loc)
        paired = self.paired_stores(node, loop_vars, body, layout)
        if paired is not None:
            return paired
        runs = run_copies(node, loop_vars, body, layout, self.tid, self.to_local, self.ranges)
        if runs is not None:
            return runs
        packed = next((s.buffer for s in collect(body, ir.BufferStore) if s.buffer.packed_in_memory), None)
        if packed is not None:  # one element would be half a byte, the other half another thread's
            raise CompileError(f"a thread writes packed FP4 {packed.name} only in pairs of neighbours (one byte), and "
                               f"here it cannot: fragment {frag.name}'s layout gives neighbouring elements to "
                               "different threads, or the store is guarded column by column (a tile past the "
                               "tensor's last column); copy through a float4_e2m1_unpacked shared tile, or by TMA",
                               node.loc)
        j = ir.Var("j")
        indices, guard = layout.forward(self.tid, j)
        rewritten = FragmentAccess(loop_vars, j, layout, node.loc, self.to_local,
                                   accumulate_rows=bool(node.annotations.get(PARTIAL_ROWS)), extents=extents).visit(body)
        # a layout whose elements several threads hold names the one that stores each (``owner``)
        owner = getattr(layout, "owner", None)
        if owner is not None and not node.annotations.get(EACH_WARP):
            rewritten = _OwnerStores(owner(self.tid)).visit(rewritten)
        lets = [ir.LetStmt(v, i) for v, i in zip(loop_vars, indices) if uses_var(rewritten, v)]
        inner = ir.seq(lets + [rewritten if guard is None else ir.IfThenElse(guard, rewritten)])
        return ir.For(j, ir.const(layout.local_size), inner, "unrolled",
                      annotations={"layout": layout.describe()}, loc=node.loc)

    def over_rows(self, node, loop_vars, extents, body, rows: ProjectedLayout):
        """A loop over ``(row, column)`` of a tile (GQA decoding's logits: ``S_shared[h, k]`` with
        ``scores_max[h]``) reading rows of fragments whose columns are another tile's: each thread
        runs the rows it holds (``rows``' slots), and of each row the columns ``s, s + S, ...``,
        ``s`` its place among the ``S`` threads sharing the row (``ProjectedLayout.sharer_index``),
        reading the rows from its own registers. Every (row, column) runs once. A store to a
        fragment here would be each sharer's and is refused."""
        stored = [st.buffer.name for st in collect(body, ir.BufferStore) if st.buffer.scope == "fragment"]
        if stored:
            raise CompileError(f"fragment {stored[0]} is written in a loop whose columns are not its own; write it in "
                               f"a loop over {stored[0]} alone", node.loc)
        r, c = ir.Var("r"), ir.Var("c")
        (row,), guard = rows.forward(self.tid, r)
        column = c * rows.sharers + rows.sharer_index(self.tid)
        rewritten = FragmentAccess([loop_vars[0]], r, rows, node.loc, self.to_local).visit(body)
        inside = ir.logical_and(guard, ir.cmp("<", column, extents[1]) if extents[1] % rows.sharers else None)
        inner = ir.seq([ir.LetStmt(loop_vars[1], column), rewritten if inside is None else ir.IfThenElse(inside, rewritten)])
        columns = ir.For(c, ir.const(-(-extents[1] // rows.sharers)), inner, "serial", loc=node.loc)
        return ir.For(r, ir.const(rows.local_size), ir.seq([ir.LetStmt(loop_vars[0], row), columns]), "unrolled",
                      annotations={"layout": rows.describe()}, loc=node.loc)

    def round_robin(self, node, loop_vars, extents, body):
        runs = vector_runs(loop_vars, extents, body, self.threads, self.tid, self.checked, node.loc,
                           async_copy=bool(node.annotations.get(ir.ASYNC_COPY)))
        if runs is not None:
            return runs
        total = 1
        for e in extents:
            total *= e
        iters = -(-total // self.threads)
        it = ir.Var("it")
        flat = ir.Var("flat")
        lets = [ir.LetStmt(v, i) for v, i in zip(loop_vars, thread_share(it, iters, self.tid, self.threads, 1, extents))]
        inner = ir.seq(lets + [body])
        if total % self.threads:
            inner = ir.seq([ir.LetStmt(flat, it * self.threads + self.tid),
                            ir.IfThenElse(ir.cmp("<", flat, total), inner)])
        kind = "unrolled" if iters <= UNROLL_LIMIT else "serial"
        vector = node.annotations.get("vector")
        ann = {"vector": vector} if vector else {}
        return ir.For(it, ir.const(iters), inner, kind, annotations=ann, loc=node.loc)


class _OwnerStores(IRMutator):
    """In a loop over a fragment whose elements several threads hold (rows of another, each thread
    its own copy), a store to shared or global memory is made by one of them (``owner``): the
    others would write the same value to the same place."""

    def __init__(self, owner):
        self.owner = owner

    def visit_BufferStore(self, node):
        if self.owner is None or node.buffer.scope not in ("global", "shared"):
            return node
        return ir.IfThenElse(self.owner, node)


@register("partition_parallel_loops", "lower")
def partition_parallel_loops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    to_local = FragmentsToLocal()
    matrix_stores = ctx.target.compute_version >= (9, 0) and not ctx.flag(PassConfigKey.TW_DISABLE_MATRIX_STORES)
    body = _Partition(func, to_local.local, matrix_stores).visit(func.body)
    body = to_local.visit(body)
    return func.with_body(body)
