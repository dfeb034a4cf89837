"""Which integer arithmetic needs 64 bits. An integer ``+ - * // % <<`` whose value (by interval
analysis over the ranges known where it is computed) may leave the int32 range is computed in
64 bits; where its range is unknown (a kernel parameter in it, say) it is 64-bit only inside the
element offset of a tensor with 2^31 elements or more (:func:`wide_tensor`). Provably small
arithmetic stays ``int``: every kernel whose tensors hold fewer than 2^31 elements, in practice."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.simplify import interval
from ...ir.visitor import IRMutator

INT32 = (-(2**31), 2**31 - 1)
WIDENED_OPS = ("+", "-", "*", "//", "%", "<<")


def wide_tensor(buf: ir.Buffer) -> bool:
    """A global tensor whose element offsets may not fit an ``int`` (its largest offset is 2^31 or
    more, or not known when the kernel is compiled)."""
    shape, strides = buf.static_shape(), [ir.const_int(s) for s in buf.effective_strides()]
    if shape is None or None in strides:
        return True
    return sum((d - 1) * s for d, s in zip(shape, strides)) > INT32[1]


def is_64_bit(e, ranges: dict, unknown_is_wide: bool) -> bool:
    """``e`` is computed in 64 bits: a 64-bit value, or arithmetic whose value may leave int32."""
    if e.dtype.bits == 64 and not e.dtype.is_float:
        return True
    if not isinstance(e, ir.BinOp) or e.op not in WIDENED_OPS or e.dtype.is_float:
        return False
    lo, hi = interval(e, ranges)
    if lo is None or hi is None:
        return unknown_is_wide
    return lo < INT32[0] or hi > INT32[1]


class _Widen(IRMutator):
    def __init__(self, ranges: dict, unknown_is_wide: bool):
        self.ranges, self.unknown_is_wide = ranges, unknown_is_wide

    def visit_BinOp(self, e: ir.BinOp):
        wide = is_64_bit(e, self.ranges, self.unknown_is_wide)  # decided on e as it is
        node = self.generic_visit(e)
        if wide and e.dtype.bits < 64:
            return ir.BinOp(node.op, node.a, node.b, ir.dtypes.int64)
        return node


def widened(e, ranges: dict, unknown_is_wide: bool):
    """``e`` with every arithmetic sub-expression that :func:`is_64_bit` says needs 64 bits typed
    ``int64`` (each decided on the expression as it was, before its operands were retyped)."""
    return _Widen(ranges, unknown_is_wide).visit(e)
