"""``T.atomic_add``: one element of global or shared memory incremented by many threads (split-K
partial sums into one output, per-row counters) without a lost update."""

from __future__ import annotations

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.regions import as_region
from ..ir import nodes as ir

# CUDA's atomicAdd has these natively; 16-bit floats would need packed-pair PTX we do not emit.
ATOMIC_ADD_DTYPES = ("float32", "float64", "int32", "uint32", "uint64")


def atomic_add(dst, value, memory_order=None, return_prev=False, **unsupported):
    if unsupported:
        raise error(f"T.atomic_add: unsupported keyword(s) {', '.join(unsupported)}")
    if memory_order not in (None, "relaxed") or return_prev:
        raise error("T.atomic_add: only the relaxed add that returns nothing is supported "
                    "(memory_order and return_prev are not)")
    target = as_region(dst, "T.atomic_add destination")
    if not isinstance(target, _b.Point):
        raise error("T.atomic_add adds to one element (dst[i, j]); to add a tile, loop over it with T.Parallel "
                    "and add element by element")
    buf = target.buffer
    if buf.scope not in ("global", "shared"):
        raise error(f"T.atomic_add adds to global or shared memory; {buf.name} is a {buf.scope} buffer, "
                    "which only one thread holds: add to it with +=")
    if buf.dtype.name not in ATOMIC_ADD_DTYPES:
        raise error(f"T.atomic_add on {buf.dtype.name} ({buf.name}) is not supported; it adds to "
                    f"{', '.join(ATOMIC_ADD_DTYPES)} (accumulate in float32)")
    amount = ir.cast(_b.stored_value(value, buf, "T.atomic_add: the value"), buf.dtype)
    where = ir.Call("address_of", (ir.BufferLoad(buf, tuple(target.indices), buf.dtype),), ir.dtypes.handle)
    _b.current().emit(ir.Evaluate(ir.Call("atomicAdd", (where, amount), buf.dtype)))
