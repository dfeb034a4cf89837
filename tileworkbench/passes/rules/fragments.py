"""Fragments in ``partition_parallel_loops``: an access ``F[i, j]`` inside a ``T.Parallel`` loop
over the fragment becomes the thread's own element ``F_local[j]`` (:class:`FragmentAccess`), and
every fragment becomes a per-thread ``local`` array, an access left outside such a loop an error
(:class:`FragmentsToLocal`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.layout import slice_layout, slice_slots, with_shape
from ...ir.fragment_parts import ColumnsLayout, ProjectedLayout, SegmentsLayout, project
from ...ir.visitor import IRMutator, uses_var

# The annotation on a T.Parallel loop that lower_tile_ops makes for a reduction's partial sums: it
# may write a row fragment in a loop over the whole one (each thread into its own copy).
PARTIAL_ROWS = "partial_rows"
# The annotation on the loop in which one lane of each warp writes its partial of a row to a
# reduction's scratch: its stores are each warp's own, not copies one thread may make for all.
EACH_WARP = "each_warp"


def parallel_nest(loop: ir.For) -> tuple[list, ir.Stmt]:
    """The perfectly nested ``T.Parallel`` loops from ``loop`` down (``T.Parallel(M, N)`` is two),
    and the innermost body."""
    loops, body = [loop], loop.body
    while isinstance(body, ir.For) and body.kind == "parallel":
        loops.append(body)
        body = body.body
    return loops, body


def is_whole(indices, loop_vars) -> bool:
    """``F[v0, v1]``: a fragment indexed by all of a loop nest's variables, in order."""
    return len(indices) == len(loop_vars) and all(i is v for i, v in zip(indices, loop_vars))


def is_row(indices, loop_vars) -> bool:
    """``F[v0]`` in a loop over ``(v0, v1)``: a leading part of the variables, in order."""
    return 0 < len(indices) < len(loop_vars) and all(i is v for i, v in zip(indices, loop_vars))


def is_column(indices, loop_vars, shape=None) -> bool:
    """``c[j]`` in a loop over ``(i, j)``: the last of two variables alone (a fragment holding the
    columns of the loop's, ``ir.fragment_parts.ColumnsLayout``); or, for a 2-D ``c`` of ``shape`` ``(Q, H)``,
    that variable's row-major place in it, ``c[j // H, j % H]`` (the FP8 indexers' head weights in a
    loop over a fragment view's merged dimensions, ``merge_parallel_dims``)."""
    if len(loop_vars) != 2:
        return False
    j = loop_vars[1]
    if len(indices) == 1:
        return indices[0] is j
    if shape is None or len(indices) != 2:
        return False
    row, col = indices
    return _of_var(row, "//", j, shape[1]) and _of_var(col, "%", j, shape[1])


def _of_var(index, op: str, var: ir.Var, n: int) -> bool:
    """``index`` is ``var <op> n``."""
    return isinstance(index, ir.BinOp) and index.op == op and index.a is var and ir.const_int(index.b) == n


