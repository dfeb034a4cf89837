"""Scalar helpers and math: ``T.ceildiv``, casts, ``T.if_then_else``, ``T.exp`` and friends,
``T.max``/``T.min``, infinities and the extremes of a dtype."""

from __future__ import annotations

import builtins as _builtins

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..errors import CompileError
from ..frontend.builder import error
from ..ir import nodes as ir
from ..ir.math_calls import CALLS as _CALLS
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
    return ir.Call(ir.SHFL_SYNC, (mask, value, lane, ir.const(width_n)), value.dtype)


def _shuffle(cuda: str, what: str):
    def shuffle(value, delta, width=32, mask=0xFFFFFFFF):
        name = f"T.{what}"
        value = _b.number(value, f"{name}: the value")
        width_n = _b.constant_int(width, f"{name}: width", low=1, high=32)
        if width_n & (width_n - 1):
            raise error(f"{name}: width must be a power of 2 up to 32, got {width_n}")
        mask = ir.cast(_b.integer(mask, f"{name}: mask"), _dt.uint32)
        return ir.Call(cuda, (mask, value, _b.integer(delta, f"{name}: the lane or distance"), ir.const(width_n)),
                       value.dtype)

    shuffle.__name__ = what
    shuffle.__doc__ = (f"CUDA's ``{cuda}(mask, value, lane_or_delta, width)``: every thread the mask names, "
                       "in thread-level code (not inside T.Parallel), must make the same call.")
    return shuffle


shfl_sync = _shuffle(ir.SHFL_SYNC, "shfl_sync")  # the value lane ``src_lane`` of the group holds
shfl_xor = _shuffle(ir.SHFL_XOR_SYNC, "shfl_xor")  # the value lane ``lane ^ delta`` holds
shfl_down = _shuffle(ir.SHFL_DOWN_SYNC, "shfl_down")  # lane + delta's (its own past the group's end)
shfl_up = _shuffle(ir.SHFL_UP_SYNC, "shfl_up")  # lane - delta's (its own before the group's start)


def _warp_reduce(kind: str):
    def warp_reduce(value):
        """The ``kind`` of ``value`` over the 32 lanes of the calling warp, in every lane: five
        butterfly steps of ``__shfl_xor_sync`` (thread-level code; all 32 lanes must call it)."""
        name = f"T.warp_reduce_{kind}"
        value = _b.number(value, f"{name}: the value")
        if kind.startswith("bit") and not value.dtype.is_int:
            raise error(f"{name} combines integers bit by bit; the value is {value.dtype.name}")
        join = {"sum": lambda a, b: a + b, "max": lambda a, b: ir.binop("max", a, b),
                "min": lambda a, b: ir.binop("min", a, b), "bitand": lambda a, b: ir.binop("&", a, b),
                "bitor": lambda a, b: ir.binop("|", a, b)}[kind]
        total = ir.Var(f"warp_{kind}", value.dtype)
        body = _b.current()
        body.emit(ir.LetStmt(total, value))
        for distance in (16, 8, 4, 2, 1):
            other = ir.Call(ir.SHFL_XOR_SYNC, (ir.Raw("0xffffffffu"), total, ir.const(distance), ir.const(32)),
                            value.dtype)
            body.emit(ir.Assign(total, join(total, other)))
        return total

    warp_reduce.__name__ = f"warp_reduce_{kind}"
    return warp_reduce


warp_reduce_sum = _warp_reduce("sum")
warp_reduce_max = _warp_reduce("max")
warp_reduce_min = _warp_reduce("min")
warp_reduce_bitand = _warp_reduce("bitand")
warp_reduce_bitor = _warp_reduce("bitor")


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


# ---- the math library beyond the first few (``ir.math_calls``) ------------------------------------

