"""Expressions of the tile-level IR as numpy values.

A value is a Python number or a numpy array. Inside a ``T.Parallel`` nest the loop variables are
arrays over the nest's iterations (``lanes``), so one evaluation computes every iteration; in
code the threads run one by one (the thread index, ``if tx < 288``) the thread index is an array
over the threads running it. Arithmetic is the generated CUDA's: 16-bit and FP8 floats are
computed in float32 (a load converts, a store rounds), integers in 64 bits and wrapped to their
type where stored, ``//`` and ``%`` of integers floor (the IR's meaning), ``/`` of integers is a
float32 quotient.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from ..ir.math_calls import CALLS as MATH_CALLS
from .warp_votes import vote


def _exp2_poly(x):
    """``tw::exp2_poly`` (tw/common.h) in float32, step for step (its fused multiply-adds rounded
    twice here: within a few float32 ulps of the GPU's), the code emulate_exp2 writes."""
    x = np.maximum(np.asarray(x, np.float32), np.float32(-126.0))
    magic = np.float32(12582912.0)
    t = (x + magic).astype(np.float32)
    f = (x - (t - magic)).astype(np.float32)
    p = np.float32(0.999928891658783) + f * (np.float32(0.6932762861251831) + f * (
        np.float32(0.24260465800762177) + f * np.float32(0.05508876591920853)))
    n = t.view(np.int32) - np.int32(0x4B400000)
    return (p.astype(np.float32).view(np.int32) + (n << 23)).view(np.float32)


_MATH = {"exp": np.exp, "exp2": np.exp2, "tw::exp2_poly": _exp2_poly, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
         "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
         "floor": np.floor, "ceil": np.ceil, "abs": np.abs, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x))}
_BIN = {"+": np.add, "-": np.subtract, "*": np.multiply, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal,
        "and": np.logical_and, "or": np.logical_or, "&": np.bitwise_and, "|": np.bitwise_or,
        "^": np.bitwise_xor, "<<": np.left_shift, ">>": np.right_shift, "min": np.minimum, "max": np.maximum}


def storage_dtype(dtype) -> np.dtype:
    """The numpy type an array of ``dtype`` is held in (ml_dtypes for bfloat16, FP8 and FP4; an
    FP4 array holds one value an element, packed or not: ``pack_fp4`` and ``unpack_fp4`` convert
    at the call's edge)."""
    if dtype.name == "bfloat16" or dtype.name.startswith(("float8", "float4")):
        import ml_dtypes

        return np.dtype({"bfloat16": ml_dtypes.bfloat16, "float8_e4m3": ml_dtypes.float8_e4m3fn,
                         "float8_e5m2": ml_dtypes.float8_e5m2, "float4_e2m1fn": ml_dtypes.float4_e2m1fn,
                         "float4_e2m1_unpacked": ml_dtypes.float4_e2m1fn}[dtype.name])
    return _dt.numpy_dtype(dtype)


def unpack_fp4(raw: np.ndarray) -> np.ndarray:
    """Packed FP4 bytes (two values a byte, the first in the low nibble, as the GPU holds them)
    as one ml_dtypes value an element: the last dimension doubles."""
    b = raw.view(np.uint8)
    nibbles = np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], b.shape[-1] * 2)
    return nibbles.astype(np.uint8).view(storage_dtype(_dt.float4_e2m1fn))


def pack_fp4(values: np.ndarray) -> np.ndarray:
    """The inverse of :func:`unpack_fp4`: uint8, the last dimension halved."""
    nibbles = values.view(np.uint8) & 0xF
    return (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)


def unpack_int4(byte_values: np.ndarray) -> np.ndarray:
    """The signed 4-bit values of ``int4x2`` bytes (two a byte, the even one in the low nibble:
    passes/store_int4_as_bytes.py), as int64: the last dimension doubles."""
    b = np.asarray(byte_values).astype(np.int64)
    low = ((b & 0xF) ^ 8) - 8  # the low nibble, sign-extended
    return np.stack([low, b >> 4], axis=-1).reshape(*b.shape[:-1], b.shape[-1] * 2)


