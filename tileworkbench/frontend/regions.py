"""Subscripts and tile operands: what ``A[i, j]``, ``A[0:n, k]`` and ``mbar[s]`` mean where the
DSL takes them, with their constant indices and slice bounds checked, and how the two sides of
a copy resolve into regions of one shape; an element of a global tensor given a layout
(``T.annotate_layout``) is where the layout puts it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir import nodes as ir
from ..ir.simplify import simplify
from ..ir.visitor import collect, substitute
from . import builder as _builder
from .builder import Point, describe, error, integer
from .fragment_views import fragment_view


@dataclass(frozen=True, eq=False)
class Layout:
    """``Layout(shape, forward)``: element ``(i, j, ...)`` of a tensor of ``shape`` lies at position
    ``forward(i, j, ...)`` (a list of indices) of a row-major array whose extents are the ranges of
    those indices (TileLang's ``tilelang.layout.Layout``; on a global tensor through
    ``T.annotate_layout``, the layout TileLang's attention backward keeps its float32 dQ in)."""

    shape: tuple
    forward: Callable

    def __post_init__(self):
        if not callable(self.forward):
            raise error(f"Layout(shape, forward): forward must be a function of the indices, not "
                        f"{describe(self.forward)}")


@dataclass(frozen=True, eq=False)
class LaidOut:
    """A global tensor ``tensor`` under a layout: its element ``(i, j, ...)`` (``index_vars``) lies
    at ``memory[0, positions...]``, ``memory`` the tensor's own memory seen with the layout's
    extents and a leading dimension of 1. An index outside the tensor's shape gets 1 there: outside
    the memory view too, so that what keeps a tile's accesses inside a tensor (a copy's bounds,
    ``guard_global_accesses``) skips it, where its positions alone could fall on another element's
    place (a layout that flattens, say)."""

    tensor: ir.Buffer
    memory: ir.Buffer
    index_vars: tuple
    positions: tuple

    def element(self, indices) -> ir.BufferLoad:
        at = {v: i for v, i in zip(self.index_vars, indices)}
        inside = simplify(ir.within(indices, self.tensor.shape))
        outside = ir.const(0) if ir.const_int(inside) == 1 else ir.Select(inside, ir.const(0), ir.const(1), ir.dtypes.int32)
        return ir.BufferLoad(self.memory, (outside, *(simplify(substitute(p, at)) for p in self.positions)),
                             self.memory.dtype)


def laid_out(buffer) -> LaidOut | None:
    """The layout ``T.annotate_layout`` gave the global tensor ``buffer`` in this kernel, if any."""
    b = getattr(_builder._state, "builder", None)
    return b.global_layouts.get(buffer) if b is not None and isinstance(buffer, ir.Buffer) else None


def subscript_buffer(buffer: ir.Buffer, key):
    """``buffer[key]``: a load (all indices scalar), a Region (any slice) or a BarrierRef."""
    if not isinstance(key, tuple):
        key = (key,)
    if buffer.scope == "barrier":
        if len(key) != 1 or isinstance(key[0], slice):
            raise error(f"barrier array {buffer.name} takes one index")
        slot = integer(key[0], f"the slot of barrier {buffer.name}")
        _check_constant_index(buffer, 0, slot, f"barrier {buffer.name}")
        return ir.BarrierRef(buffer, slot)
    if len(key) != buffer.ndim:
        raise error(
            f"{buffer.name} has {buffer.ndim} dimension(s) but is indexed with {len(key)} index(es)"
        )
    if not any(isinstance(k, slice) for k in key):
        indices = tuple(integer(k, f"index {d} of {buffer.name}") for d, k in enumerate(key))
        for d, i in enumerate(indices):
            _check_constant_index(buffer, d, i, buffer.name)
        layout, view = laid_out(buffer), fragment_view(buffer)
        if view is not None:  # the fragment's element at the same row-major position
            return ir.BufferLoad(view.base, view.element(indices), view.base.dtype)
        return layout.element(indices) if layout is not None else ir.BufferLoad(buffer, indices, buffer.dtype)
    starts, extents = [], []
    for d, (k, dim) in enumerate(zip(key, buffer.shape)):
        if isinstance(k, slice):
            if k.step is not None and ir.const_int(k.step) != 1:
                raise error(f"slices of {buffer.name} must have step 1")
            lo = integer(0 if k.start is None else k.start, f"the start of slice {d} of {buffer.name}")
            hi = integer(dim if k.stop is None else k.stop, f"the end of slice {d} of {buffer.name}")
            _check_constant_slice(buffer, d, lo, hi)
            starts.append(lo)
            extents.append(_slice_extent(hi, lo))
        else:
            start = integer(k, f"index {d} of {buffer.name}")
            _check_constant_index(buffer, d, start, buffer.name)
            starts.append(start)
            extents.append(ir.const(1))
    return ir.Region(buffer, tuple(starts), tuple(extents))


def _check_constant_index(buffer: ir.Buffer, d: int, index: ir.Expr, what: str):
    """A constant index must lie inside a dimension of constant size (kernels do not wrap negative
    indices as Python does, and nothing checks an element index at run time)."""
    i, n = ir.const_int(index), ir.const_int(buffer.shape[d])
    if i is None:
        return
    if i < 0:
        raise error(f"index {i} into dimension {d} of {what} is negative (kernels do not count from the end "
                    f"as Python does)")
    if n is not None and i >= n:
        raise error(f"index {i} is out of range for dimension {d} of {what}, which has {n} element(s)")


def _check_constant_slice(buffer: ir.Buffer, d: int, lo: ir.Expr, hi: ir.Expr):
    """Constant slice bounds: inside a shared, fragment or local buffer, non-empty, never negative
    (a slice of a global tensor may run past its end: copies check those bounds)."""
    a, b, n = ir.const_int(lo), ir.const_int(hi), ir.const_int(buffer.shape[d])
    if a is not None and a < 0 or b is not None and b < 0:
        raise error(f"slice {d} of {buffer.name} has a negative bound (kernels do not count from the end "
                    f"as Python does)")
    if a is not None and b is not None and b <= a:
        raise error(f"slice {d} of {buffer.name} is empty ({a}:{b})")
    if buffer.scope != "global" and n is not None and (a is not None and a >= n or b is not None and b > n):
        raise error(f"slice {d} of {buffer.name} ({a if a is not None else ''}:{b if b is not None else ''}) "
                    f"runs past its {n} element(s)")


def _slice_extent(hi: ir.Expr, lo: ir.Expr) -> ir.Expr:
    """``hi - lo``, simplified; where that is no constant, again with the kernel names in it replaced
    by the values they were bound to (``kv_start = s * bz + k * 64``, ``kv_end = s * bz + (k + 1) *
    64``: 64), if none of them was assigned again. A constant found so is kept only if they never
    are: the builder remembers them and refuses a later assignment (``statements._assign``)."""
    extent = simplify(hi - lo)
    if ir.const_int(extent) is not None:
        return extent
    b = getattr(_builder._state, "builder", None)
    if b is None:
        return extent
    through, seen = set(), simplify(hi - lo)
    for _ in range(8):  # names bound through other names, a few deep
        names = [v for v in collect(seen, ir.Var) if v in b.let_values]
        # a value names the variables it read when it was bound: one assigned since holds another
        # value now (x = k * 64; start = x; x = x + 1; end = x + 64 is 65 wide, not 64)
        if not names or any(u in b.reassigned for v in names for u in (v, *collect(b.let_values[v], ir.Var))):
            break
        through.update(names)
        through.update(u for v in names for u in collect(b.let_values[v], ir.Var))
        seen = simplify(substitute(seen, {v: b.let_values[v] for v in names}))
        if ir.const_int(seen) is not None:
            for v in through:
                b.sized_by.setdefault(v, b.loc)
            return seen
    return extent


# the tile operations that take a region of a tensor with a layout (each element at its place)
_FOLLOW_LAYOUTS = ("T.copy ", "T.atomic_add ", "T.atomic_max ", "T.atomic_min ")


def as_region(value, what: str) -> ir.Region | Point:
    """A tile operation's operand: a whole buffer, a slice of one (its extents constants, or
    bounded by the kernel's loop and block indices) or a tile origin ``A[i, j]``."""
    if isinstance(value, ir.BarrierRef) or isinstance(value, ir.Buffer) and value.scope == "barrier":
        name = value.buffer.name if isinstance(value, ir.BarrierRef) else value.name
        raise error(f"{what} must be a tile, but {name} is a barrier (T.alloc_barrier): barriers are set up by "
                    "the compiler and used only with T.barrier_arrive / T.barrier_wait and TMA copies")
    view = fragment_view(value.buffer if isinstance(value, (ir.Region, ir.BufferLoad)) else value)
    if view is not None:
        if what.startswith(("T.fill", "T.clear")) and isinstance(value, ir.Buffer):
            return ir.Region.full(view.base)  # the same elements
        raise error(f"{what}: {view.view.name} is a view of the fragment {view.base.name} (T.reshape / T.view), "
                    "which element accesses, T.fill, T.clear and T.reduce_* take; this tile operation on it "
                    f"is not supported yet (use {view.base.name} itself, or loop over the view's elements "
                    "with T.Parallel)")
    region = ir.Region.full(value) if isinstance(value, ir.Buffer) else value
    if isinstance(region, ir.Region) and laid_out(region.buffer) is not None and not what.startswith(_FOLLOW_LAYOUTS):
        raise error(f"{what}: {region.buffer.name} has a layout (T.annotate_layout), which T.copy, T.atomic_add "
                    f"and element accesses follow; this tile operation on it is not supported (loop over its "
                    "elements with T.Parallel, or copy it into a tile first)")
    if isinstance(region, ir.Region):
        return region
    if isinstance(value, ir.BufferLoad):
        if value.buffer.attrs.get("layout_of") is not None and what.startswith("T.copy"):
            raise error(f"{what}: {value.buffer.attrs['layout_of'].name} has a layout (T.annotate_layout); a "
                        "copy of it takes a slice (A[i, 0:n]), not a tile origin")
        return Point(value.buffer, value.indices)
    raise error(f"{what} must be a buffer, a slice of one or a tile origin like A[i, j]; got {describe(value)}")


def unit_dropped(extents) -> list:
    return [e for e in extents if ir.const_int(e) != 1]


def resolve_regions(src, dst, op: str) -> tuple[ir.Region, ir.Region]:
    """Turn a (region|point, region|point) pair into two regions of matching extents.

    Extents match dimension by dimension after dropping the unit ones. An extent known only
    when the kernel runs (``A[0:n]``) must be the same expression on both sides (``s[0:n]``), so
    that the copy moves exactly the elements the user sliced on each side."""
    if isinstance(src, Point) and isinstance(dst, Point):
        raise error(f"{op}: at least one side must be a whole buffer or a slice")
    if isinstance(src, Point):
        src = _extend_point(src, dst.extents, op)
    if isinstance(dst, Point):
        dst = _extend_point(dst, src.extents, op)
    a, b = unit_dropped(src.extents), unit_dropped(dst.extents)
    mismatch = error(f"{op}: shape mismatch, {src.buffer.name} region is {_fmt(src.extents)} but "
                     f"{dst.buffer.name} region is {_fmt(dst.extents)}")
    if len(a) != len(b):
        raise mismatch
    for x, y in zip(a, b):
        cx, cy = ir.const_int(x), ir.const_int(y)
        if cx is not None and cy is not None:
            if cx != cy:
                raise mismatch
        elif cx is None and cy is None:
            if ir.const_int(simplify(x - y)) != 0:
                raise error(f"{op}: the extents {x} of {src.buffer.name} and {y} of {dst.buffer.name} are known only "
                            "when the kernel runs and may differ; slice both sides with the same bounds")
        else:
            dynamic, static = (src, dst) if cx is None else (dst, src)
            extent = x if cx is None else y
            raise error(f"{op}: the {dynamic.buffer.name} region's extent {extent} is known only when the kernel runs, "
                        f"but the {static.buffer.name} region is {_fmt(static.extents)}; slice both sides alike "
                        f"(e.g. T.copy(A[0:n], s[0:n])) to copy the first n elements")
    return src, dst


def _extend_point(p: Point, other_extents, op: str) -> ir.Region:
    rank = len(p.indices)
    ext = list(other_extents)
    while len(ext) > rank and ir.const_int(ext[0]) == 1:
        ext.pop(0)
    if len(ext) > rank:
        raise error(
            f"{op}: {p.buffer.name} has rank {rank} but the other side's tile is {_fmt(other_extents)}"
        )
    ext = [ir.const(1)] * (rank - len(ext)) + ext
    _check_point_stays_inside(p, ext, op)
    return ir.Region(p.buffer, tuple(p.indices), tuple(ir.as_expr(e) for e in ext))


def _check_point_stays_inside(p: Point, extents, op: str):
    """An element standing for a tile (``T.copy(f[0], B)``: ``f[0:len(B)]``, as TileLang reads it) of
    a shared, fragment or local buffer must not run past the buffer where its bounds are constants,
    or where the tile is longer than the buffer, wherever it starts: the copy would read or write
    beyond it (a fragment's copy kept only its own elements, silently; a shared tile's read past it)."""
    if p.buffer.scope == "global":
        return
    for d, (start, extent, size) in enumerate(zip(p.indices, extents, p.buffer.shape)):
        a, e, n = ir.const_int(start), ir.const_int(extent), ir.const_int(size)
        lowest = 0 if a is None else a  # an index is never negative (a constant one is checked so)
        if e is not None and n is not None and lowest + e > n:
            reach = f"element {a + e}" if a is not None else f"{e} elements from {start}"
            one = f"{a}:{a + 1}" if a is not None else f"{start}:{start} + 1"
            raise error(f"{op}: {p.buffer.name}[{', '.join(map(str, p.indices))}] stands for a tile as large as the "
                        f"other side ({_fmt(extents)}), and along dimension {d} that runs to {reach}, past "
                        f"its {n}; give the slice you mean (e.g. {p.buffer.name}[{one}]) or a whole "
                        f"buffer")


def _fmt(extents) -> str:
    return "x".join(str(ir.const_int(e)) if ir.const_int(e) is not None else str(e) for e in extents)


def as_barrier(value, what: str = "barrier") -> ir.BarrierRef:
    if isinstance(value, ir.BarrierRef):
        return value
    if isinstance(value, ir.Buffer) and value.scope == "barrier":
        return ir.BarrierRef(value, ir.const(0))
    raise error(f"{what} must be a barrier from T.alloc_barrier (or one slot of one), not {describe(value)}")
