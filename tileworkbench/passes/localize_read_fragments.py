"""localize_read_fragments: a fragment that thread-level code reads outside ``T.Parallel`` becomes a
per-thread array holding all of it, where that keeps its meaning.

Expects: tile-level IR (before ``insert_thread_syncs`` and ``infer_fragment_layouts``).
Guarantees: a fragment read element by element where no thread is sure to hold the element
(outside every ``T.Parallel`` loop: TileLang's block-sparse attention copies its mask row into
``block_mask`` and asks ``if block_mask[k] != 0:`` in its key loop; or in one at other indices
than the loop's variables in order: GQA decoding's ``mask_local[j]`` in a loop over ``(i, j)``),
and written only whole (by ``T.copy`` and ``T.fill``; by stores every thread makes, outside
every ``T.Parallel`` loop and ``T.ws`` scope, under conditions all threads share: Mamba's
``D_local[0] = D[bz]``; by a reduction from a fragment or shared tile, top-k's maximum of a whole
fragment read at ``[0]``, which every thread then reduces, ``rules.reductions``; or by ``T.Parallel``
nests over it alone that read only global tensors the kernel never writes, shared tiles and
per-thread arrays whose values every thread shares, sparse attention's ``mask[bi_i] =
Indices[...] >= 0``, KDA's ``kbj[k] = kj_shared[k] * bj_local[0]``, which every thread then
runs whole as serial loops), is a
``local`` buffer: each thread holds all of it and reads any element. A fragment is the block's
tile, one value per element; a copy of it in every thread, each written alike, holds those
values, so the program means the same. Otherwise no thread could read an element it does not
hold, and ``infer_fragment_layouts`` refuses such a read as before; so it does where the fragment
is also written element by element in other loops, by a gemm or scan, or is a reduction's source
(those spread its elements over the threads). The local array's values are then the same in every
thread wherever its sources are (``rules.uniformity``), so a block barrier may stand inside an
``if`` on them.
A fragment read only as the columns of nests over one gemm's accumulator (``mask[bi_i]`` in a loop
over ``acc_s[h_i, bi_i]``) and written only by such nests over itself stays a fragment instead:
``infer_fragment_layouts`` gives it the accumulator's columns, so each thread computes and holds
only the columns it reads.
Such a fragment that stays one, read only inside ``T.Parallel`` nests at other indices than their
variables in order or as its rows, each provably inside it (Mamba's ``scale[j]`` in a loop over
``(i, j)``, ``scale`` computed from other fragments; mHC's ``x[i, jj * 4 + j]``), stored in none
of them and, outside ``T.Parallel``, only alike by every thread, is read by each such nest from a
shared copy made just before it, or before the outermost serial loop around it that does not
write it (``rules.staging``), with a warning; read anywhere else, it is refused as before. So is one
every thread could hold whole but at more than ``PER_THREAD_WORDS`` registers (mHC's ``x_frag``,
32 x 256 floats), where its reads allow; one that big read only as slices ``F[k, j]`` in loops over
``j`` (mHC's ``xl[i_hc, i1_h]``, 4 x 256 floats) stays a fragment, each slice laid out as the loops
that read it (``infer_fragment_layouts``, ``ir.layout.slice_layout``).
A fragment a ``T.ws`` scope stores element by element outside ``T.Parallel``, touched by no
``T.Parallel`` loop or tile operation anywhere, is a per-thread array too (``_thread_own``): each of
the scope's threads keeps its own values, as TileLang's registers of a warp-specialised role.
"""

from __future__ import annotations

import math
import warnings

from ..errors import TileworkbenchWarning
from ..ir import nodes as ir
from ..ir.simplify import interval
from ..ir.visitor import IRMutator, IRVisitor, addressed_buffers, buffer_roles, buffers_written, collect, uses_var
from .manager import register
from .rules.fragments import ParallelNest, is_column, parallel_nest
from .rules.staging import SharedStandIns, copied_in_before
from .rules.uniformity import Variance


