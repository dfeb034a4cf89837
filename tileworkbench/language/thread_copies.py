"""Copies each thread issues itself: TileLang's ``T.ptx_cp_async`` on ``T.access_ptr`` pointers, and
``T.cp_async_barrier_noinc``, the mbarrier arrival once they have landed (the loads of its
hand-written warp-specialised kernels: a producer warpgroup gathers rows by index, each thread 16
bytes of a row, and the consumers wait on the mbarrier)."""

from __future__ import annotations

from dataclasses import dataclass

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.regions import as_barrier
from ..ir import nodes as ir

_MODES = {"r": "r", "w": "w", "rw": "rw", 1: "r", 2: "w", 3: "rw"}


@dataclass(frozen=True)
class AccessPointer:
    """``T.access_ptr(A[i, j], mode, extent)``: the address of ``A[i, j]`` and the ``extent``
    elements from it (along the last dimension) the program says it will read or write (``mode``).
    Only ``T.ptx_cp_async`` takes one here."""

    buffer: ir.Buffer
    indices: tuple
    mode: str
    extent: int | None

    def __bool__(self):
        raise error("T.access_ptr gives a pointer for T.ptx_cp_async, not a value to test")


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """The address of ``base`` (an element ``A[i, j]``) for ``T.ptx_cp_async``; ``extents`` (or
    ``extent``) count the elements from it the access covers."""
    if not isinstance(base, ir.BufferLoad):
        raise error(f"T.access_ptr takes an element of a buffer (A[i, j]), not {_b.describe(base)}")
    mode = _MODES.get(access_type)
    if mode is None:
        raise error(f"T.access_ptr: the access type is 'r', 'w' or 'rw' (or 1, 2, 3), not {access_type!r}")
    if ignore_last_ndim:
        raise error("T.access_ptr(..., ignore_last_ndim=...) is not supported: give the element itself")
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    count = None
    if extent is not None:
        count = _b.constant_int(extent, "T.access_ptr: extent", low=1)
    elif extents:
        count = 1
        for e in extents:
            count *= _b.constant_int(e, "T.access_ptr: an extent", low=1)
    indices = tuple(base.indices)
    if not (isinstance(offset, int) and offset == 0):
        indices = (*indices[:-1], indices[-1] + _b.integer(offset, "T.access_ptr: offset"))
    return AccessPointer(base.buffer, indices, mode, count)


def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """``cp.async``: each thread running it copies ``num_elems`` consecutive elements (4, 8 or 16
    bytes) of a global tensor into a shared tile, its own elements where its indices are its own.
    The copy lands for ``T.cp_async_barrier_noinc`` (the mbarrier the readers wait on). With a
    ``predicate`` that is false, the elements are zeros instead; indices outside the tensor read
    zeros too, and indices outside the tile write nothing (not another tile's memory)."""
    dst, src = dst_access_ptr, src_access_ptr
    for ptr, what, scope in ((dst, "the destination", "shared"), (src, "the source", "global")):
        if not isinstance(ptr, AccessPointer):
            raise error(f"T.ptx_cp_async: {what} is a pointer from T.access_ptr(A[i, j], ...), not {_b.describe(ptr)}")
        if ptr.buffer.scope != scope:
            raise error(f"T.ptx_cp_async copies global memory into shared memory; {what} {ptr.buffer.name} is "
                        f"{_b.describe(ptr.buffer)}")
    if "w" not in dst.mode:
        raise error(f"T.ptx_cp_async writes its destination: T.access_ptr({dst.buffer.name}[...], 'w')")
    n = _b.constant_int(num_elems, "T.ptx_cp_async: num_elems", low=1)
    if dst.buffer.dtype != src.buffer.dtype:
        raise error(f"T.ptx_cp_async copies bytes: {src.buffer.name} ({src.buffer.dtype.name}) and "
                    f"{dst.buffer.name} ({dst.buffer.dtype.name}) must have one dtype")
    nbytes = dst.buffer.dtype.bytes_for(n)
    if nbytes not in (4, 8, 16):
        raise error(f"T.ptx_cp_async copies 4, 8 or 16 bytes; {n} {dst.buffer.dtype.name} elements are {nbytes}")
    for ptr in (dst, src):
        if ptr.extent is not None and ptr.extent < n:
            raise error(f"T.ptx_cp_async copies {n} elements, more than the {ptr.extent} T.access_ptr gives "
                        f"{ptr.buffer.name}")
    regions = [ir.Region(p.buffer, p.indices, (*[ir.const(1)] * (len(p.indices) - 1), ir.const(n)))
               for p in (dst, src)]
    condition = None if predicate is None else _b.number(predicate, "T.ptx_cp_async: predicate")
    _b.current().emit(ir.ThreadCopy(regions[0], regions[1], condition))


def cp_async_barrier_noinc(barrier):
    """Each thread running it arrives on ``barrier`` once the ``T.ptx_cp_async`` copies it issued
    before have landed (``cp.async.mbarrier.arrive.noinc``): an arrival the barrier's count
    includes, so a warpgroup of 128 loaders completes a barrier of ``arrive_count=128``."""
    _b.current().emit(ir.BarrierArrive(as_barrier(barrier, "T.cp_async_barrier_noinc: the barrier"),
                                       after_copies=True))
