"""The statement builder the ``T.*`` functions append to while the front end walks a kernel.

The front end pushes a frame for every block (kernel body, loop body, if branch); ``emit``
appends a statement to the innermost frame, stamped with the source location of the line the
front end is visiting. ``T.*`` functions therefore stay thin: check arguments, build a node,
emit it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..errors import CompileError, SourceLocation
from ..ir import nodes as ir

_state = threading.local()


class Builder:
    def __init__(self):
        self.frames: list[list[ir.Stmt]] = []
        self.loc: SourceLocation | None = None
        self.launch: ir.Launch | None = None
        self.names: dict[str, int] = {}
        self.loop_vars: list[ir.Var] = []  # innermost last
        self.pipelined_depth = 0

    def emit(self, stmt: ir.Stmt) -> ir.Stmt:
        if not self.frames:
            raise CompileError("tile operations must be inside `with T.Kernel(...)`", self.loc)
        if getattr(stmt, "loc", None) is None and hasattr(stmt, "loc"):
            stmt.loc = self.loc
        self.frames[-1].append(stmt)
        return stmt

    def push(self):
        self.frames.append([])

    def pop(self) -> ir.Stmt:
        return ir.seq(self.frames.pop())

    def fresh_name(self, base: str) -> str:
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"


def current() -> Builder:
    b = getattr(_state, "builder", None)
    if b is None:
        raise CompileError("T.* functions can only be used inside a @T.prim_func kernel")
    return b


def install(builder: Builder | None):
    _state.builder = builder


def error(message: str) -> CompileError:
    """A CompileError at the kernel line being built."""
    b = getattr(_state, "builder", None)
    return CompileError(message, b.loc if b else None)


# ---- subscripts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """``A[i, j]`` used where a region is expected: a tile origin, extents from the other side."""

    buffer: ir.Buffer
    indices: tuple


def subscript_buffer(buffer: ir.Buffer, key):
    """``buffer[key]``: a load (all indices scalar), a Region (any slice) or a BarrierRef."""
    if not isinstance(key, tuple):
        key = (key,)
    if buffer.scope == "barrier":
        if len(key) != 1 or isinstance(key[0], slice):
            raise error(f"barrier array {buffer.name} takes one index")
        return ir.BarrierRef(buffer, ir.as_expr(key[0]))
    if len(key) != buffer.ndim:
        raise error(
            f"{buffer.name} has {buffer.ndim} dimension(s) but is indexed with {len(key)} index(es)"
        )
    if not any(isinstance(k, slice) for k in key):
        return ir.BufferLoad(buffer, tuple(ir.as_expr(k) for k in key), buffer.dtype)
    starts, extents = [], []
    for k, dim in zip(key, buffer.shape):
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise error(f"slices of {buffer.name} must have step 1")
            lo = ir.as_expr(0 if k.start is None else k.start)
            hi = ir.as_expr(dim if k.stop is None else k.stop)
            starts.append(lo)
            extents.append(_static_or_expr(hi - lo))
        else:
            starts.append(ir.as_expr(k))
            extents.append(ir.const(1))
    return ir.Region(buffer, tuple(starts), tuple(extents))


def _static_or_expr(e):
    from ..ir.simplify import simplify

    return simplify(e)


def as_region(value, what: str) -> ir.Region | Point:
    if isinstance(value, ir.Buffer):
        return ir.Region.full(value)
    if isinstance(value, ir.Region):
        return value
    if isinstance(value, ir.BufferLoad):
        return Point(value.buffer, value.indices)
    raise error(f"{what} must be a buffer, a slice of one or a tile origin like A[i, j]; got {value!r}")


def unit_dropped(extents) -> list:
    return [e for e in extents if ir.const_int(e) != 1]


def resolve_regions(src, dst, op: str) -> tuple[ir.Region, ir.Region]:
    """Turn a (region|point, region|point) pair into two regions of matching extents."""
    if isinstance(src, Point) and isinstance(dst, Point):
        raise error(f"{op}: at least one side must be a whole buffer or a slice")
    if isinstance(src, Point):
        src = _extend_point(src, dst.extents, op)
    if isinstance(dst, Point):
        dst = _extend_point(dst, src.extents, op)
    a, b = unit_dropped(src.extents), unit_dropped(dst.extents)
    sa, sb = [ir.const_int(x) for x in a], [ir.const_int(x) for x in b]
    if len(a) != len(b) or (None not in sa and None not in sb and sa != sb):
        raise error(
            f"{op}: shape mismatch, {src.buffer.name} region is {_fmt(src.extents)} but "
            f"{dst.buffer.name} region is {_fmt(dst.extents)}"
        )
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
    return ir.Region(p.buffer, tuple(p.indices), tuple(ir.as_expr(e) for e in ext))


def _fmt(extents) -> str:
    return "x".join(str(ir.const_int(e)) if ir.const_int(e) is not None else str(e) for e in extents)


def as_barrier(value, what: str = "barrier") -> ir.BarrierRef:
    if isinstance(value, ir.BarrierRef):
        return value
    if isinstance(value, ir.Buffer) and value.scope == "barrier":
        return ir.BarrierRef(value, ir.const(0))
    raise error(f"{what} must be a barrier from T.alloc_barrier (or one slot of one); got {value!r}")
