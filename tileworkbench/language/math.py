"""Scalar helpers and math: ``T.ceildiv``, casts, ``T.if_then_else``, ``T.exp`` and friends,
``T.max``/``T.min``, infinities and the extremes of a dtype."""

from __future__ import annotations

import builtins as _builtins

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..errors import CompileError
from ..frontend.builder import error
from ..ir import nodes as ir
from .types import _dtype

def ceildiv(a, b):
    x, y = _b.integer(a, "T.ceildiv: the dividend"), _b.integer(b, "T.ceildiv: the divisor")
    if ir.const_int(y) is not None and ir.const_int(y) <= 0:
        raise error(f"T.ceildiv: the divisor must be positive, got {ir.const_int(y)}")
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (x + b - 1) // b


def cast(value, dtype):
    return ir.cast(_b.number(value, "T.cast: the value"), _dtype(dtype, "T.cast"))


def Cast(dtype, value):  # noqa: N802 - TileLang's spelling, dtype first
    return ir.cast(_b.number(value, "T.Cast: the value"), _dtype(dtype, "T.Cast"))


def floordiv(a, b):
    """``a // b`` rounded towards minus infinity (Python's ``//``)."""
    return ir.binop("//", _b.number(a, "T.floordiv: the dividend"), _b.number(b, "T.floordiv: the divisor"))


def floormod(a, b):
    """``a % b`` with the sign of ``b`` (Python's ``%``)."""
    return ir.binop("%", _b.number(a, "T.floormod: the dividend"), _b.number(b, "T.floormod: the divisor"))


def clamp(x, lo, hi):
    """``x`` limited to ``[lo, hi]``: ``T.min(T.max(x, lo), hi)``."""
    return min(max(x, lo), hi)


def if_then_else(cond, a, b):
    return _b.select(cond, a, b)


def tvm_warp_shuffle(mask, value, lane, width, warp_size=32):
    """``value`` as lane ``lane`` (taken modulo ``width``) of the calling thread's group of
    ``width`` lanes holds it: CUDA's ``__shfl_sync(mask, value, lane, width)``. Every thread the
    mask names must make the same call (TileLang's spelling, from TVM)."""
    value = _b.number(value, "T.tvm_warp_shuffle: the value")
    width_n = _b.constant_int(width, "T.tvm_warp_shuffle: width", low=1, high=32)
    if width_n & (width_n - 1):
        raise error(f"T.tvm_warp_shuffle: width must be a power of 2 up to 32, got {width_n}")
    _b.constant_int(warp_size, "T.tvm_warp_shuffle: warp_size", low=1, high=32)  # TVM's; width is what CUDA takes
    mask = ir.cast(_b.integer(mask, "T.tvm_warp_shuffle: mask"), _dt.uint32)
    lane = _b.integer(lane, "T.tvm_warp_shuffle: lane")
    return ir.Call("__shfl_sync", (mask, value, lane, ir.const(width_n)), value.dtype)


def reinterpret(value, dtype):
    """``value``'s bits as ``dtype``, of the same width (``T.reinterpret(x, T.uint32)`` of a float32;
    TileLang's older ``T.reinterpret(dtype, value)`` order is taken too)."""
    if _is_dtype(value) and not _is_dtype(dtype):
        value, dtype = dtype, value
    target = _dt.as_dtype(dtype) if _is_dtype(dtype) else None
    if target is None:
        raise error(f"T.reinterpret: the type to reinterpret as must be a dtype such as T.uint32, "
                    f"got {_b.describe(dtype)}")
    if target.name in ("handle", "bool") or target.name.startswith("float4"):
        raise error(f"T.reinterpret as {target.name} is not supported by tileworkbench (a value of "
                    f"8 to 64 bits, reinterpreted as a number type of the same width)")
    value = _b.number(value, "T.reinterpret: the value")
    if value.dtype.bits != target.bits:
        raise error(f"T.reinterpret keeps the width: {value.dtype.name} is {value.dtype.bits} bits, "
                    f"{target.name} {target.bits}; cast first (T.Cast) to change it")
    return ir.Call(ir.REINTERPRET, (value,), target)


def _is_dtype(x) -> bool:
    if isinstance(x, _dt.DType):
        return True
    if isinstance(x, str):
        try:
            _dt.as_dtype(x)
            return True
        except CompileError:
            return False
    return False


def _math(name, float_only=True):
    def fn(x):
        x = _b.number(x, f"T.{name}: the argument")
        dtype = x.dtype if x.dtype.is_float else _dt.float32
        return ir.Call(name, (ir.cast(x, dtype) if float_only else x,), dtype)

    fn.__name__ = name
    return fn


exp = _math("exp")
exp2 = _math("exp2")
log = _math("log")
log2 = _math("log2")
sqrt = _math("sqrt")
rsqrt = _math("rsqrt")
tanh = _math("tanh")
sin = _math("sin")
cos = _math("cos")
sigmoid = _math("sigmoid")
floor = _math("floor")
ceil = _math("ceil")


def abs(x):  # noqa: A001
    x = _b.number(x, "T.abs: the argument")
    return ir.Call("abs", (x,), x.dtype)


def max(a, b):  # noqa: A001
    return ir.binop("max", _b.number(a, "T.max: the first argument"), _b.number(b, "T.max: the second argument"))


def min(a, b):  # noqa: A001
    return ir.binop("min", _b.number(a, "T.min: the first argument"), _b.number(b, "T.min: the second argument"))


def infinity(dtype):
    return ir.Const(_builtin_float("inf"), _dtype(dtype, "T.infinity"))


def max_value(dtype):
    d = _dtype(dtype, "T.max_value")
    if d.is_float:
        return ir.Const({"float16": 65504.0, "bfloat16": 3.3895313892515355e38}.get(d.name, 3.4028234663852886e38), d)
    return ir.Const(2 ** (d.bits - 1) - 1 if d.kind == "int" else 2**d.bits - 1, d)


def min_value(dtype):
    d = _dtype(dtype, "T.min_value")
    if d.is_float:
        return ir.Const(-max_value(d).value, d)
    return ir.Const(-(2 ** (d.bits - 1)) if d.kind == "int" else 0, d)


_builtin_float = _builtins.float
