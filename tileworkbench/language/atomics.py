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
from ..frontend.regions import as_region, resolve_regions
from ..ir import nodes as ir
from ..ir.layout import strided_offset
from ..ir.simplify import is_multiple_of
from .global_layouts import element, element_loop, inside

# CUDA's atomicAdd has these natively; the 16-bit floats through red.add.noftz (tw/common.h).
ATOMIC_ADD_DTYPES = ("float32", "float64", "int32", "uint32", "uint64", "float16", "bfloat16")
# atomicMax/atomicMin natively for the integers; float32 through tw::atomic_max/min.
ATOMIC_MAX_DTYPES = ("float32", "int32", "uint32", "int64", "uint64")
ATOMIC_CALLS = {"add": ir.ATOMIC_ADD, "max": "atomicMax", "min": "atomicMin"}  # ir.ATOMIC_UPDATES


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, **unsupported):
    """``use_tma=True`` (TileLang's TMA reduction of a shared tile into global memory): a whole
    float32 shared tile added into a region of a kernel's tensor is one TMA reduction
    (``ir.Copy(reduce="add")``: ``cp.reduce.async.bulk``, issued by one thread, each element
    added atomically, what lies outside the tensor left alone); anything else takes the hint as a
    hint, the elements added by the threads' atomics (``tma_reducible`` says which). ``return_prev=True``
    on one element of shared memory returns the value it held before this thread's add (the
    top-k selector's ``pos = T.atomic_add(s_histogram[b], 1, return_prev=True)``: each thread
    gets a place of its own); threads' adds land in no set order, so which thread gets which old
    value is not fixed, only that together they see every step once."""
    return _atomic("add", "adds to", ATOMIC_ADD_DTYPES, dst, value, memory_order, return_prev, unsupported,
                   use_tma=bool(use_tma))


def atomic_max(dst, value, memory_order=None, return_prev=False, **unsupported):
    _atomic("max", "keeps the largest in", ATOMIC_MAX_DTYPES, dst, value, memory_order, return_prev, unsupported)


def atomic_min(dst, value, memory_order=None, return_prev=False, **unsupported):
    _atomic("min", "keeps the smallest in", ATOMIC_MAX_DTYPES, dst, value, memory_order, return_prev, unsupported)


def _atomic(op, verb, dtypes, dst, value, memory_order, return_prev, unsupported, use_tma=False):
    name = f"T.atomic_{op}"
    if unsupported:
        raise error(f"{name}: unsupported keyword(s) {', '.join(unsupported)}")
    if memory_order not in (None, "relaxed"):
        raise error(f"{name}: only the relaxed update is supported (memory_order={memory_order!r} is not)")
    target = as_region(dst, f"{name} destination")
    if return_prev:
        return _atomic_returning(op, name, verb, dtypes, target, value)
    if not isinstance(target, _b.Point) or isinstance(value, (ir.Buffer, ir.Region)):
        # a region, or a tile origin (C[i, j]) with a tile as the value, as T.copy takes one
        _tile_atomic(op, name, verb, dtypes, target, value, use_tma)
        return
    _b.current().emit(_atomic_call(op, name, verb, dtypes, ir.BufferLoad(target.buffer, tuple(target.indices),
                                                                         target.buffer.dtype), value))


def _atomic_returning(op, name, verb, dtypes, target, value) -> ir.Var:
    """``return_prev=True``: the update of one shared element as a value, ``prev = atomicAdd(...)``
    (``ir.LetStmt`` whose value is the atomic call; the passes that order shared accesses and both
    interpreters know an atomic call wherever it stands)."""
    if op != "add":
        raise error(f"{name}: return_prev is supported for T.atomic_add only")
    if not isinstance(target, _b.Point) or target.buffer.scope != "shared":
        what = "a region" if not isinstance(target, _b.Point) else f"{target.buffer.scope} memory"
        raise error(f"{name}: return_prev is supported on one element of shared memory; "
                    f"{target.buffer.name}[...] is {what}")
    call = _atomic_call(op, name, verb, dtypes, ir.BufferLoad(target.buffer, tuple(target.indices),
                                                              target.buffer.dtype), value).call
    prev = ir.Var(_b.current().fresh_name("prev"), target.buffer.dtype)
    _b.current().emit(ir.LetStmt(prev, call))
    return prev