class _Reads(IRVisitor):
    """Fragments loaded where no thread is sure to hold the element: outside every ``T.Parallel``
    loop, or inside one at indices other than its variables in order (all, or the leading ones:
    ``rules.fragments.ParallelNest``), as ``mask_local[j]`` in a loop over ``(i, j)``;
    fragments written element by element inside a ``T.Parallel`` loop or a ``T.ws`` scope (by some
    threads only); and the stores to fragments outside both, which every thread makes, with the
    conditions of the ``if``s around each (Mamba's ``D_local[0] = D[bz]``)."""

    def __init__(self, func: ir.PrimFunc):
        self.thread_var = func.launch.thread_var
        # buffers the kernel writes (stores, tile-operation destinations, atomics' addresses): a
        # nest every thread runs whole reads none of them, or a thread could read an element another
        # has written since (what one thread alone reading it never could)
        self.written = set(buffers_written(func.body)) | set(addressed_buffers(func.body))
        self.loops: list = []  # the T.Parallel loops around, outermost first
        self.replicable: dict = {}  # fragment -> the T.Parallel nests that every thread could run whole
        self.in_replicable = False
        self.conditions: list = []  # of the ifs (and whiles) around
        self.scopes = 0  # T.ws scopes around
        self.outside: set = set()
        self.ranges: dict = {}  # Var -> (lo, hi) of the loops around whose bounds are constants
        # the serial loops around, out to the nearest if, while, T.ws scope or T.Parallel loop: a
        # shared copy of a fragment goes before the outermost of them that does not write it
        self.hoist_chain: list = []
        self.loop_writes: dict = {}  # id(serial loop of the chain) -> the buffers it writes
        self.column_nests: dict = {}  # fragment -> {id: the T.Parallel nest} where it reads it in bounds, not as rows
        self.read_elsewhere: set = set()  # fragments read outside T.Parallel, or at other indices than variables
        # fragment -> the fragments of the nests that read it as their columns (``mask[j]`` in a loop over
        # ``acc_s[i, j]``); and the fragments also read, where no thread is sure to hold them, otherwise
        self.column_wholes: dict = {}
        self.read_not_as_columns: set = set()
        # fragments read as slices F[k, j] in loops over j (which infer_fragment_layouts lays out as
        # the loop's elements: ``ir.layout.slice_layout``), and those read otherwise where no thread is sure to hold them
        self.slice_reads: set = set()
        self.not_slice_reads: set = set()
        self.stored: set = set()
        self.stored_by_all: dict = {}  # fragment -> [conditions around each store every thread makes]
        self.stored_in_scopes: set = set()  # fragments stored element by element in a T.ws scope, outside T.Parallel
        self.in_parallel: set = set()  # fragments loaded or stored inside a T.Parallel loop

    def visit_For(self, node: ir.For):
        inner = node.kind == "parallel"
        replicable = self._replicable(node) if inner and not self.loops else None
        if replicable is not None:
            self.replicable.setdefault(replicable, []).append(node)
            self.in_replicable = True
        if inner:
            self.loops.append(node)
        start, extent = ir.const_int(node.start), ir.const_int(node.extent)
        if start is not None and extent is not None and extent > 0:
            self.ranges[node.var] = (start, start + extent - 1)
        chain = self.hoist_chain
        self.hoist_chain = chain + [node] if not self.loops else chain
        self.generic_visit(node)
        self.hoist_chain = chain
        self.ranges.pop(node.var, None)
        if inner:
            self.loops.pop()
        if replicable is not None:
            self.in_replicable = False

    def _replicable(self, node: ir.For):
        """The fragment a ``T.Parallel`` nest computes, where every thread could run the whole nest
        and get the same values (sparse attention's ``mask[bi_i] = Indices[...] >= 0``; KDA's
        ``kbj[k] = kj_shared[k] * bj_local[0]``): its only stores are to that fragment at the nest's
        variables, it has no other effect (no call made for its effect, no scalar set), it reads
        only global tensors the kernel never writes, shared tiles and per-thread arrays (those two
        checked later: ``_uniform_inputs``), and not the thread index; else None."""
        loops, body = parallel_nest(node)
        nest = ParallelNest.of(loops)
        stores = collect(body, ir.BufferStore)
        targets = {id(st.buffer): st.buffer for st in stores}
        if len(targets) != 1 or any(f.kind == "parallel" for f in collect(body, ir.For)):
            return None
        if collect(body, (ir.Evaluate, ir.Assign)):  # a call's effect (an atomic, a print) or a scalar set:
            return None                                 # every thread would make it
        frag = next(iter(targets.values()))
        if frag.scope != "fragment" or tuple(frag.static_shape()) != nest.extents:
            return None
        if not all(len(st.indices) == len(nest.vars) and all(i is v for i, v in zip(st.indices, nest.vars))
                   for st in stores):
            return None
        if any(not _readable_by_all(ld.buffer, self.written) for ld in collect(body, ir.BufferLoad)):
            return None
        return None if uses_var(body, self.thread_var) else frag

    def _hoisted(self, buf: ir.Buffer, nest: ir.For) -> ir.Stmt:
        """Where a shared copy of ``buf`` for ``nest`` goes: before the outermost serial loop around
        it (``hoist_chain``) that does not write ``buf`` (mHC's ``x_frag``, read in a loop over
        ``jj``: copied once, not once per ``jj``), else before the nest."""
        anchor = nest
        for loop in reversed(self.hoist_chain):
            if id(loop) not in self.loop_writes:
                self.loop_writes[id(loop)] = set(buffers_written(loop))
            if buf in self.loop_writes[id(loop)]:
                break
            anchor = loop
        return anchor

    def visit_IfThenElse(self, node):
        chain, self.hoist_chain = self.hoist_chain, []
        self.conditions.append(node.cond)
        self.generic_visit(node)
        self.conditions.pop()
        self.hoist_chain = chain

    visit_While = visit_IfThenElse

    def visit_ThreadScope(self, node):
        chain, self.hoist_chain = self.hoist_chain, []
        self.scopes += 1
        self.generic_visit(node)
        self.scopes -= 1
        self.hoist_chain = chain

    def visit_BufferLoad(self, node: ir.BufferLoad):
        if node.buffer.scope == "fragment" and self.loops:
            self.in_parallel.add(node.buffer)
        if node.buffer.scope == "fragment":
            kind, _ = ParallelNest.of(self.loops).match(node.indices, node.buffer.static_shape()) or (None, 0)
            if kind not in ("whole", "row"):
                self.outside.add(node.buffer)
                if kind is None and self.loops and is_column(node.indices, [lp.var for lp in self.loops],
                                                             node.buffer.static_shape()):
                    self.column_wholes.setdefault(node.buffer, set()).update(_whole_fragments(self.loops))
                else:
                    self.read_not_as_columns.add(node.buffer)
                if kind is None and self.loops and _in_bounds(node, self.ranges):
                    anchor = self._hoisted(node.buffer, self.loops[0])
                    self.column_nests.setdefault(node.buffer, {})[id(anchor)] = (anchor, self.loops[0])
                else:
                    self.read_elsewhere.add(node.buffer)
                # (outside every loop an element read matches as a slice of no variables: not one)
                (self.slice_reads if kind == "slice" and self.loops else self.not_slice_reads).add(node.buffer)
        self.generic_visit(node)

    def visit_BufferStore(self, node: ir.BufferStore):
        if node.buffer.scope == "fragment":
            if self.loops:
                self.in_parallel.add(node.buffer)
            elif self.scopes:
                self.stored_in_scopes.add(node.buffer)
            if self.in_replicable and not self.scopes:
                pass  # counted with its nest (replicable)
            elif self.loops or self.scopes:
                self.stored.add(node.buffer)
            else:
                self.stored_by_all.setdefault(node.buffer, []).append(tuple(self.conditions))
        self.generic_visit(node)

    def stored_alike(self, buf, variance) -> bool:
        """Every store to ``buf`` is one every thread makes, under conditions all threads share."""
        return buf not in self.stored and all(variance.is_uniform(c) for conds in self.stored_by_all.get(buf, ())
                                              for c in conds)


