"""What statements of the lowered IR touch in shared memory, for the protocol checker: the
expressions a statement holds, whether it reads or writes shared tiles, and :class:`Footprints`,
the per-thread element ranges ``[lo, hi]`` of an access (row-major, or in storage order for a tile
stored as 128-byte panels), evaluated over the simulation's environment."""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from ..ir.layout import shared_element_offset
from . import program
from .evaluate import Unknown, evaluate

WHOLE = np.iinfo(np.int64).max // 4  # "up to the end" for buffers of unknown size


def subexprs(expr, into_addresses=True):
    """``expr`` and everything below it (not below ``address_of`` unless ``into_addresses``)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, ir.Call):
            if into_addresses or e.name != "address_of":
                stack.extend(a for a in e.args if isinstance(a, (ir.Expr, ir.BarrierRef)))
        elif isinstance(e, ir.BinOp):
            stack += [e.a, e.b]
        elif isinstance(e, ir.Not):
            stack.append(e.a)
        elif isinstance(e, ir.Cast):
            stack.append(e.value)
        elif isinstance(e, ir.Select):
            stack += [e.cond, e.a, e.b]
        elif isinstance(e, ir.BufferLoad):
            stack.extend(e.indices)
        elif isinstance(e, ir.BarrierRef):
            stack.append(e.index)


def own_exprs(stmt) -> list:
    """The expressions a statement holds itself (not those of nested statements)."""
    if isinstance(stmt, ir.BufferStore):
        return [*stmt.indices, stmt.value]
    if isinstance(stmt, ir.Evaluate):
        return [stmt.call]
    if isinstance(stmt, (ir.IfThenElse, ir.While)):
        return [stmt.cond]
    if isinstance(stmt, ir.For):
        return [stmt.start, stmt.extent]
    if isinstance(stmt, (ir.LetStmt, ir.Assign)):
        return [stmt.value]
    return []


def is_shared(buf) -> bool:
    return isinstance(buf, ir.Buffer) and buf.scope == "shared"


def touches_shared(stmt) -> bool:
    if isinstance(stmt, ir.BufferStore) and is_shared(stmt.buffer):
        return True
    return any(isinstance(e, ir.BufferLoad) and is_shared(e.buffer)
               for x in own_exprs(stmt) for e in subexprs(x))


def call_of(stmt):
    return stmt.call if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call) else None


def has_async_memory(func: ir.PrimFunc) -> bool:
    """Barriers or TMA stores: without them there is nothing for the checker to follow."""
    for s in program.preorder(func.body):
        if isinstance(s, ir.Allocate) and s.buffer.scope == "barrier":
            return True
        call = call_of(s)
        if call is not None and call.name.startswith("tw::tma_"):
            return True
    return False


class Footprints:
    """Element ranges of accesses; needs ``env`` and ``threads`` (the checker's)."""

    def value(self, expr):
        try:
            return evaluate(expr, self.env)
        except (Unknown, ArithmeticError, TypeError, ValueError):
            return None

    def span(self, buf: ir.Buffer, indices, n: int | None = 1):
        """Per-thread [lo, hi] of the row-major elements of ``buf`` from ``buf[indices]`` on:
        ``n`` elements, or to the end of the pipeline version when ``n`` is None. An index that
        cannot be evaluated covers its whole dimension."""
        shape = buf.static_shape()
        zero = np.zeros(self.threads, dtype=np.int64)
        if shape is None or len(shape) != len(indices):
            return zero, zero + WHOLE
        if buf.attrs.get("panel", 0) and len(shape) in (2, 3):
            return self.paneled_span(buf, shape, indices, n)
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        lo, hi = zero.copy(), zero.copy()
        for idx, dim, stride in zip(indices, shape, reversed(strides)):
            v = self.value(idx)
            if v is None:
                hi = hi + (dim - 1) * stride
            else:
                v = np.asarray(v).astype(np.int64)
                lo, hi = lo + v * stride, hi + v * stride
        if n is None:  # to the end of the version the access starts in
            per = acc // shape[0] if buf.attrs.get("versions", 1) > 1 else acc
            return lo, (hi // per + 1) * per - 1
        return lo, hi + max(n, 1) - 1

    def paneled_span(self, buf: ir.Buffer, shape, indices, n: int | None):
        """``span`` for a tile stored as 128-byte panels, in storage order
        (``ir.layout.shared_element_offset``: a panel's rows one after another), where a copy of
        one panel is one range. An index that cannot be evaluated covers its whole version."""
        zero = np.zeros(self.threads, dtype=np.int64)
        rows, cols = shape[-2:]
        version = rows * cols
        whole = version * (shape[0] if len(shape) == 3 else 1)
        values = [None if v is None else zero + np.asarray(v).astype(np.int64)
                  for v in (self.value(i) for i in indices)]
        if len(shape) == 3 and values[0] is None:
            return zero, zero + whole - 1
        if values[-2] is None or values[-1] is None:
            base = values[0] * version if len(shape) == 3 else zero
            return base, base + version - 1
        lo = shared_element_offset(buf, values)
        if n is None:  # to the end of the version the access starts in
            per = version if buf.attrs.get("versions", 1) > 1 else whole
            return lo, (lo // per + 1) * per - 1
        return lo, lo + max(n, 1) - 1

    def elements(self, buf: ir.Buffer, nbytes) -> int | None:
        return None if not nbytes else nbytes * 8 // max(buf.dtype.bits, 1)
