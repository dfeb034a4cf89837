"""``T.annotate_layout({A: T.Layout(A.shape, forward)})`` on a global tensor: element ``(i, j, ...)``
of ``A`` lies at ``forward(i, j, ...)`` of a row-major array over ``A``'s memory whose extents are
the ranges of those positions (TileLang's attention backward keeps its float32 dQ in 8 x 8 pieces
so that the atomic adds of one fragment row land together). From the annotation on, in that
kernel, every element access of ``A`` reads and writes there (``frontend.regions.LaidOut``) and a
``T.copy`` of a slice of it is a ``T.Parallel`` loop over its elements, each at its place; other
tile operations on ``A`` are refused. The rest of the compiler sees only the memory array
(``A_memory``) and its index arithmetic."""

from __future__ import annotations

import math

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.regions import LaidOut, Layout, laid_out, unit_dropped
from ..ir import nodes as ir
from ..ir.simplify import interval, simplify
from ..ir.visitor import collect


def lay_out(buf: ir.Buffer, layout: Layout):
    """Give the global tensor ``buf`` the layout ``layout`` for the rest of the kernel."""
    from .kernel import view_tensor

    if buf.data is not None:
        raise error(f"T.annotate_layout: {buf.name} is a view of another tensor's memory; give the layout to "
                    "the kernel parameter itself")
    dims = [ir.const_int(d) for d in buf.shape]
    if None in dims:
        raise error(f"T.annotate_layout: {buf.name}'s shape must be known when the kernel is compiled for a layout")
    shape = tuple(ir.const_int(_b.integer(d, "T.Layout: the shape")) for d in layout.shape)
    if list(shape) != dims:
        raise error(f"T.annotate_layout: the layout is for shape {shape}, but {buf.name} is {tuple(dims)}")
    if laid_out(buf) is not None:
        raise error(f"T.annotate_layout: {buf.name} already has a layout in this kernel")
    if _accessed(buf):
        raise error(f"T.annotate_layout: {buf.name} is used before its layout is given; annotate it first, where "
                    "the kernel starts")
    index_vars = tuple(ir.Var(f"{buf.name}_i{d}") for d in range(len(dims)))
    try:
        positions = layout.forward(*index_vars)
    except Exception as exc:  # the user's function, on kernel values
        raise error(f"T.annotate_layout: the layout's function of {buf.name}'s indices failed: "
                    f"{type(exc).__name__}: {exc}") from exc
    positions = tuple(simplify(_b.integer(p, "T.Layout: a position")) for p in
                      (positions if isinstance(positions, (list, tuple)) else [positions]))
    ranges = {v: (0, n - 1) for v, n in zip(index_vars, dims)}
    extents = []
    for d, p in enumerate(positions):
        low, high = interval(p, ranges)
        if low is None or high is None or low < 0:
            raise error(f"T.annotate_layout: position {d} of {buf.name}'s layout ({ir.describe(p)}) must lie in "
                        "a known range from 0, as a function of the indices")
        extents.append(high + 1)
    elements, places = math.prod(dims), math.prod(extents)
    if places > elements:
        raise error(f"T.annotate_layout: the layout spreads {buf.name}'s {elements} elements over {places} places "
                    f"(extents {tuple(extents)}), more than its memory holds")
    memory = view_tensor(_b.TensorData(buf), (1, *extents), buf.dtype, name=f"{buf.name}_memory", layout_of=buf)
    _b.current().global_layouts[buf] = LaidOut(buf, memory, index_vars, positions)


def _accessed(buf: ir.Buffer) -> bool:
    """Whether a statement built so far in this kernel reads or writes ``buf``."""
    for frame in _b.current().frames:
        for stmt in frame:
            for node in collect(stmt, (ir.BufferLoad, ir.BufferStore, ir.Region)):
                if node.buffer is buf:
                    return True
    return False


def copy_elementwise(src: ir.Region, dst: ir.Region):
    """``T.copy(src, dst)`` where a side has a layout: a ``T.Parallel`` loop over the elements, each
    read and written at its place, inside the global tensors' shapes (a load outside fills zeros, a
    store outside does nothing)."""
    def body(s_idx, d_idx):
        load, store_at = element(src.buffer, s_idx), element(dst.buffer, d_idx)
        store = ir.BufferStore(store_at.buffer, store_at.indices, ir.cast(load, dst.buffer.dtype))
        guard = ir.logical_and(inside(src.buffer, s_idx), inside(dst.buffer, d_idx))
        if guard is None:
            return store
        zero = None
        if src.buffer.scope == "global" and dst.buffer.scope != "global":  # a tile's element outside: zero
            zero = ir.BufferStore(store_at.buffer, store_at.indices, ir.zero(dst.buffer.dtype))
        return ir.IfThenElse(guard, store, zero)

    _b.current().emit(element_loop(src, dst, body, "T.copy of a tensor with a layout"))


def element_loop(src: ir.Region, dst: ir.Region, body, what: str) -> ir.Stmt:
    """A ``T.Parallel`` loop nest over the elements two regions of matching extents pair up (a
    fragment side's whole shape, else the non-unit dimensions, in order), its body
    ``body(src indices, dst indices)``."""
    if src.static_extents() is None or dst.static_extents() is None:
        raise error(f"{what}: the regions' extents must be known when the kernel is compiled")
    frame = dst if dst.buffer.scope == "fragment" or src.buffer.scope != "fragment" else src
    other = src if frame is dst else dst
    frame_dims = list(range(frame.buffer.ndim)) if frame.buffer.scope == "fragment" else frame.non_unit_dims()
    paired = frame.paired_dims(other)
    pairs = [(d, paired.get(d)) for d in frame_dims]
    if len(unit_dropped(src.extents)) != len(unit_dropped(dst.extents)):
        raise error(f"internal: {what}: regions of different shapes")
    loop_vars = [ir.Var(f"i{n}") for n in range(len(pairs))]
    frame_idx, other_idx = list(frame.starts), list(other.starts)
    for v, (fd, od) in zip(loop_vars, pairs):
        frame_idx[fd] = frame.starts[fd] + v
        if od is not None:
            other_idx[od] = other.starts[od] + v
    s_idx, d_idx = (frame_idx, other_idx) if frame is src else (other_idx, frame_idx)
    stmt = body(s_idx, d_idx)
    for var, (fd, _) in reversed(list(zip(loop_vars, pairs))):
        stmt = ir.For(var, ir.const(frame.static_extents()[fd]), stmt, "parallel")
    return stmt


def element(buf: ir.Buffer, indices) -> ir.BufferLoad:
    """``buf[indices]``: at the place a layout gives it, if ``buf`` has one."""
    layout = laid_out(buf)
    return layout.element(indices) if layout is not None else ir.BufferLoad(buf, tuple(indices), buf.dtype)


def inside(buf: ir.Buffer, indices) -> ir.Expr | None:
    """``indices`` inside a global tensor's (logical) shape; None for tiles."""
    if buf.scope != "global":
        return None
    return ir.within(indices, buf.shape)
