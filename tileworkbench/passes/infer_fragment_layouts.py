"""infer_fragment_layouts: give every fragment the layout that says which thread holds what.

Expects: IR where fragments are still whole-block tiles (``alloc_fragment``).
Guarantees: ``buffer.attrs["layout"]`` on every fragment, agreeing wherever fragments meet:
  * a ``T.gemm`` accumulator has the wgmma layout of ``tw::wgmma_gemm_ss`` when
    ``choose_shared_layouts`` put its gemms on the wgmma path (``Gemm.plan``), else the mma.sync
    layout of ``tw::gemm_ss`` (the warp grid chosen so the block's warps tile the accumulator);
    an A operand in a fragment has the wgmma accumulator layout of its own M x K shape (how
    register-A wgmma reads it), and a gemm that cannot take A from registers is a CompileError;
  * fragments a ``T.Parallel`` loop indexes by all of its variables in order, and the two sides of
    a fragment-to-fragment ``T.copy``, share one layout;
  * a fragment indexed by a leading part of such a loop's variables (``s[i]`` in a loop over
    ``x[i, j]``), and the result of reducing a fragment along its last dimension
    (``T.reduce_*(x, s, dim=1)``), has the rows of the other's layout (``ir.fragment_parts.ProjectedLayout``:
    every thread holding ``x[i, j]`` holds ``s[i]``); one indexed by the last of two variables of
    a loop over a tensor-core accumulator (``mask[j]`` in a loop over ``acc_s[i, j]``; a 2-D one at
    the columns' row-major places, ``w[j // H, j % H]``) has its columns (``ir.fragment_parts.ColumnsLayout``;
    written by loops over itself or copied from global memory, not by another tile operation); the result of reducing runs of a tensor-core
    accumulator's rows (``ir.Reduce.segment``, a fragment view's reduction) has its rows, each
    with a slot per run (``ir.fragment_parts.SegmentsLayout``), where one warp(group) holds whole rows;
  * every other fragment is blocked (element ``i`` in thread ``i % threads``, or runs of 16 bytes
    per thread where those fragments are only computed on in registers, copied to and from global
    memory, met in T.Parallel loops by unswizzled shared tiles whose elements step with the run,
    a run being 16 bytes of the tile too (``_run_in_shared``), or copied to and from such a tile of
    their own shape (``_elementwise_step``), and every row is whole sweeps or a
    whole number of runs: ``BlockedLayout.vec``), decided in program order where nothing above
    decides it (the fragments whose rows others hold first), after which the rules above apply
    again; a fragment another holds the rows of
    whose row length neither divides nor is divided by the threads (RMSNorm's 1000 over 128) has
    its rows padded (``BlockedLayout.row``: to 1024 there), so the rows are whole sweeps or shared
    by a power-of-two run of threads, which the reduction's shuffles need; a fragment whose slices
    ``F[k, ...]`` are read as whole fragments takes no runs, and its rows are padded to whole sweeps
    of the threads where they are shorter (a (4, 64) ``lse_local`` over 128 threads), so that every
    slice lies over the threads as the whole fragments do (``slice_layout``); where the slices are
    read in loops whose layout no blocked one stacks into (an accumulator's rows), each slice has
    that layout (``ir.layout.StackedLayout``).
The fragments' registers per thread are estimated (their elements each thread holds, in 32-bit
words), with every per-thread array's (``T.alloc_local``, and fragments ``localize_read_fragments``
gave every thread whole); past ``REGISTER_LIMIT`` the kernel is refused at the buffer that
crosses it: a thread has 255 registers, and NVRTC's time grows fast past that (8 s at 1024 words,
39 s at 2048 on the CPU machine), so such a kernel would take minutes to compile only to spill.
"""

from __future__ import annotations

import math

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.layout import BlockedLayout, MmaAccumLayout, WgmmaAccumLayout, choose_warp_grid, padded_row, slice_layout, stacked_layout, with_shape
from ..ir.fragment_parts import ProjectedLayout, columns_of, project, segments_of
from ..ir.visitor import IRVisitor, collect
from .rules.copies import fragment_slice
from .rules.fragment_runs import steps_by_one
from .rules.fragments import ParallelNest, is_column, parallel_nest
from .rules.gemm import accumulator_dtype
from .rules.thread_scopes import threads_of
from .manager import register