@dataclass(frozen=True)
class ParallelNest:
    """A ``T.Parallel`` nest's variables and constant extents (None where not constant), and how
    an access to a fragment of ``shape`` relates to it (:meth:`match`):

    * ``"whole"``: the nest's variables in order, up to unit dimensions on either side (LayerNorm's
      ``x_hat[i, j]`` and ``dgamma_acc[j]`` in a loop over ``(1, D)``; the layouts then agree up to
      them, ``ir.layout.with_shape``);
    * ``"row"``: a leading part of them (``s[i]`` in a loop over ``(i, j)``; ``s[0]`` where ``i``
      runs over one value);
    * ``"slice"``: indices free of the nest's variables, then all of them (``lse[k, j]`` in a loop
      over ``j``: ``ir.layout.slice_layout``)."""

    vars: tuple
    extents: tuple

    @staticmethod
    def of(loops) -> "ParallelNest":
        return ParallelNest(tuple(lp.var for lp in loops), tuple(ir.const_int(lp.extent) for lp in loops))

    def _unit(self, var) -> bool:
        return any(v is var and e == 1 for v, e in zip(self.vars, self.extents))

    def aligned(self, indices, shape) -> tuple:
        """``indices`` with a constant 0 into a unit dimension, standing where a variable of one
        value stands, replaced by that variable (both are 0)."""
        if shape is None:
            return tuple(indices)
        return tuple(self.vars[p] if p < len(self.vars) and self.extents[p] == 1 and shape[p] == 1
                     and ir.const_int(i) == 0 else i for p, i in enumerate(indices))

    def match(self, indices, shape) -> tuple[str, int] | None:
        """(kind, the number of fixed leading indices of a slice, else 0), or None; ``shape`` is
        the fragment's (None: not known, then no unit dimension is looked through)."""
        idx = self.aligned(indices, shape)
        if is_whole(idx, self.vars):
            return ("whole", 0)
        if is_row(idx, self.vars):
            return ("row", 0)
        if shape is not None and len(shape) == len(idx):
            kept = [i for i, n in zip(idx, shape) if not (n == 1 and (ir.const_int(i) == 0 or self._unit(i)))]
            wanted = [v for v, e in zip(self.vars, self.extents) if e != 1]
            if kept and is_whole(kept, wanted):
                return ("whole", 0)
        lead = len(indices) - len(self.vars)
        if lead > 0 and is_whole(tuple(indices)[lead:], self.vars) and not any(
                uses_var(i, v) for i in tuple(indices)[:lead] for v in self.vars):
            return ("slice", lead)
        return None


class FragmentAccess(IRMutator):
    """Rewrites ``F[v0, v1]`` (identity indices, up to unit dimensions: :class:`ParallelNest`) to
    ``F_local[j]``, ``S[v0]`` (a fragment with the rows of the loop's layout,
    ``ir.fragment_parts.ProjectedLayout``) to ``S_local[slot_of(j)]``, ``C[v1]`` (a fragment with the columns of
    the loop's tensor-core accumulator, ``ir.fragment_parts.ColumnsLayout``) likewise, and ``F[k, v0]`` (a slice, each
    alike over the threads: ``ir.layout.slice_layout``) to ``F_local[k * slots + j]``: read from
    the thread's own copy. Writing such a row inside a loop over the whole is refused (every
    thread holding the row would write it), except in the partial sums a reduction lowers to
    (``accumulate_rows``: each thread's own copy is its partial). ``extents``: the loops' (None:
    unit dimensions are not looked through)."""

    def __init__(self, loop_vars, j, layout, loc, to_local, accumulate_rows: bool = False, extents=None):
        self.loop_vars, self.j, self.layout, self.loc, self.to_local = loop_vars, j, layout, loc, to_local
        self.accumulate_rows = accumulate_rows
        self.nest = ParallelNest(tuple(loop_vars), tuple(extents) if extents is not None else (None,) * len(loop_vars))

    def local_index(self, buf, indices, store: bool, loc=None):
        layout = buf.attrs["layout"]
        found = self.nest.match(indices, buf.static_shape() if self.nest.extents[0] is not None else None)
        kind, lead = found or (None, 0)
        if kind == "whole":
            if with_shape(layout, tuple(self.layout.shape)) != self.layout:
                raise CompileError(f"fragment {buf.name} has a different thread layout "
                                   f"({layout.describe()}) from the loop's "
                                   f"({self.layout.describe()}); copy through shared memory", self.loc)
            return self.j
        loop_rows = self.rows_of_loop(layout)
        if kind == "row" and loop_rows is not None and loop_rows == layout:
            if store and not self.accumulate_rows:
                raise CompileError(f"fragment {buf.name} is written in a loop over more than its own indices: every "
                                   f"thread holding a row would write it; write it in a loop over {buf.name} alone "
                                   "(or reduce into it with T.reduce_*)", loc or self.loc)
            return loop_rows.slot_of(self.j)
        if kind is None and isinstance(layout, ColumnsLayout) and is_column(indices, self.loop_vars, layout.shape) \
                and layout.base == self.layout:
            if store:
                raise CompileError(f"fragment {buf.name} is written in a loop over more than its own indices: every "
                                   f"thread holding a column would write it; write it in a loop over {buf.name} alone",
                                   loc or self.loc)
            return layout.slot_of(self.j)
        if kind is None and isinstance(layout, SegmentsLayout) and layout.base == self.layout \
                and self._runs_of_loop(indices, layout.segment):
            if store and not self.accumulate_rows:
                raise CompileError(f"fragment {buf.name} is written in a loop over more than its own indices: every "
                                   f"thread holding a row would write it; reduce into it with T.reduce_*",
                                   loc or self.loc)
            return layout.slot_of(self.j)
        inner = slice_layout(layout, lead) if kind == "slice" else None
        if inner is not None and with_shape(inner, tuple(self.layout.shape)) == self.layout:
            first = 0
            for index, n in zip(indices[:lead], layout.shape[:lead]):
                first = first * n + index
            return first * slice_slots(layout, lead) + self.j
        raise CompileError(f"fragment {buf.name} must be indexed by the T.Parallel loop variables "
                           f"in order, like {buf.name}[{', '.join(v.name for v in self.loop_vars)}]"
                           + (", or by the leading ones where it holds rows of the loop's fragment"
                              if len(self.loop_vars) > 1 else "")
                           + (f" (a slice {buf.name}[k, ...] is read where each slice lies over the threads as "
                              "the loop's elements do)" if kind == "slice" else ""), self.loc)

    def _runs_of_loop(self, indices, segment: int) -> bool:
        """``P[v0, v1 // segment]`` in a loop over ``(v0, v1)``: a reduction's partial per run of a row."""
        if len(self.loop_vars) != 2 or len(indices) != 2 or indices[0] is not self.loop_vars[0]:
            return False
        return _of_var(indices[1], "//", self.loop_vars[1], segment)

    def rows_of_loop(self, layout):
        """The rows of the loop's layout in the form ``layout`` has (None if it holds no rows): the
        loop's element ``j`` names its slot, even where ``layout`` was projected from another
        fragment with the same rows (``ProjectedLayout`` equality)."""
        if not isinstance(layout, ProjectedLayout) or isinstance(self.layout, ProjectedLayout):
            return None
        try:
            return project(self.layout, layout.kept)
        except ValueError:
            return None

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        if node.buffer.scope != "fragment":
            return node
        j = self.local_index(node.buffer, node.indices, store=False)
        return ir.BufferLoad(self.to_local(node.buffer), (j,), node.dtype)

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        if node.buffer.scope != "fragment":
            return node
        j = self.local_index(node.buffer, node.indices, store=True, loc=node.loc)
        return ir.BufferStore(self.to_local(node.buffer), (j,), node.value, loc=node.loc)