def compute_dtype(dtype) -> np.dtype:
    if dtype.computed_in_float32 or dtype.name == "float32":  # held as float32, as generated code holds them
        return np.dtype(np.float32)
    if dtype.name == "float64":
        return np.dtype(np.float64)
    if dtype.name == "bool":
        return np.dtype(bool)
    return np.dtype(np.int64)


def loaded(array: np.ndarray, dtype) -> np.ndarray:
    """Elements of a buffer as generated code computes with them."""
    return array.astype(compute_dtype(dtype), copy=False)


def stored(value, dtype):
    """A computed value rounded (floats; FP8 and FP4 saturating, as ``cvt.rn.satfinite``) or wrapped
    (integers) to ``dtype``; a float becomes an integer as ``tw::to_integer`` makes it (``to_integer``)."""
    target = storage_dtype(dtype)
    v = np.asarray(value)
    if dtype.name.startswith(("float8", "float4")):
        _, limit = _dt.value_range(dtype)
        v = np.clip(v.astype(np.float32), -limit, limit)
    elif not dtype.is_float and v.dtype.kind == "f":
        v = to_integer(v, dtype)
    if target.kind in "iub" and v.dtype.kind in "iu":
        return v.astype(np.int64).astype(target)
    with np.errstate(over="ignore"):  # a float past a narrower float's range is infinite there, as on the GPU
        return v.astype(target)


def converted(values, dtype):
    """Tile values written into a buffer of ``dtype`` as the generated code's store converts them: a
    float into a float type through that type's arithmetic (``(float)x`` before rounding to 16 bits),
    into an integer type by ``to_integer`` (not numpy's cast, which wraps or gives the lowest integer)."""
    values = np.asarray(values)
    if dtype.is_float or values.dtype.kind != "f":
        values = loaded(values, dtype)
    return stored(values, dtype)


def tf32_rounded(values) -> np.ndarray:
    """float32 values rounded to TF32 (10 mantissa bits) as ``cvt.rna.tf32.f32`` rounds them: to
    nearest, ties away from zero (adding half of the dropped part to the magnitude's bits carries
    into the exponent where it should); infinities and NaN as they are."""
    v = np.ascontiguousarray(values, np.float32)
    bits = v.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(v), rounded, v)


def tf32_truncated(values) -> np.ndarray:
    """float32 values as TF32 wgmma reads them from shared memory: the 13 low mantissa bits dropped
    (towards zero); infinities and NaN as they are."""
    v = np.ascontiguousarray(values, np.float32)
    truncated = (v.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(v), truncated, v)


def to_integer(v, dtype):
    """A float converted to the integer ``dtype`` as generated code converts it: towards zero,
    saturated to the type's range, NaN to 0 (``tw::to_integer`` in the generated code, where C's own
    conversion is undefined there; numpy's cast would give the lowest integer or wrap); to bool, any
    value but zero is true (NaN too), as in C."""
    v = np.asarray(v, np.float64)
    if dtype.name == "bool":
        return v != 0
    low, high = _dt.value_range(dtype)
    held = np.uint64 if dtype.kind == "uint" and dtype.bits == 64 else np.int64
    # 2**63 - 1 and 2**64 - 1 are not floats (they round up, past the type): the largest integer
    # stands for every value at or above the float nearest it
    top = v >= float(high)
    out = np.where(np.isnan(v) | top, 0.0, np.clip(np.trunc(v), float(low), float(high)))
    return np.where(top, held(high), out.astype(held))


def held(value, dtype):
    """The value a scalar variable of ``dtype`` holds once assigned: an integer narrower than 64 bits
    wrapped to it (C's ``int x = ...; x = x * 2`` keeps 32 bits), anything else as computed."""
    if dtype.is_float or dtype.name == "bool" or dtype.bits >= 64:
        return value
    wrapped = stored(value, dtype).astype(np.int64)
    return wrapped if np.ndim(value) else wrapped.item()


class Unsupported(KernelRuntimeError):
    """What the interpreter does not run (yet): named, at the kernel line."""