def _atomic_call(op, name, verb, dtypes, element: ir.BufferLoad, value) -> ir.Evaluate:
    """The update of one element (checked: its memory, its type) by ``value``."""
    buf = element.buffer
    if buf.scope not in ("global", "shared"):
        raise error(f"{name} {verb} global or shared memory; {buf.name} is a {buf.scope} buffer, "
                    "which only one thread holds: update it directly")
    if buf.dtype.name not in dtypes:
        raise error(f"{name} on {buf.dtype.name} ({buf.name}) is not supported; it takes {', '.join(dtypes)}")
    amount = ir.cast(_b.stored_value(value, buf, f"{name}: the value"), buf.dtype)
    where = ir.Call("address_of", (element,), ir.dtypes.handle)
    call = ATOMIC_CALLS[op]
    if op != "add" and buf.dtype.is_float:
        call = f"tw::atomic_{op}"  # no native float atomic of these
    return ir.Evaluate(ir.Call(call, (where, amount), buf.dtype))


def _tile_atomic(op, name, verb, dtypes, target: ir.Region, value, use_tma=False):
    """``T.atomic_add(C[i0:i1, j0:j1], tile)`` (or ``C[i0, j0]``, the region's origin, its
    extents the tile's): each element of the tile into its element of the region, atomically, as a ``T.Parallel`` loop of element atomics (elements outside a global
    tensor's shape are skipped, as a copy's stores are)."""
    if not isinstance(value, (ir.Buffer, ir.Region, ir.BufferLoad)):
        raise error(f"{name} {verb} one element (dst[i, j]) by a value, or a region by a tile of its extents; "
                    f"{target.buffer.name}[...] is a region and the value is {_b.describe(value)}")
    source = as_region(value, f"{name} value")
    if isinstance(source, _b.Point):
        raise error(f"{name}: the value for a region must be a tile (a buffer or a slice of one) of its extents, "
                    f"not the single element {source.buffer.name}[...]")
    src, dst = resolve_regions(source, target, name)
    if use_tma and op == "add" and tma_reducible(src, dst):
        _b.current().emit(ir.Copy(src, dst, "tma", reduce="add"))
        return

    def body(s_idx, d_idx):
        value = element(src.buffer, s_idx)
        where = element(dst.buffer, d_idx)
        store = _atomic_call(op, name, verb, dtypes, where, value)
        guard = inside(dst.buffer, d_idx)
        return store if guard is None else ir.IfThenElse(guard, store)

    _b.current().emit(element_loop(src, dst, body, name))


def tma_reducible(src: ir.Region, dst: ir.Region) -> bool:
    """Whether one TMA reduction adds ``src`` into ``dst``: ``src`` a whole float32 shared tile
    of static shape, ``dst`` a region of static extents of a float32 kernel tensor (not a view
    made in the kernel, no ``T.annotate_layout``) whose rows lie contiguous (last stride 1), whose
    other strides are provably multiples of 16 bytes and whose rows in the region are a multiple
    of 16 bytes and at most 256 elements (a tensor map's box). The float32 add is the one both
    ``cp.reduce.async.bulk`` forms take."""
    s, g = src.buffer, dst.buffer
    if s.scope != "shared" or g.scope != "global" or s.dtype.name != "float32" or g.dtype.name != "float32":
        return False
    if g.attrs.get("device_bound") or g.attrs.get("layout_of") is not None or g.attrs.get("view_of") is not None:
        return False
    shape, extents = s.static_shape(), dst.static_extents()
    if shape is None or extents is None or not g.ndim or g.ndim > 5:
        return False
    strides = g.effective_strides()
    inner = extents[-1]
    return (src.is_full and ir.const_int(strides[-1]) == 1 and inner % 4 == 0 and inner <= 256
            and all(e <= 256 for e in extents[:-1])
            and all(is_multiple_of(stride, 4) for stride in strides[:-1]))


