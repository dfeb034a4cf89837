"""``T.atomic_add``, ``T.atomic_max``, ``T.atomic_min``: one element of global or shared memory
updated by many threads (split-K partial sums into one output, per-row counters, a tensor's
largest magnitude for FP8 scaling) without a lost update.

Floats have no native max/min atomic; ``tw::atomic_max``/``atomic_min`` (tw/common.h) use an
integer one on the bits: for ``v >= 0`` a signed max (non-negative floats order as their bits as
signed ints, and any negative value stored is below every non-negative one there too); for
``v < 0`` an unsigned min (negative floats order in reverse as unsigned ints, and any
non-negative value stored is below ``0x80000000``, so it stays). Min is the mirror image. NaN
is not ordered by either."""

from __future__ import annotations

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.regions import as_region
from ..ir import nodes as ir

# CUDA's atomicAdd has these natively; 16-bit floats would need packed-pair PTX we do not emit.
ATOMIC_ADD_DTYPES = ("float32", "float64", "int32", "uint32", "uint64")
# atomicMax/atomicMin natively for the integers; float32 through tw::atomic_max/min.
ATOMIC_MAX_DTYPES = ("float32", "int32", "uint32", "int64", "uint64")
ATOMIC_CALLS = {"add": ir.ATOMIC_ADD, "max": "atomicMax", "min": "atomicMin"}  # ir.ATOMIC_UPDATES


def atomic_add(dst, value, memory_order=None, return_prev=False, **unsupported):
    _atomic("add", "adds to", ATOMIC_ADD_DTYPES, dst, value, memory_order, return_prev, unsupported)


def atomic_max(dst, value, memory_order=None, return_prev=False, **unsupported):
    _atomic("max", "keeps the largest in", ATOMIC_MAX_DTYPES, dst, value, memory_order, return_prev, unsupported)


def atomic_min(dst, value, memory_order=None, return_prev=False, **unsupported):
    _atomic("min", "keeps the smallest in", ATOMIC_MAX_DTYPES, dst, value, memory_order, return_prev, unsupported)


def _atomic(op, verb, dtypes, dst, value, memory_order, return_prev, unsupported):
    name = f"T.atomic_{op}"
    if unsupported:
        raise error(f"{name}: unsupported keyword(s) {', '.join(unsupported)}")
    if memory_order not in (None, "relaxed") or return_prev:
        raise error(f"{name}: only the relaxed update that returns nothing is supported "
                    "(memory_order and return_prev are not)")
    target = as_region(dst, f"{name} destination")
    if not isinstance(target, _b.Point):
        raise error(f"{name} {verb} one element (dst[i, j]); for a tile, loop over it with T.Parallel "
                    "element by element")
    buf = target.buffer
    if buf.scope not in ("global", "shared"):
        raise error(f"{name} {verb} global or shared memory; {buf.name} is a {buf.scope} buffer, "
                    "which only one thread holds: update it directly")
    if buf.dtype.name not in dtypes:
        raise error(f"{name} on {buf.dtype.name} ({buf.name}) is not supported; it takes {', '.join(dtypes)}")
    amount = ir.cast(_b.stored_value(value, buf, f"{name}: the value"), buf.dtype)
    where = ir.Call("address_of", (ir.BufferLoad(buf, tuple(target.indices), buf.dtype),), ir.dtypes.handle)
    call = ATOMIC_CALLS[op]
    if op != "add" and buf.dtype.is_float:
        call = f"tw::atomic_{op}"  # no native float atomic of these
    _b.current().emit(ir.Evaluate(ir.Call(call, (where, amount), buf.dtype)))