def evaluate(e, env):
    """The value of expression ``e`` (``env``: the interpreter's frame, with ``vars``, ``load``)."""
    if isinstance(e, ir.Const):
        if e.dtype.name == "uint64" and e.value >= 2**63:
            return e.value - 2**64  # held as int64, as every integer is here (``_unsigned_64``)
        return e.value
    if isinstance(e, ir.Var):
        try:
            return env.vars[e]
        except KeyError:
            raise KernelRuntimeError(f"internal: {e.name} has no value in the interpreter") from None
    if isinstance(e, ir.BinOp):
        if e.op in ("and", "or"):  # C's && and ||: the right side only where the left leaves it open
            a = evaluate(e.a, env)
            open_ = np.logical_not(a) if e.op == "or" else np.asarray(a, bool)
            return _binop(e, a, lanes_where(env, open_, e.b, np.bool_))
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if e.op in ("//", "%", "truncdiv", "truncmod") and not e.dtype.is_float:
            _check_divisor(b, getattr(env, "mask", None))
        return _binop(e, a, b)
    if isinstance(e, ir.BufferLoad):
        return env.load(e.buffer, [evaluate(i, env) for i in e.indices])
    if isinstance(e, ir.Cast):
        v = evaluate(e.value, env)
        if e.dtype.computed_in_float32:  # rounded to the type, computed as float32
            return loaded(stored(v, e.dtype), e.dtype)
        if not e.dtype.is_float and np.asarray(v).dtype.kind == "f":
            v = to_integer(v, e.dtype)  # saturated, NaN to 0, as tw::to_integer (numpy's cast would wrap)
            v = v if np.ndim(v) else v.item()
        if not e.dtype.is_float and e.dtype.name != "bool" and storage_dtype(e.dtype).itemsize < 8:
            wrapped = stored(v, e.dtype)  # C's (unsigned char)x keeps x's low 8 bits: wrapped as a store wraps
            v = wrapped if isinstance(v, np.ndarray) else wrapped.item()
        return np.asarray(v).astype(compute_dtype(e.dtype)) if isinstance(v, np.ndarray) else \
            compute_dtype(e.dtype).type(v)
    if isinstance(e, ir.Select):  # C's ?:, each lane evaluating the side it takes
        c = evaluate(e.cond, env)
        if not isinstance(c, np.ndarray):
            return evaluate(e.a if c else e.b, env)
        c = c.astype(bool)
        held = compute_dtype(e.dtype)
        return np.where(c, lanes_where(env, c, e.a, held), lanes_where(env, ~c, e.b, held))
    if isinstance(e, ir.Not):
        return np.logical_not(evaluate(e.a, env))
    if isinstance(e, ir.Call):
        return _call(e, env)
    if isinstance(e, ir.Raw) and e.text in env.hw:  # the hardware block index and count
        return env.hw[e.text]
    raise Unsupported(f"the CPU interpreter does not evaluate {type(e).__name__} {getattr(e, 'text', '')}")


def lanes_where(env, lanes: np.ndarray, e, dtype):
    """``e`` evaluated for the ``lanes`` (of a ``T.Parallel`` nest's iterations, or of the running
    threads) where it is taken: the others neither read memory nor divide (their values, which the
    caller drops, are whatever reading a valid element gives)."""
    if not lanes.any():
        return np.zeros((), dtype)
    if lanes.all() or not hasattr(env, "mask"):
        return evaluate(e, env)
    saved = env.mask
    if saved is not None and np.shape(saved) != lanes.shape:
        return evaluate(e, env)  # lanes of another kind than the if's around: every lane reads
    env.mask = lanes if saved is None else saved & lanes
    try:
        return evaluate(e, env)
    finally:
        env.mask = saved


def _check_divisor(b, mask):
    b = np.asarray(b)
    if mask is not None and b.ndim and b.shape == np.shape(mask):
        b = b[mask]
    if np.any(b == 0):
        raise KernelRuntimeError("integer division by zero in the kernel")


