"""The statement builder the ``T.*`` functions append to while the front end walks a kernel.

The front end pushes a frame for every block (kernel body, loop body, if branch); ``emit``
appends a statement to the innermost frame, stamped with the source location of the line the
front end is visiting. ``T.*`` functions therefore stay thin: check arguments, build a node,
emit it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..dtypes import constant_problem
from ..errors import CompileError, SourceLocation, caller_location
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
        self.in_kernel = False  # inside the body of `with T.Kernel(...)`

    def emit(self, stmt: ir.Stmt) -> ir.Stmt:
        if not self.frames or not self.in_kernel:
            raise CompileError("kernel statements (allocations, tile operations, stores, kernel variables) must "
                               "be inside `with T.Kernel(...)`; only Python values (sizes, dtypes) may be "
                               "computed before or after it", self.loc)
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
        raise CompileError("T.* functions that build a kernel can only be used inside a @T.prim_func kernel",
                           caller_location())
    return b


def launch(what: str) -> ir.Launch:
    """The kernel's launch (grid, threads), or an error saying ``what`` needs ``with T.Kernel``."""
    b = current()
    if b.launch is None or not b.in_kernel:
        raise error(f"{what} is only known inside `with T.Kernel(...)`")
    return b.launch


def install(builder: Builder | None):
    _state.builder = builder


def error(message: str) -> CompileError:
    """A CompileError at the kernel line being built (outside a kernel: the user's calling line,
    e.g. an annotation Python evaluates when it runs the ``def``)."""
    b = getattr(_state, "builder", None)
    return CompileError(message, b.loc if b and b.loc else caller_location())


# ---- argument checks: every T.* function says what is wrong with which argument ----------------

INT32_MAX = 2**31 - 1


def describe(value) -> str:
    """A value as a message names it (never an object's address)."""
    if isinstance(value, Point):
        return f"an element of {value.buffer.name}"
    return ir.describe(value)


def number(value, what: str) -> ir.Expr:
    """``value`` as a numeric kernel value (a Python number or an IR expression)."""
    if isinstance(value, ir.Expr):
        if value.dtype.kind == "handle":
            raise error(f"{what} must be a number, not {describe(value)}")
        return value
    if isinstance(value, (bool, int, float)) or _is_numpy_number(value):
        return ir.as_expr(value)
    raise error(f"{what} must be a number, not {describe(value)}")


def integer(value, what: str) -> ir.Expr:
    """``value`` as an integer kernel value: a Python int or an integer IR expression."""
    e = number(value, what)
    if isinstance(value, bool) or e.dtype.is_float or e.dtype.kind == "bool":
        raise error(f"{what} must be an integer, not {describe(value)}")
    return e


def constant_int(value, what: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int known while the kernel is built, within ``[low, high]``."""
    n = ir.const_int(integer(value, what))
    if n is None:
        raise error(f"{what} must be a constant integer, not {describe(value)}")
    if low is not None and n < low or high is not None and n > high:
        bounds = (f"between {low} and {high}" if low is not None and high is not None
                  else f"at least {low}" if low is not None else f"at most {high}")
        raise error(f"{what} must be {bounds}, got {n}")
    return n


def stored_value(value, buffer: ir.Buffer, what: str) -> ir.Expr:
    """A number to store in ``buffer``; a constant must be representable in its dtype."""
    e = number(value, what)
    if isinstance(e, ir.Const) and not isinstance(e.value, bool):
        problem = constant_problem(e.value, buffer.dtype)
        if problem:
            raise error(f"{what}: {problem}")
    return e


def _is_numpy_number(value) -> bool:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return False
    return isinstance(value, np.generic) and (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_)


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
        return ir.BufferLoad(buffer, indices, buffer.dtype)
    starts, extents = [], []
    for d, (k, dim) in enumerate(zip(key, buffer.shape)):
        if isinstance(k, slice):
            if k.step is not None and ir.const_int(k.step) != 1:
                raise error(f"slices of {buffer.name} must have step 1")
            lo = integer(0 if k.start is None else k.start, f"the start of slice {d} of {buffer.name}")
            hi = integer(dim if k.stop is None else k.stop, f"the end of slice {d} of {buffer.name}")
            _check_constant_slice(buffer, d, lo, hi)
            starts.append(lo)
            extents.append(_static_or_expr(hi - lo))
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


def _static_or_expr(e):
    from ..ir.simplify import simplify

    return simplify(e)


def as_region(value, what: str) -> ir.Region | Point:
    """A tile operation's operand: a whole buffer, a slice of one (its extents constants, or
    bounded by the kernel's loop and block indices) or a tile origin ``A[i, j]``."""
    if isinstance(value, ir.BarrierRef) or isinstance(value, ir.Buffer) and value.scope == "barrier":
        name = value.buffer.name if isinstance(value, ir.BarrierRef) else value.name
        raise error(f"{what} must be a tile, but {name} is a barrier (T.alloc_barrier): barriers are set up by "
                    "the compiler and used only with T.barrier_arrive / T.barrier_wait and TMA copies")
    if isinstance(value, ir.Buffer):
        return ir.Region.full(value)
    if isinstance(value, ir.Region):
        return value
    if isinstance(value, ir.BufferLoad):
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
            if ir.const_int(_static_or_expr(x - y)) != 0:
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
    return ir.Region(p.buffer, tuple(p.indices), tuple(ir.as_expr(e) for e in ext))


def _fmt(extents) -> str:
    return "x".join(str(ir.const_int(e)) if ir.const_int(e) is not None else str(e) for e in extents)


def as_barrier(value, what: str = "barrier") -> ir.BarrierRef:
    if isinstance(value, ir.BarrierRef):
        return value
    if isinstance(value, ir.Buffer) and value.scope == "barrier":
        return ir.BarrierRef(value, ir.const(0))
    raise error(f"{what} must be a barrier from T.alloc_barrier (or one slot of one), not {describe(value)}")