def _whole_fragments(loops) -> set:
    """The fragments a T.Parallel nest (its loops, outermost first) indexes by all its variables."""
    nest = ParallelNest.of(loops)
    return {a.buffer for a in collect(loops[-1].body, (ir.BufferLoad, ir.BufferStore))
            if a.buffer.scope == "fragment" and (nest.match(a.indices, a.buffer.static_shape()) or (None,))[0] == "whole"}


def _held_as_columns(func: ir.PrimFunc, reads: _Reads, variance) -> set:
    """The fragments that stay fragments, holding the columns of a tensor-core accumulator
    (``ir.fragment_parts.ColumnsLayout``), rather than becoming every thread's whole: read only as the
    columns of nests over one gemm's accumulator (sparse MLA's ``mask[bi_i]`` in a loop over
    ``acc_s[h_i, bi_i]``; or, 2-D, at the columns' row-major places, the FP8 indexers' ``w[q_h //
    heads, q_h % heads]``) and written only by nests over themselves from inputs every thread sees
    alike or by copies from global tensors the kernel does not write, so each thread computes (or
    loads) the columns it holds. Not in a kernel with ``T.ws`` or ``if tx < C`` scopes (whose
    fragments lie over the scope's threads only)."""
    if collect(func.body, ir.ThreadScope):  # a scope's fragments lie over its threads alone: not tried there
        return set()
    accumulators = {g.c.buffer for g in collect(func.body, ir.Gemm)}
    written = buffers_written(func.body)
    all_copies = collect(func.body, ir.Copy)
    held = set()
    for buf, wholes in reads.column_wholes.items():
        copies = [c for c in all_copies if c.dst.buffer is buf]
        if len(wholes) != 1 or buf in reads.read_not_as_columns or buf in reads.stored \
                or buf in reads.stored_by_all or (buf not in reads.replicable and not copies):
            continue
        (whole,) = wholes
        if whole not in accumulators or buf.ndim > 2 or math.prod(buf.static_shape()) != whole.static_shape()[-1]:
            continue
        if not set(buffer_roles(func.body, buf)) <= {"allocate", "load", "store", "fill", "copy_dst"}:
            continue
        if any(c.src.buffer.scope != "global" or any(c.src.buffer is w for w in written) for c in copies):
            continue
        if all(_uniform_inputs(n, variance) for n in reads.replicable.get(buf, [])):
            held.add(buf)
    return held