def _library(call):
    def fn(*args):
        name = f"T.{call.name}"
        if len(args) != call.arity:
            raise error(f"{name} takes {call.arity} argument{'s' if call.arity > 1 else ''}, got {len(args)}")
        values = [_b.number(a, f"{name}: argument {i + 1}" if call.arity > 1 else f"{name}: the argument")
                  for i, a in enumerate(args)]
        if call.kind == "int":
            (x,) = values
            if not x.dtype.is_int or x.dtype.name == "bool":
                raise error(f"{name} counts the bits of an integer; the argument is {x.dtype.name}")
            if call.name == "clz" and x.dtype.bits not in (32, 64):
                raise error(f"{name} counts the leading zeros of a 32- or 64-bit integer; the argument is "
                            f"{x.dtype.name} (cast it first)")
            unsigned = _dt.as_dtype(f"uint{x.dtype.bits}")  # the bits as they are, not sign-extended
            return ir.Call(call.name, (ir.cast(x, unsigned),), _dt.int32)
        floats = {v.dtype.name for v in values if v.dtype.is_float}
        dtype = (_dt.float64 if "float64" in floats else _dt.as_dtype(floats.pop()) if len(floats) == 1
                 and all(v.dtype.is_float for v in values) else _dt.float32)
        result = _dt.boolean if call.kind == "test" else dtype
        return ir.Call(call.name, tuple(ir.cast(v, dtype) for v in values), result)

    fn.__name__ = call.name
    fn.__doc__ = f"CUDA's ``{call.c_float}`` ({call.arity} argument{'s' if call.arity > 1 else ''})."
    return fn


def _bitwise(name, op):
    def fn(a, b):
        return ir.binop(op, _b.integer(a, f"T.{name}: the first argument"), _b.integer(b, f"T.{name}: the second argument"))

    fn.__name__ = name
    return fn


bitwise_and = _bitwise("bitwise_and", "&")
bitwise_or = _bitwise("bitwise_or", "|")
bitwise_xor = _bitwise("bitwise_xor", "^")
shift_left = _bitwise("shift_left", "<<")
shift_right = _bitwise("shift_right", ">>")


def bitwise_not(x):
    x = _b.integer(x, "T.bitwise_not: the argument")
    return ir.binop("^", x, ir.cast(ir.const(-1), x.dtype))


def truncdiv(a, b):
    """``a / b`` rounded towards zero (C's integer division)."""
    return ir.binop("truncdiv", _b.integer(a, "T.truncdiv: the dividend"), _b.integer(b, "T.truncdiv: the divisor"))


def truncmod(a, b):
    """``a % b`` with the sign of ``a`` (C's ``%``)."""
    return ir.binop("truncmod", _b.integer(a, "T.truncmod: the dividend"), _b.integer(b, "T.truncmod: the divisor"))



erf = _library(_CALLS["erf"])
log1p = _library(_CALLS["log1p"])
log10 = _library(_CALLS["log10"])
exp10 = _library(_CALLS["exp10"])
tan = _library(_CALLS["tan"])
sinh = _library(_CALLS["sinh"])
cosh = _library(_CALLS["cosh"])
asin = _library(_CALLS["asin"])
acos = _library(_CALLS["acos"])
atan = _library(_CALLS["atan"])
asinh = _library(_CALLS["asinh"])
acosh = _library(_CALLS["acosh"])
atanh = _library(_CALLS["atanh"])
round = _library(_CALLS["round"])  # noqa: A001 - half away from zero, as C's roundf
trunc = _library(_CALLS["trunc"])
nearbyint = _library(_CALLS["nearbyint"])  # half to even
fabs = _library(_CALLS["fabs"])
pow = _library(_CALLS["pow"])  # noqa: A001
fmod = _library(_CALLS["fmod"])
atan2 = _library(_CALLS["atan2"])
hypot = _library(_CALLS["hypot"])
copysign = _library(_CALLS["copysign"])
nextafter = _library(_CALLS["nextafter"])
fma = _library(_CALLS["fma"])
isnan = _library(_CALLS["isnan"])
isinf = _library(_CALLS["isinf"])
isfinite = _library(_CALLS["isfinite"])
popcount = _library(_CALLS["popcount"])
clz = _library(_CALLS["clz"])
__exp = _library(_CALLS["__exp"])
__exp10 = _library(_CALLS["__exp10"])
__log = _library(_CALLS["__log"])
__log2 = _library(_CALLS["__log2"])
__log10 = _library(_CALLS["__log10"])
__sin = _library(_CALLS["__sin"])
__cos = _library(_CALLS["__cos"])
__tan = _library(_CALLS["__tan"])