REGISTER_LIMIT = 1024  # 32-bit words of fragments per thread; 4x the 255 registers a thread has


def _gemm_layout(gemm: ir.Gemm, threads: int):
    c = gemm.c.buffer
    if c.scope != "fragment":
        raise CompileError("T.gemm accumulates into a fragment (T.alloc_fragment)", gemm.loc)
    want = accumulator_dtype(gemm.a.buffer.dtype.name)
    if c.dtype.name != want:
        raise CompileError(f"T.gemm of {gemm.a.buffer.dtype.name} tiles accumulates in {want}; {c.name} is "
                           f"{c.dtype.name}", gemm.loc)
    m, n = c.static_shape()
    if threads % 32:
        raise CompileError("T.gemm needs whole warps (threads a multiple of 32)", gemm.loc)
    plan = gemm.plan
    grid = choose_warp_grid(m, n, threads // 32)
    if plan is None and grid is None:
        raise CompileError(f"T.gemm: a {m}x{n} accumulator cannot be split over {threads // 32} warps "
                           "in 16x8 mma tiles; use tile sizes that are multiples of 16 per warp", gemm.loc)
    return WgmmaAccumLayout((m, n), plan.warpgroups, plan.n_groups) if plan else MmaAccumLayout((m, n), *grid)


def _register_a_layout(gemm: ir.Gemm) -> WgmmaAccumLayout:
    """The layout an A fragment must have: that of an M x K wgmma accumulator, which is how
    wgmma reads A from registers (``tw::wgmma_gemm_rs``); a fragment copied from one (attention's
    P, cast from the scores of Q @ K^T) already has it."""
    a, plan = gemm.a.buffer, gemm.plan
    if plan is None or not plan.a_registers:
        raise CompileError(f"T.gemm with A in a fragment ({a.name}) runs on Hopper's register-A wgmma only: "
                           "sm_90a, float16 or bfloat16 operands, a float32 accumulator, threads a multiple "
                           "of 128 and 64 rows of A per warpgroup, A not transposed; this gemm does not "
                           "qualify, so copy A to a T.alloc_shared tile", gemm.loc)
    return WgmmaAccumLayout(tuple(a.static_shape()), plan.warpgroups)


def _run_in_shared(access, last: ir.Var, vec: int) -> bool:
    """A thread's run of ``vec`` neighbours is 16 bytes of this unswizzled shared tile, starting at
    a multiple of ``vec``: one aligned vector access NVCC makes of them (the tile's base is 128-byte
    aligned), the unit a 16-byte ``T.copy`` fills the tile in, so each thread reads back what it
    copied in and ``elide_private_syncs`` can drop the barrier between. (Runs of fewer bytes than
    the copy's, LayerNorm's 4 bf16, kept the barrier and ran slower: docs/experiments.md, "Norms'
    fragments in runs over shared memory".)"""
    buf = access.buffer
    if buf.attrs.get("swizzle", 0) or buf.attrs.get("panel", 0):
        return False
    if vec * buf.dtype.storage_bits != 128:
        return False
    return steps_by_one(buf, access.indices, last, vec)


def _elementwise_step(frag: ir.Region, other: ir.Region):
    """For a copy between a fragment and a shared tile region of the same shape up to unit
    dimensions (a pipelined stack's stage ``x_shared[stage, :, :]`` for a [32, 32] fragment): the
    tile's access in the loop nest the copy lowers to (``rules.copies`` pairs the non-unit
    dimensions in order: element ``[s + i, t + j]`` for the fragment's ``[i, j]``) and that nest's
    innermost variable, as ``_run_in_shared`` checks a T.Parallel loop's; None for any other copy."""
    extents, shape = other.static_extents(), tuple(frag.buffer.static_shape())
    if other.buffer.scope != "shared" or extents is None or not shape or shape[-1] == 1:
        return None
    if [e for e in extents if e != 1] != [n for n in shape if n != 1]:
        return None
    loop_vars = [ir.Var(f"i{d}") for d in range(len(extents))]
    indices = tuple(start + v if extent != 1 else start for start, v, extent in zip(other.starts, loop_vars, extents))
    innermost = next(v for v, extent in zip(reversed(loop_vars), reversed(extents)) if extent != 1)
    return ir.BufferLoad(other.buffer, indices, other.buffer.dtype), innermost


def _within(access, buf, nest, loc):
    """A fragment indexed by a loop variable that runs past its dimension (TileLang's attention-sink
    backward fills ``sinks[i]``, a fragment of ``heads`` elements, in a loop over ``block_M``): a
    CompileError naming both, where TileLang writes past the fragment's end."""
    shape = buf.static_shape()
    for dim, index in enumerate(access.indices):
        for var, extent in zip(nest.vars, nest.extents):
            if index is var and extent is not None and shape is not None and extent > shape[dim]:
                raise CompileError(f"{buf.name}[...]: the T.Parallel variable {var.name} runs to {extent - 1}, past "
                                   f"the {shape[dim]} elements of {buf.name}'s dimension {dim}", loc)


def _buffer_of(target) -> ir.Buffer:
    """A tile operation's destination as a buffer (a region's, or the buffer itself)."""
    return target.buffer if isinstance(target, ir.Region) else target


class _Relations(IRVisitor):
    """What the program says about fragments' layouts: pairs that share one (``same``), and
    (part, whole, kept) triples where ``part`` has the rows of ``whole`` (``rows``)."""

    def __init__(self):
        self.same: list = []  # (a, b, loc)
        self.rows: list = []  # (part, whole, kept, loc)
        self.columns: list = []  # (part, whole, loc): part[j] read in a loop over whole[i, j]
        self.slices: list = []  # (fragment, a fragment its slices F[k, ...] lie as, number of k, loc)
        self.segments: list = []  # (result, source, run length, loc): a reduction over runs of rows
        self.not_runs: set = set()  # id() of fragments a thread must hold one element at a time
        # id() of a fragment -> (shared access, innermost loop variable) of the T.Parallel loops over it
        self.shared_steps: dict = {}

    def visit_For(self, node: ir.For):
        if node.kind != "parallel":
            return self.generic_visit(node)
        loops, body = parallel_nest(node)
        loop_vars = [lp.var for lp in loops]
        nest = ParallelNest.of(loops)
        whole, parts, slices, columns = [], [], [], []
        for access in collect(body, (ir.BufferLoad, ir.BufferStore)):
            buf = access.buffer
            if buf.scope != "fragment":
                continue
            _within(access, buf, nest, node.loc)
            kind, lead = nest.match(access.indices, buf.static_shape()) or (None, 0)
            if kind == "whole":
                whole.append(buf)
            elif kind == "row":
                parts.append((buf, tuple(range(len(access.indices))), access))
            elif kind == "slice":
                slices.append((buf, lead))
            elif kind is None and is_column(access.indices, loop_vars, buf.static_shape()):
                columns.append(buf)
        # one of the loop's own shape first (the others differ from it in unit dimensions only)
        whole.sort(key=lambda b: tuple(b.static_shape()) != nest.extents)
        for other in whole[1:]:
            self.same.append((whole[0], other, node.loc))
        for buf, lead in slices:  # each slice lies over the threads as the loop's elements
            self.not_runs.add(id(buf))
            if whole:
                self.not_runs.add(id(whole[0]))
                self.slices.append((buf, whole[0], lead, node.loc))
        memory = [a for a in collect(body, (ir.BufferLoad, ir.BufferStore)) if a.buffer.scope in ("shared", "global")]
        if any(a.buffer.scope == "global" for a in memory):
            self.not_runs |= {id(b) for b in whole}
        for b in whole:  # shared elements a thread would reach in runs: checked once the run is known
            self.shared_steps.setdefault(id(b), []).extend((a, loop_vars[-1]) for a in memory)
        for buf, kept, access in parts:
            if whole and tuple(whole[0].static_shape()) == nest.extents:
                self.rows.append((buf, whole[0], kept, node.loc))
        if whole and tuple(whole[0].static_shape()) == nest.extents:
            self.columns += [(buf, whole[0], node.loc) for buf in columns]
        self.visit(body)

    def visit_Copy(self, node: ir.Copy):
        src, dst = node.src.buffer, node.dst.buffer
        lead = fragment_slice(node.src, node.dst) or fragment_slice(node.dst, node.src)
        if lead:  # one slice of a fragment to or from a whole one: as F[k, j] in a loop over j
            part, other = (src, dst) if fragment_slice(node.src, node.dst) else (dst, src)
            self.not_runs |= {id(src), id(dst)}
            self.slices.append((part, other, lead, node.loc))
        elif src.scope == "fragment" and dst.scope == "fragment":
            self.same.append((src, dst, node.loc))
        elif "fragment" in (src.scope, dst.scope) and "global" not in (src.scope, dst.scope):
            frag, other = (node.src, node.dst) if src.scope == "fragment" else (node.dst, node.src)
            step = _elementwise_step(frag, other)
            if step is None:
                self.not_runs.add(id(frag.buffer))
            else:  # a shared tile of the fragment's shape: its runs are checked like a T.Parallel loop's
                self.shared_steps.setdefault(id(frag.buffer), []).append(step)

    def visit_Gemm(self, node: ir.Gemm):
        self.not_runs |= {id(r.buffer) for r in (node.a, node.b, node.c) if r.buffer.scope == "fragment"}

    def visit_Reduce(self, node: ir.Reduce):
        src, dst = node.src, node.dst
        if src.scope == "fragment" and dst.scope == "fragment" and src.ndim == 2 and node.dim == 1:
            if node.segment is None:
                self.rows.append((dst, src, (0,), node.loc))
            else:
                self.segments.append((dst, src, node.segment, node.loc))


class _Inference:
    def __init__(self, func: ir.PrimFunc):
        self.threads = func.launch.threads
        # the threads each tile operation and fragment is spread over (a T.ws scope's, or the block's)
        self.op_threads, self.fragment_threads = threads_of(func)
        self.layouts: dict = {}  # id(buffer) -> layout
        self.buffers: dict = {}  # id(buffer) -> buffer, in program order
        for alloc in collect(func.body, ir.Allocate):
            if alloc.buffer.scope == "fragment":
                self.buffers[id(alloc.buffer)] = alloc.buffer
        self.relations = _Relations()
        self.relations.visit(func.body)
        # fragments a tile operation writes (a reduction's, a copy's, a scan's destination, a gemm's
        # accumulator): none takes the columns of another (columns are computed by loops over them)
        # (a copy from global memory is a loop over the destination's own layout, whatever it is)
        self.tile_written = {id(_buffer_of(n.c if isinstance(n, ir.Gemm) else n.dst))
                             for n in collect(func.body, (ir.Copy, ir.Reduce, ir.Scan, ir.Gemm))
                             if not (isinstance(n, ir.Copy) and n.src.buffer.scope == "global")}
        # fragments copied into a packed FP4 tensor or tile: a thread writes it a byte (two values) at a time
        self.packed_sources = {id(n.src.buffer) for n in collect(func.body, ir.Copy)
                               if n.src.buffer.scope == "fragment" and n.dst.buffer.packed_in_memory}
        self.func = func

    def set(self, buf, layout, loc) -> bool:
        layout = with_shape(layout, tuple(buf.static_shape())) or layout  # up to unit dimensions
        old = self.layouts.get(id(buf))
        if old is None:
            if tuple(layout.shape) != tuple(buf.static_shape()):
                raise CompileError(f"fragment {buf.name} {tuple(buf.static_shape())} is used with a layout of shape "
                                   f"{tuple(layout.shape)}", loc)
            self.layouts[id(buf)] = layout
            return True
        if old != layout:
            raise CompileError(f"fragment {buf.name} would need two thread layouts ({old.describe()} and "
                               f"{layout.describe()}); copy it through shared memory, or into another fragment", loc)
        return False

    def propagate(self):
        changed = True
        while changed:
            changed = False
            for a, b, loc in self.relations.same:
                la, lb = self.layouts.get(id(a)), self.layouts.get(id(b))
                if la is not None and lb is None:
                    changed |= self.set(b, la, loc)
                elif lb is not None and la is None:
                    changed |= self.set(a, lb, loc)
                elif la is not None:
                    self.set(b, la, loc)  # raises where they disagree
            for part, whole, kept, loc in self.relations.rows:
                lw, lp = self.layouts.get(id(whole)), self.layouts.get(id(part))
                if lw is not None:
                    try:
                        rows = project(lw, kept)
                    except ValueError as why:
                        raise CompileError(f"{part.name} is indexed by part of {whole.name}'s indices, but {why}: "
                                           "not supported yet", loc) from None
                    changed |= self.set(part, rows, loc)
                elif isinstance(lp, ProjectedLayout) and tuple(lp.base.shape) == tuple(whole.static_shape()):
                    changed |= self.set(whole, lp.base, loc)
            for part, whole, loc in self.relations.columns:
                if id(part) in self.tile_written:
                    continue  # a tile operation writes it (a reduction, a copy from a tile): its own layout rules
                lw = self.layouts.get(id(whole))
                try:  # a tensor-core accumulator's; any other leaves the read to be refused where it is lowered
                    columns = columns_of(lw, part.static_shape()[1] if part.ndim == 2 else 0) if lw is not None else None
                except ValueError:
                    columns = None
                if columns is not None:
                    changed |= self.set(part, columns, loc)
            for part, whole, segment, loc in self.relations.segments:
                lw = self.layouts.get(id(whole))
                if lw is not None and id(part) not in self.layouts:
                    try:  # a tensor-core accumulator's rows; else the reduction goes through shared memory
                        changed |= self.set(part, segments_of(lw, segment), loc)
                    except ValueError:
                        pass
            for frag, other, lead, loc in self.relations.slices:
                lf, lo = self.layouts.get(id(frag)), self.layouts.get(id(other))
                if lf is not None and lo is None and (inner := slice_layout(lf, lead)) is not None:
                    changed |= self.set(other, inner, loc)
                elif lo is not None and lf is None:
                    lead_shape = tuple(frag.static_shape()[:lead])
                    stacked = stacked_layout(with_shape(lo, tuple(frag.static_shape()[lead:])) or lo, lead_shape)
                    if stacked is not None:
                        changed |= self.set(frag, stacked, loc)

    def run(self) -> dict:
        for gemm in collect(self.func.body, ir.Gemm):
            c, layout = gemm.c.buffer, _gemm_layout(gemm, self.op_threads.get(id(gemm), self.threads))
            if self.layouts.get(id(c), layout) != layout:
                raise CompileError(f"{c.name} is the accumulator of two gemms with different shapes", gemm.loc)
            self.set(c, layout, gemm.loc)
            if gemm.a.buffer.scope == "fragment":
                self.set(gemm.a.buffer, _register_a_layout(gemm), gemm.loc)
        self.propagate()
        # program order, the first undecided one blocked; but those whose rows others hold first, so
        # a row vector computed in a loop of its own before it meets them (GDN backward's
        # G_fragment_exp, then Q_fragment[i, k] * G_fragment_exp[i]) takes their rows
        wholes = {id(whole) for _, whole, _, _ in self.relations.rows}
        for key, buf in sorted(self.buffers.items(), key=lambda item: item[0] not in wholes):
            if key not in self.layouts:
                shape, threads = tuple(buf.static_shape()), self.fragment_threads.get(key, self.threads)
                self.set(buf, self.blocked(buf, shape, threads), buf.loc)
                self.propagate()
        return self.layouts

    def blocked(self, buf, shape, threads: int) -> BlockedLayout:
        """The blocked layout of ``buf`` (and of the fragments that will share it): in runs where
        :meth:`run_length` allows them; with rows padded (``padded_row``) where another fragment
        holds its rows (a reduction's result, ``s[i]`` in a loop over ``x[i, j]``) and a row's
        length neither divides nor is divided by the threads in a power of two; without runs, and
        with rows padded to whole sweeps of the threads, where its slices ``F[k, ...]`` are read
        as whole fragments (``slice_layout``)."""
        vec = self.run_length(buf, shape, threads)
        sliced = {id(frag) for frag, _, _, _ in self.relations.slices}
        if len(shape) >= 2 and shape[-1] % (threads * vec) and any(k in sliced for k in self.group(buf)):
            # its slices F[k, ...] lie alike over the threads only as whole sweeps (GQA and MHA
            # decoding's lse_local[k, i]): no runs, and rows padded to whole sweeps
            vec = 1
            if shape[-1] % threads:
                return BlockedLayout(shape, threads, 1, -(-shape[-1] // threads) * threads)
        wholes = {id(whole) for _, whole, _, _ in self.relations.rows}
        if vec == 1 and len(shape) == 2 and any(k in wholes for k in self.group(buf)):
            row = padded_row(shape[-1], threads)
            if row != shape[-1]:
                return BlockedLayout(shape, threads, 1, row)
        return BlockedLayout(shape, threads, vec)

    def group(self, buf) -> dict:
        """id -> fragment of ``buf`` and every fragment that will share its layout (``same``)."""
        group, todo = {id(buf): buf}, [buf]
        while todo:
            b = todo.pop()
            for x, y, _ in self.relations.same:
                for one, other in ((x, y), (y, x)):
                    if one is b and id(other) not in group:
                        group[id(other)] = other
                        todo.append(other)
        return group

    def run_length(self, buf, shape, threads: int) -> int:
        """How many neighbours each thread holds together in the blocked layout of ``buf`` and the
        fragments that will share it (``same``): 16 bytes of the narrowest of them where they only
        meet other fragments in T.Parallel loops and are copied only to and from global memory
        (then ``partition_parallel_loops`` moves a run with one 16-byte access, and nothing reads
        shared memory at a stride), and every row is a whole number of sweeps of the threads or of
        runs of a power-of-two number of them; else 1."""
        group = self.group(buf)
        if any(k in self.layouts or k in self.relations.not_runs for k in group):
            return 1
        # where no 16-byte runs fit, a group copied into packed FP4 still takes runs of two: its pairs
        # are then one thread's, and the copy writes each as one byte (result_stores.paired_stores)
        pairs = 2 if any(k in self.packed_sources for k in group) and _runs_fit(shape, threads, 2) else 1
        vec = 16 // min(b.dtype.storage_bits // 8 or 1 for b in group.values())
        if not all(_run_in_shared(access, last, vec) for k in group for access, last in self.relations.shared_steps.get(k, ())):
            return pairs
        return vec if vec > 1 and _runs_fit(shape, threads, vec) else pairs


def _runs_fit(shape, threads: int, vec: int) -> bool:
    """Runs of ``vec`` neighbours a thread suit a fragment of ``shape``: every row whole sweeps of
    the threads, or whole runs of a power-of-two number of threads (TileLang's layout of a
    [64, 128] float32 tile over 128 threads: a warp's runs of 4 per row), and no partial sweep."""
    row, sweep = shape[-1], threads * vec
    sharers = row // vec
    fits = row % sweep == 0 or (sweep % row == 0 and row % vec == 0 and sharers & (sharers - 1) == 0)
    return vec > 1 and fits and math.prod(shape) % sweep == 0


@register("infer_fragment_layouts", "tile")
def infer_fragment_layouts(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    inference = _Inference(func)
    layouts = inference.run()
    words, parts = 0, []
    for alloc in collect(func.body, ir.Allocate):
        buf = alloc.buffer
        if buf.scope == "local" and buf.static_shape() is not None:  # every thread holds all of it
            own = -(-math.prod(buf.static_shape()) * buf.dtype.storage_bits // 32)
            where = "in every thread"
        elif buf.scope == "fragment":
            layout = buf.attrs["layout"] = layouts[id(buf)]
            own = -(-layout.local_size * buf.dtype.storage_bits // 32)
            where = f"over {inference.fragment_threads.get(id(buf), func.launch.threads)} threads"
        else:
            continue
        words += own
        parts.append(f"{buf.name}: {'x'.join(map(str, buf.static_shape()))} {buf.dtype.name} {where} is {own}")
        if words > REGISTER_LIMIT:
            raise CompileError(f"the kernel's fragments need about {words} 32-bit registers per thread, its per-thread "
                               f"arrays counted ({'; '.join(parts)}); a thread has 255, and past {REGISTER_LIMIT} the CUDA "
                               f"compiler would run for minutes: use smaller tiles or more threads", alloc.loc)
    return func.with_body(func.body)