class FragmentsToLocal(IRMutator):
    """Fragments become per-thread arrays; any access left outside a T.Parallel loop is an error."""

    def __init__(self):
        self.map: dict = {}
        self.loc = None

    def local(self, buf):
        if buf.scope != "fragment":
            return buf
        if buf not in self.map:
            layout = buf.attrs["layout"]
            self.map[buf] = ir.Buffer(buf.name, (ir.const(layout.local_size),), buf.dtype, "local",
                                      attrs={"layout": layout, "fragment_shape": buf.static_shape()}, loc=buf.loc)
        return self.map[buf]

    def visit_Allocate(self, node):
        return ir.Allocate(self.local(node.buffer), loc=node.loc)

    def _outside(self, buf, loc):
        return CompileError(f"fragment {buf.name} can only be accessed inside a T.Parallel loop over it "
                            "or by tile operations (each thread holds only part of it)", loc)

    def visit_BufferLoad(self, node):
        if node.buffer.scope == "fragment":
            raise self._outside(node.buffer, self.loc)
        return self.generic_visit(node)

    def visit_BufferStore(self, node):
        if node.buffer.scope == "fragment":
            raise self._outside(node.buffer, node.loc or self.loc)
        self.loc = node.loc or self.loc  # a store a lowering made has none: the statement around it names the line
        return self.generic_visit(node)

    def generic_visit(self, node):
        if getattr(node, "loc", None) is not None and isinstance(node, ir.Stmt):
            self.loc = node.loc
        return super().generic_visit(node)
