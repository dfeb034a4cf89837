"""Rules shared by the passes that place TMA copies (not a pass itself).

* ``swizzle_for_tile``: the swizzle a shared tile gets from its inner-dimension bytes
  (128 -> 128B, 64 -> 64B, 32 -> 32B, else none; rows a multiple of 8).
* ``is_contiguous``: whether a global region is one contiguous range under the tensor's real
  strides (then a descriptorless bulk copy can move it).
* ``build_descriptor``: the fields of the tiled tensor map for a global region and its tile,
  checked against the hardware's limits; ``tma_copies``: the copies (tile column, coordinates)
  that move the region with it: one, or one per 128-byte panel where one 3-D copy cannot
  (``whole_panels``).
"""

from __future__ import annotations

from ... import dtypes
from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.records import TmaDescriptor

SWIZZLE_CODES = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle
# Buffer attr: a tile whose only TMA is the store of its threads' result (store_last_tile_by_tma),
# so choose_shared_layouts gives it the layout the threads writing it want, not a swizzle for TMA.
STORE_ONLY = "tma_store_only"
# The calls a lowered TMA store is made of (``lower_tma``): the store, its commit, and its wait.
STORE_CALLS = (*ir.TMA_STORE_ISSUES, "tw::tma_store_arrive")
STORE_WAIT_PREFIX = "tw::tma_store_wait<"


def is_store_call(name: str) -> bool:
    return name in STORE_CALLS or name.startswith(STORE_WAIT_PREFIX)
SWIZZLE_NAMES = {0: "none", 32: "32B", 64: "64B", 128: "128B"}
DEVICE_BOUND_ERROR = "bound inside the device function body"


def tile_shape(buf: ir.Buffer) -> tuple[int, ...]:
    """Shape of one version of a shared buffer (without the pipeline-version dimension)."""
    shape = buf.static_shape()
    return shape[1:] if buf.attrs.get("versions", 1) > 1 else shape


def swizzle_for_tile(buf: ir.Buffer) -> int:
    """Swizzle span in bytes (0: none) for a shared tile read by TMA or the tensor cores."""
    shape = tile_shape(buf)
    if len(shape) < 2:
        return 0
    inner_bytes = buf.dtype.bytes_for(shape[-1])
    rows = 1
    for s in shape[:-1]:
        rows *= s
    tile_bytes = inner_bytes * rows
    if inner_bytes in (32, 64, 128) and rows % 8 == 0 and tile_bytes % 1024 == 0:
        return inner_bytes
    return 0


def region_bytes(region: ir.Region) -> int:
    """Bytes of payload in the region (FP4: 4 bits an element)."""
    return region.buffer.dtype.payload_bytes(region.numel)


def is_contiguous(region: ir.Region) -> bool:
    """The region's elements form one contiguous range under the buffer's real strides."""
    strides = [ir.const_int(s) for s in region.buffer.effective_strides()]
    extents = region.static_extents()
    if extents is None or None in strides:
        return False
    dims = [d for d, e in enumerate(extents) if e != 1]
    if not dims:
        return True
    if strides[dims[-1]] != 1:
        return False
    for outer, inner in zip(dims, dims[1:]):
        if strides[outer] != strides[inner] * extents[inner]:
            return False
    return True


def can_bulk_copy(global_region: ir.Region, shared: ir.Buffer, ranges: dict) -> bool:
    """One descriptorless copy (``cp.async.bulk``) moves ``global_region``: its elements are one
    contiguous range of a multiple of 16 bytes, the tile is unswizzled, and the region lies inside
    the tensor for every value ``ranges`` allow (block indices, loop variables). A bulk copy moves
    its bytes wherever they are: a region past a row's end or the tensor's would read or write the
    memory beyond (a partial last tile), where a tensor map's copy zero-fills and clips. Nor can it
    unpack FP4 into a ``float4_e2m1_unpacked`` tile (one value a byte): only a tensor map does."""
    return (is_contiguous(global_region) and shared.attrs.get("swizzle", 0) == 0
            and shared.dtype.name != "float4_e2m1_unpacked"
            and region_bytes(global_region) % 16 == 0 and inside_tensor(global_region, ranges))