def atomic_addx2(dst, value, return_prev=False):
    """Two neighbouring elements added atomically (TileLang's pair atomic): ``dst`` and ``value``
    are two elements along their last dimension (a slice ``dst[i, j:j + 2]`` or an origin
    ``dst[i, j]``). Each element's add is atomic, as in TileLang; neither promises the two land
    together. Into a float32 tensor whose pair provably starts on a multiple of two elements
    they are one 8-byte atomic (``ir.ATOMIC_ADD_VECTORS``; the launcher checks the tensor's
    alignment), otherwise two element atomics."""
    _neighbours_add(2, dst, value, return_prev)


def atomic_addx4(dst, value, return_prev=False):
    """Four neighbouring elements added atomically (``T.atomic_addx2``'s rule, four elements: one
    16-byte atomic where they can be, DeepSeek's sparse MLA backward's dKV)."""
    _neighbours_add(4, dst, value, return_prev)


def _neighbours_add(n, dst, value, return_prev):
    name = f"T.atomic_addx{n}"
    if return_prev:
        raise error(f"{name}: return_prev is not supported (the adds return nothing)")
    targets, amounts = _neighbours(dst, n, f"{name} destination"), _neighbours(value, n, f"{name} value")
    if _one_vector(targets[0], n):
        buf = targets[0].buffer
        values = [ir.cast(_b.stored_value(a, buf, f"{name}: the value"), buf.dtype) for a in amounts]
        buf.attrs["align_bytes"] = max(buf.attrs.get("align_bytes", 1), 4 * n)  # the launcher checks it
        where = ir.Call("address_of", (targets[0],), ir.dtypes.handle)
        _b.current().emit(ir.Evaluate(ir.Call(ir.ATOMIC_ADD_VECTORS[n], (where, *values), buf.dtype)))
        return
    for target, amount in zip(targets, amounts):
        atomic_add(target, amount)


def _one_vector(first: ir.BufferLoad, n: int) -> bool:
    """Whether ``n`` float32 neighbours from ``first`` can be one vector atomic: a kernel's tensor
    (whose alignment the launcher checks), row-major, its last dimension a multiple of ``n`` (so the
    first inside means all are) and the first's element offset provably a multiple of ``n``."""
    buf = first.buffer
    if buf.scope != "global" or buf.dtype.name != "float32" or buf.attrs.get("layout_of") is not None \
            or buf.strides is not None:
        return False
    if buf.data is not None and buf.attrs.get("view_of") is None:
        return False  # a tensor made from a pointer: nothing checks its alignment
    last = ir.const_int(buf.shape[-1])
    return last is not None and last % n == 0 and is_multiple_of(strided_offset(buf, first.indices), n)


def _neighbours(x, n: int, what: str) -> list:
    """The ``n`` elements ``x`` names along its last dimension, as loads."""
    region = as_region(x, what)
    buf = region.buffer
    if buf.attrs.get("layout_of") is not None:  # its neighbours in memory are not its neighbours
        raise error(f"{what}: {buf.attrs['layout_of'].name} has a layout (T.annotate_layout); add its "
                    "elements one at a time with T.atomic_add")
    if isinstance(region, _b.Point):
        *lead, last = region.indices
        return [ir.BufferLoad(buf, (*lead, last + k), buf.dtype) for k in range(n)]
    extents = region.static_extents()
    if extents is None or extents[-1] != n or any(e != 1 for e in extents[:-1]):
        raise error(f"{what} must be {n} neighbouring elements along the last dimension ({buf.name}[i, j:j + {n}] "
                    f"or {buf.name}[i, j]), not a region of extents {extents}")
    *lead, last = region.starts
    return [ir.BufferLoad(buf, (*lead, last + k), buf.dtype) for k in range(n)]