def _written_whole(func: ir.PrimFunc, buf: ir.Buffer, stores: int) -> bool:
    """Every mention of ``buf`` is a load, its allocation, a copy's source or destination, a
    fill's destination, a reduction's destination or one of the ``stores`` every thread makes
    (nothing spreads its elements over the threads), and no copy into it reads a fragment (whose
    elements each thread holds only some of)."""
    if any(c.dst.buffer is buf and c.src.buffer.scope == "fragment" for c in collect(func.body, ir.Copy)):
        return False
    roles = buffer_roles(func.body, buf)
    return roles.get("store", 0) == stores and set(roles) <= {"allocate", "copy_src", "copy_dst", "fill", "reduce_dst",
                                                             "load", "store"}


PER_THREAD_WORDS = 256  # a fragment every thread would hold whole past this goes through shared memory instead


def _too_big_to_copy(buf: ir.Buffer) -> bool:
    """Every thread holding all of ``buf`` would take more than ``PER_THREAD_WORDS`` 32-bit
    registers (``infer_fragment_layouts`` refuses a kernel past 1024): where its reads allow,
    it is read from a shared copy instead (``_columns_from_shared``)."""
    return math.prod(buf.static_shape()) * max(1, buf.dtype.bits // 32) > PER_THREAD_WORDS


def _in_bounds(load: ir.BufferLoad, ranges: dict) -> bool:
    """Each of ``load``'s indices provably inside the fragment's dimension, over the constant ranges
    of the loops around (``scale[j]`` in a loop over ``(i, j)``; mHC's ``x[i, jj * 4 + j]``)."""
    shape = load.buffer.static_shape()
    if len(load.indices) != len(shape):
        return False
    bounds = [interval(i, ranges) for i in load.indices]
    return all(lo is not None and hi is not None and 0 <= lo and hi < n for (lo, hi), n in zip(bounds, shape))


def _columns_from_shared(func: ir.PrimFunc, reads: _Reads, localized: set) -> ir.PrimFunc:
    """The fallback for a fragment no thread can hold whole that ``T.Parallel`` nests read at
    other indices than their variables in order or as its rows, each provably inside it
    (``scale[j]`` in a loop over ``(i, j)``: Mamba's chunk state, where ``scale`` is computed from
    other fragments; ``x[i, jj * 4 + j]`` in mHC): each such nest reads it from a shared copy made
    just before it, with a warning. Not where it is read anywhere else, or stored in such a nest."""
    plans: dict = {}  # id(nest) -> {fragment: tile}
    stand_ins = SharedStandIns(func)
    variance = None  # the kernel's, once a fragment stored outside T.Parallel needs it
    for buf, nests in reads.column_nests.items():
        if buf in localized or buf in reads.read_elsewhere:
            continue
        if buf in reads.stored_by_all:
            variance = variance or Variance(func)
            if not reads.stored_alike(buf, variance):
                continue  # each thread's store outside T.Parallel may differ: whose would the copy hold?
        if any(st.buffer is buf for _, nest in nests.values() for st in collect(nest, ir.BufferStore)):
            continue
        for key, (_anchor, nest) in nests.items():
            plans.setdefault(key, {})[buf] = stand_ins.tile(buf)
            line = nest.loc.line if nest.loc is not None else func.source_line
            warnings.warn_explicit(TileworkbenchWarning(
                f"T.Parallel reads {buf.name} at other indices than its loop variables or its rows: no thread holds "
                f"all it needs of that fragment, so it is copied into a shared tile ({stand_ins.tiles[buf].name}) "
                "before the loop"), TileworkbenchWarning, func.source_file, line or 0)
    if not plans:
        return func
    return func.with_body(stand_ins.declared(_CopyInBefore(plans).visit(func.body)))


class _CopyInBefore(IRMutator):
    def __init__(self, plans: dict):
        self.plans = plans

    def visit_For(self, node: ir.For):
        tiles = self.plans.get(id(node))
        return self.generic_visit(node) if tiles is None else copied_in_before(self.generic_visit(node), tiles)


def _readable_by_all(buf: ir.Buffer, written: set) -> bool:
    """A buffer a nest every thread runs whole may read: a global tensor the kernel never writes
    (else a thread could read an element another has written since, what one thread alone reading
    it never could); a shared tile (``insert_thread_syncs`` orders every thread's reads after the
    writes before, as for any thread code); a per-thread array, if its values are the same in every
    thread (``_uniform_inputs``)."""
    return (buf.scope == "global" and buf not in written) or buf.scope in ("shared", "local")


def _uniform_inputs(nest: ir.For, variance: Variance) -> bool:
    """The nest's per-thread inputs are the same in every thread: each per-thread array it reads,
    and each scalar but its own loop variables (which every thread runs through alike) and the
    names it binds (computed from the rest)."""
    own = {loop.var for loop in collect(nest, ir.For)} | {let.var for let in collect(nest, ir.LetStmt)}
    loads = collect(nest, ir.BufferLoad)
    return (not any(ld.buffer.scope == "local" and ld.buffer in variance.variant_buffers for ld in loads)
            and not any(v in variance.variant_vars and v not in own for v in collect(nest, ir.Var)))


@register("localize_read_fragments", "tile")
def localize_read_fragments(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    reads = _Reads(func)
    reads.visit(func.body)
    candidates = reads.outside - reads.stored
    variance = Variance(func) if candidates & (set(reads.stored_by_all) | set(reads.replicable)) \
        or reads.column_wholes else None
    held = _held_as_columns(func, reads, variance) if reads.column_wholes and variance is not None else set()
    candidates -= held
    replicated = []
    for buf in candidates:
        stores = reads.stored_by_all.get(buf, ())
        if stores and not reads.stored_alike(buf, variance):
            continue
        nests = reads.replicable.get(buf, [])
        if not all(_uniform_inputs(n, variance) for n in nests):
            continue
        if _too_big_to_copy(buf) and buf in reads.column_nests and buf not in reads.read_elsewhere:
            continue  # every thread holding all of it would cost registers a shared copy does not
        if _too_big_to_copy(buf) and buf in reads.slice_reads and buf not in reads.not_slice_reads:
            continue  # read only as slices: each slice laid out as the loops that read it (infer_fragment_layouts)
        nest_stores = sum(len(collect(n, ir.BufferStore)) for n in nests)
        if _written_whole(func, buf, len(stores) + nest_stores):
            buf.scope = "local"
            replicated += nests
    for buf in _thread_own(func, reads):
        buf.scope = "local"
    localized = {buf for buf in candidates if buf.scope == "local"}
    func = func.with_body(_EveryThread(replicated).visit(func.body)) if replicated else func
    return _columns_from_shared(func, reads, localized | held)


def _thread_own(func: ir.PrimFunc, reads: _Reads) -> list:
    """Fragments a ``T.ws`` scope's threads keep as registers of their own: stored element by
    element in a scope, and loaded and stored nowhere inside a ``T.Parallel`` loop nor used by a
    tile operation (TileLang's sparse MLA "seesaw" producer keeps its prefetched indices so:
    ``prefetch_indices[stage, r] = Indices[..., (tx - 256) // 8]``). Each thread's values are its
    own there, as in TileLang, whose layout for such a fragment gives each thread all of it."""
    regions = {id(r.buffer) for r in collect(func.body, ir.Region)}
    return [b for b in reads.stored_in_scopes
            if b not in reads.in_parallel and b not in reads.stored_by_all and id(b) not in regions]


class _EveryThread(IRMutator):
    """The ``T.Parallel`` nests that compute a fragment made a per-thread array run whole in every
    thread (serial loops), each thread computing all of its own copy."""

    def __init__(self, nests):
        self.nests = {id(n) for n in nests}
        self.inside = 0

    def visit_For(self, node: ir.For):
        ours = id(node) in self.nests
        self.inside += ours
        node = self.generic_visit(node) if not self.inside else self._serial(node)
        self.inside -= ours
        return node

    def _serial(self, node: ir.For) -> ir.For:
        body = self._serial(node.body) if isinstance(node.body, ir.For) and node.body.kind == "parallel" else node.body
        return ir.For(node.var, node.extent, body, "serial", annotations=dict(node.annotations), loc=node.loc)