def _binop(e: ir.BinOp, a, b):
    op = e.op
    if op in _ORDERED and "uint64" in (e.a.dtype.name, e.b.dtype.name):
        return _unsigned_64(e, a, b)
    if op in ("//", "%"):
        if e.dtype.is_float:
            q = np.floor(np.divide(a, b))
            return q if op == "//" else np.subtract(a, np.multiply(q, b))
        with np.errstate(divide="ignore"):  # a lane that divides by zero is one a condition left out
            return np.floor_divide(a, np.where(np.asarray(b) == 0, 1, b)) if op == "//" else \
                np.mod(a, np.where(np.asarray(b) == 0, 1, b))
    if op == "/":
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):  # x / 0 is +-inf or NaN, as on the GPU
            if not (e.a.dtype.is_float or e.b.dtype.is_float):
                return np.float32(a) / np.float32(b) if np.isscalar(a) and np.isscalar(b) else \
                    np.divide(np.asarray(a, np.float32), np.asarray(b, np.float32))
            return np.divide(a, b)
    if op in ("truncdiv", "truncmod"):
        q = np.trunc(np.divide(a, b)).astype(np.int64)
        return q if op == "truncdiv" else np.subtract(a, np.multiply(q, b))
    fn = _BIN.get(op)
    if fn is None:
        raise Unsupported(f"the CPU interpreter does not evaluate the operator {op!r}")
    if not e.dtype.is_float:
        return fn(a, b)
    # IEEE arithmetic as the GPU does it: a result past the type's range is infinity and inf - inf
    # is NaN, without numpy's warnings about either
    with np.errstate(over="ignore", invalid="ignore"):
        out = fn(a, b)
        if e.dtype.name != "float64" and isinstance(out, (np.ndarray, np.floating)):
            out = np.asarray(out, np.float32) if isinstance(out, np.ndarray) else np.float32(out)
    return out


# Operators whose result depends on reading the bits as unsigned (int64 gives the same bits as
# uint64 for +, -, *, bit operations and <<, but not for these).
_ORDERED = ("<", "<=", ">", ">=", "min", "max", "//", "%", "truncdiv", "truncmod", ">>", "/")


def _unsigned_64(e: ir.BinOp, a, b):
    """A uint64 operation on values held as int64 (every integer is, ``compute_dtype``): computed on
    the bits read as uint64, the result held as int64 again (or a bool, a float for ``/``)."""
    ua, ub = (np.asarray(x).astype(np.int64).view(np.uint64) for x in (a, b))
    if op_is_division(e.op) and np.any(ub == 0):
        ub = np.where(ub == 0, np.uint64(1), ub)  # lanes a condition leaves out (``_check_divisor``)
    fn = {"//": np.floor_divide, "truncdiv": np.floor_divide, "%": np.mod, "truncmod": np.mod,
          "/": lambda x, y: np.divide(x.astype(np.float32), y.astype(np.float32))}.get(e.op) or _BIN[e.op]
    out = fn(ua, ub)
    return out.view(np.int64) if out.dtype == np.uint64 else out


def op_is_division(op: str) -> bool:
    return op in ("//", "%", "truncdiv", "truncmod")


def _call(e: ir.Call, env):
    name = e.name
    hook = getattr(env, "call_hook", None)  # calls an interpreter evaluates itself (the thread level's shuffles)
    if hook is not None:
        out = hook(e)
        if out is not NotImplemented:
            return out
    if name in MATH_CALLS:
        return _library(e, [evaluate(a, env) for a in e.args])
    if name in _MATH:
        x = evaluate(e.args[0], env)
        dt = np.float64 if e.dtype.name == "float64" else (np.float32 if e.dtype.is_float else None)
        with np.errstate(all="ignore"):  # NaN and infinities are values here, as on the GPU
            out = _MATH[name](np.asarray(x, dt) if dt is not None else x)
        return out
    if name == ir.REINTERPRET:
        value = e.args[0]
        v = np.asarray(stored(evaluate(value, env), value.dtype))
        return loaded(v.view(storage_dtype(e.dtype)), e.dtype)
    if name == ir.SHFL_SYNC:  # lane ``lane % width`` of the calling thread's group of ``width``
        _, value, lane, width = (evaluate(x, env) for x in e.args)
        threads = env.active
        if env.in_parallel or np.ndim(value) > 1:
            raise Unsupported("the CPU interpreter runs warp shuffles in code each thread runs, not in T.Parallel")
        value = np.broadcast_to(value, threads.shape)
        source = threads // int(width) * int(width) + np.asarray(lane) % int(width)
        at = np.searchsorted(threads, source)
        if (at >= threads.size).any() or (threads[np.minimum(at, threads.size - 1)] != source).any():
            raise KernelRuntimeError("a warp shuffle reads a lane whose thread does not run the shuffle")
        return value[at]
    if (group := ir.elected_group(name)) is not None:  # T.shuffle_elect(N): lane 0 of each group's first warp
        return env.active % group == 0
    if name in ir.VOTES or name == ir.SYNCWARP:  # over the lanes of each warp of the running threads
        if env.in_parallel:
            raise Unsupported(f"the CPU interpreter runs warp votes in code each thread runs, not in T.Parallel ({name})")
        where = f" at line {env.line}" if getattr(env, "line", None) else ""
        return vote(name, env.active, [evaluate(a, env) for a in e.args], env.func.launch.total_threads, where)
    raise Unsupported(f"the CPU interpreter does not evaluate the call {name}")