def inside_tensor(region: ir.Region, ranges: dict) -> bool:
    """Whether ``region`` lies inside its tensor's shape for every value ``ranges`` allow."""
    from ...ir.simplify import interval, simplify

    extents = region.static_extents()
    if extents is None:
        return False
    for start, extent, size in zip(region.starts, extents, region.buffer.shape):
        size = ir.const_int(size)
        lo, hi = interval(simplify(start, ranges), ranges)
        if size is None or lo is None or hi is None or lo < 0 or hi + extent > size:
            return False
    return True


def whole_panels(global_region: ir.Region, panel: int) -> bool:
    """One 3-D copy can fill a tile stored as ``panel``-element panels from ``global_region``
    (see ``_paneled``): a 2-D tensor whose rows are a whole number of panels, the region starting
    on a panel boundary. Otherwise each panel is a copy of its own (``tma_copies``), as from a
    tensor of more dimensions (a head of ``(batch, heads, seq, dim)``)."""
    from ...ir.simplify import is_multiple_of

    if global_region.buffer.ndim != 2:
        return False
    cols = ir.const_int(global_region.buffer.shape[-1])
    return cols is not None and cols % panel == 0 and is_multiple_of(global_region.starts[-1], panel)


def tma_copies(global_region: ir.Region, shared: ir.Buffer) -> list[tuple[int, list]]:
    """The TMA copies that move ``global_region`` to or from its shared tile: for each, the
    column of the tile where its box starts and the tensor map's coordinates (innermost first).
    One copy, except for a tile stored as panels whose global rows are not a whole number of
    panels (``whole_panels``): one copy per panel, its box one panel wide, the columns past the
    tensor's edge filled with zeros by a load and left unwritten by a store, as at any edge."""
    from ...ir.simplify import simplify

    coords = [simplify(c) for c in reversed(global_region.starts)]
    panel = shared.attrs.get("panel", 0)
    if not panel:
        return [(0, coords)]
    if whole_panels(global_region, panel):  # (panel element, row, panel index): see _paneled
        return [(0, [ir.const(0), coords[1], simplify(coords[0] // panel)])]
    box_cols = global_region.static_extents()[-1]
    return [(p * panel, [simplify(coords[0] + p * panel), *coords[1:]]) for p in range(box_cols // panel)]


def _paneled(desc: TmaDescriptor, g: ir.Buffer, panel: int, elem_bytes: int) -> TmaDescriptor:
    """A 2-D map reshaped so that one copy fills a tile stored as 128-byte panels: dimensions
    (panel, rows, cols / panel), the panel dimension stepping ``panel`` elements in memory."""
    cols, rows = desc.global_dims
    box_cols, box_rows = desc.box_dims
    desc.rank = 3
    desc.global_dims = (panel, rows, cols // panel)
    desc.global_strides_bytes = (desc.global_strides_bytes[0], panel * elem_bytes)
    desc.box_dims = (panel, box_rows, box_cols // panel)
    desc.element_strides = (1, 1, 1)
    return desc


def _one_panel_box(desc: TmaDescriptor, panel: int) -> TmaDescriptor:
    """The map as it is, its box one panel wide: one copy per panel (``tma_copies``)."""
    desc.box_dims = (panel,) + tuple(desc.box_dims[1:])
    return desc


def global_stride_bytes(g: ir.Buffer) -> list:
    """The tensor's strides in bytes, innermost first, the innermost dimension's left out (TMA
    takes its elements as contiguous); an expression where a stride is not a constant."""
    out = []
    for s in reversed(g.effective_strides()[:-1]):
        si = ir.const_int(s)
        out.append(g.dtype.bytes_for(si) if si is not None else s * g.dtype.storage_bits // 8)
    return out


def misaligned_stride(stride_bytes) -> int | None:
    """The first known stride TMA cannot take (not a multiple of 16 bytes), or None."""
    return next((b for b in stride_bytes if isinstance(b, int) and b % 16), None)


def unproven_stride(g: ir.Buffer):
    """A stride of ``g`` that its sizes decide and that is not provably a multiple of 16 bytes (a
    ``T.dynamic`` size of a kernel's form for any sizes), or None. Explicit ``T.tma_copy`` takes such
    a tensor and the launcher checks the stride at each call; a copy the compiler chooses to make by
    TMA must not refuse calls the kernel's form accepts."""
    from ...ir.simplify import is_multiple_of

    bits = g.dtype.storage_bits
    for s in g.effective_strides()[:-1]:
        if ir.const_int(s) is None and not (128 % bits == 0 and is_multiple_of(s, 128 // bits)):
            return s
    return None


def wide_tile_panel(buf: ir.Buffer) -> int:
    """Elements per 128-byte panel for a 2-D tile whose rows are a whole number (> 1) of 128-byte
    panels, else 0: ``choose_shared_layouts`` stores such a tile (one no gemm reads) as panels with
    the 128B swizzle, so threads writing it hit no bank twice and one 3-D TMA map still moves it."""
    shape = tile_shape(buf)
    if len(shape) != 2 or buf.dtype.bits not in (8, 16, 32) or shape[0] % 8:
        return 0
    row_bytes = buf.dtype.bytes_for(shape[1])
    return 128 * 8 // buf.dtype.bits if row_bytes > 128 and row_bytes % 128 == 0 else 0


def build_descriptor(global_region: ir.Region, shared: ir.Buffer, loc, panel: int | None = None) -> TmaDescriptor:
    """The tensor map of a TMA copy between ``global_region`` and ``shared``, stored in panels of
    ``panel`` elements (default: the tile's ``attrs["panel"]``, which ``choose_shared_layouts``
    sets; a pass before it names the panel its gemm plan will give), or a CompileError saying why
    TMA cannot make the copy."""
    g = global_region.buffer
    if g.attrs.get("device_bound"):
        raise CompileError(
            f"TMA of {g.name} needs a tensor-map descriptor, but {g.name} is a pointer {DEVICE_BOUND_ERROR} "
            "(T.make_tensor), so the host cannot encode one; copy a contiguous 1-D region instead "
            "(descriptorless bulk copy) or pass the tensor as a kernel parameter", loc)
    dtype = g.dtype
    data_type = dtype.tma_code
    if shared.dtype.name == "float4_e2m1_unpacked":
        data_type = dtypes.float4_e2m1_unpacked.tma_code
    if data_type is None:
        raise CompileError(f"TMA cannot move {dtype.name} data", loc)
    rank = g.ndim
    if rank > 5:
        raise CompileError(f"TMA handles at most 5 dimensions; {g.name} has {rank}", loc)
    dims = tuple(_int_or_expr(s) for s in reversed(g.shape))
    too_long = next((d for d in dims if isinstance(d, int) and d > 2**31 - 1), None)
    if too_long is not None:
        raise CompileError(f"TMA addresses a tensor with 32-bit coordinates; {g.name} has a dimension of "
                           f"{too_long} elements, more than 2^31 - 1", loc)
    stride_bytes = global_stride_bytes(g)
    bad = misaligned_stride(stride_bytes)
    if bad is not None:
        raise CompileError(f"TMA needs global strides that are multiples of 16 bytes; {g.name} "
                           f"has a stride of {bad} bytes", loc)
    box = tuple(reversed(global_region.static_extents()))
    panel = shared.attrs.get("panel", 0) if panel is None else panel
    # a tile stored in panels is moved a panel wide (a copy a panel, or one 3-D copy: _paneled)
    moved = (min(box[0], panel), *box[1:]) if panel else box
    if any(b > 256 for b in moved):
        raise CompileError(f"TMA box dimensions are at most 256 elements; the tile of {g.name} is "
                           f"{tuple(reversed(box))}", loc)
    span = shared.attrs.get("swizzle", 0)
    inner_box_bytes = shared.dtype.bytes_for(panel or box[0])
    if span and inner_box_bytes > span:
        raise CompileError(f"the inner tile of {shared.name} is {inner_box_bytes} bytes, more than its "
                           f"{span}-byte swizzle span", loc)
    if inner_box_bytes % 16:
        raise CompileError(f"TMA needs the inner tile dimension to be a multiple of 16 bytes; "
                           f"{shared.name} has {inner_box_bytes}", loc)
    desc = TmaDescriptor(
        name=f"{g.name}_desc", buffer=g.name, data_type=data_type, rank=rank, global_dims=dims,
        global_strides_bytes=tuple(stride_bytes), box_dims=box, element_strides=(1,) * rank,
        interleave=0, swizzle=SWIZZLE_CODES[span], l2_promotion=2, oob_fill=0,
    )
    if not panel:
        return desc
    if whole_panels(global_region, panel):
        return _paneled(desc, g, panel, dtype.storage_bits // 8)
    return _one_panel_box(desc, panel)


def _int_or_expr(e):
    v = ir.const_int(e)
    return v if v is not None else e