def _round_half_away(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _clz(x, bits):
    x = np.asarray(x).astype(np.int64).view(np.uint64) & np.uint64(2**bits - 1)
    lengths = np.frompyfunc(lambda v: int(v).bit_length(), 1, 1)(x).astype(np.int64)
    return bits - lengths


# ``ir.math_calls``' functions: numpy's, on float32 (float64) values, as CUDA's on the GPU (within
# their documented error in the last place); erf through Python's math.erf
_LIBRARY = {
    "erf": np.frompyfunc(math.erf, 1, 1), "log1p": np.log1p, "log10": np.log10, "exp10": lambda x: np.power(10.0, x),
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "round": _round_half_away, "trunc": np.trunc,
    "nearbyint": np.rint, "fabs": np.abs, "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "nextafter": np.nextafter, "fma": lambda a, b, c: a.astype(np.float64) * b + c,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "__exp": np.exp, "__exp10": lambda x: np.power(10.0, x), "__log": np.log, "__log2": np.log2,
    "__log10": np.log10, "__sin": np.sin, "__cos": np.cos, "__tan": np.tan,
}


def _library(e: ir.Call, args):
    kind = MATH_CALLS[e.name].kind
    if kind == "int":
        bits = e.args[0].dtype.bits
        x = np.asarray(args[0]).astype(np.int64).view(np.uint64) & np.uint64(2**bits - 1 if bits < 64 else 2**64 - 1)
        out = np.bitwise_count(x).astype(np.int64) if e.name == "popcount" else _clz(x, bits)
        return out if np.ndim(args[0]) else out.item()
    held = np.float64 if e.args[0].dtype.name == "float64" else np.float32
    with np.errstate(all="ignore"):  # NaN and infinities are values here, as on the GPU
        out = np.asarray(_LIBRARY[e.name](*[np.asarray(a, held) for a in args]))
    if kind == "test":
        return out.astype(bool)
    return out.astype(held)


def print_lines(call: ir.Call, env, running=None) -> list[str]:
    """The lines a ``T.print`` call prints, one per running thread (or ``T.Parallel`` lane), in
    the generated code's format: ``label[i, j] = value (block (x, y) thread t)``. ``running``
    picks the running threads' values out of a value of every thread (the thread level's)."""
    label, where, value, indices = ir.print_parts(call)
    parts = [np.asarray(evaluate(x, env)) for x in (*where, *((value,) if value is not None else ()), *indices)]
    parts = np.broadcast_arrays(*parts)
    if running is not None:
        parts = [running(p) for p in parts]
    lines = []
    for k in np.ndindex(parts[0].shape):
        got = [p[k].item() for p in parts]
        place, rest = got[:len(where)], got[len(where):]
        text = label
        if indices:
            text += "[" + ", ".join(str(int(i)) for i in rest[-len(indices):]) + "]"
        if value is not None:
            v = rest[0]
            text += f" = {float(v):g}" if value.dtype.is_float else f" = {int(v)}"
        lines.append(f"{text} (block ({', '.join(str(int(b)) for b in place[:-1])}) thread {int(place[-1])})")
    return lines


def uniform(value):
    """A value every running thread has alike as one scalar (a thread-local variable each thread
    set the same); other values as they are."""
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.size and (value == value[0]).all():
        return value[0]
    return value
