"""The kernel's launch and its memory: ``T.Kernel``, the block and thread bindings, block
rasterisation, and the allocations of shared, fragment, local and barrier memory."""

from __future__ import annotations

import builtins as _builtins
import math

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.fragment_views import FragmentView
from ..frontend.specs import KernelSpec, WarpGroups, opens_kernel_scope, opens_thread_scope
from ..ir import nodes as ir
from ..ir.records import SharedView
from ..frontend.regions import Layout, laid_out
from .global_layouts import lay_out
from .types import _dtype, _shape, _tensor_dims, float32, int32

_py_bool = _builtins.bool


# What CUDA allows: gridDim.x up to 2^31 - 1, gridDim.y and .z up to 65535.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


@opens_kernel_scope
def Kernel(*grid, threads=128, **unsupported):  # noqa: N802
    if unsupported:
        raise error(f"T.Kernel: unsupported keyword(s) {', '.join(unsupported)}")
    dims = _thread_dims(threads)
    total = 1
    for d in dims:
        total *= d
    if not 1 <= total <= 1024:
        shown = _b.describe(threads) if len(dims) == 1 else f"{' x '.join(map(str, dims))} = {total} threads"
        raise error(f"T.Kernel: threads must be a constant between 1 and 1024, got {shown}")
    if len(grid) > 3:
        raise error(f"T.Kernel takes at most 3 grid dimensions, got {len(grid)}")
    blocks = []
    for axis, g in enumerate(grid):
        what = f"T.Kernel: grid dimension {'xyz'[axis]}"
        e = _b.integer(g, what)
        n = ir.const_int(e)
        if n is not None and not 1 <= n <= GRID_LIMITS[axis]:
            raise error(f"{what} must be between 1 and {GRID_LIMITS[axis]} blocks (CUDA's limit), got {n}")
        blocks.append(e)
    return KernelSpec(tuple(blocks) or (ir.const(1),), total, dims)


def _thread_dims(threads) -> tuple:
    """``threads=N`` or ``threads=(x, y[, z])``: constants; a block of several dimensions is
    launched as one of x*y*z threads, numbered x fastest as CUDA numbers them."""
    dims = threads if isinstance(threads, (list, tuple)) else (threads,)
    if not 1 <= len(dims) <= 3:
        raise error(f"T.Kernel: threads is a number or a tuple of up to 3 numbers (x, y, z), "
                    f"got {_b.describe(threads)}")
    out = []
    for d in dims:
        n = None if isinstance(d, _py_bool) else ir.const_int(d)
        if n is None or n < 1:
            raise error(f"T.Kernel: threads must be a constant between 1 and 1024, got {_b.describe(d)}"
                        + ("" if d is threads else f" in {_b.describe(threads)}"))
        out.append(n)
    return tuple(out)  # a dimension of one thread still exists: its index is 0, as CUDA's is


def get_thread_binding(dim: int = 0):
    """``threadIdx.x`` (``.y``, ``.z`` of a block declared ``threads=(x, y, z)``, recovered from
    the one-dimensional index the block is launched with)."""
    launch = _b.launch("T.get_thread_binding()")
    d = _b.constant_int(dim, "T.get_thread_binding: dim")
    dims = launch.thread_dims or (launch.threads,)
    if not 0 <= d < 3:
        raise error(f"T.get_thread_binding({d}): dim is 0, 1 or 2")
    if d >= len(dims):
        raise error(f"T.get_thread_binding({d}): the block is declared with {len(dims)} dimension(s) "
                    f"(threads={dims[0] if len(dims) == 1 else dims}), so only threadIdx.{'xyz'[:len(dims)]} "
                    f"exists; declare threads=(x, y{', z' if d == 2 else ''}) for more")
    index = launch.thread_var
    below = 1
    for n in dims[:d]:
        below *= n
    if below > 1:
        index = index // below
    if d < len(dims) - 1:
        index = index % dims[d]
    return index


_THREAD_AXES = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}


def thread_binding(start, stop=None, thread: str = "threadIdx.x", annotations=None):
    """``tx = T.thread_binding(0, threads, thread="threadIdx.x")`` (TileLang's logits cleaning): the
    thread index along ``thread``, as ``T.get_thread_binding``; the range must be the block's
    threads along that axis, from 0."""
    if stop is None:
        start, stop = 0, start
    if thread not in _THREAD_AXES:
        raise error(f"T.thread_binding: thread is one of {', '.join(_THREAD_AXES)}, not {_b.describe(thread)}")
    axis = _THREAD_AXES[thread]
    launch = _b.launch("T.thread_binding()")
    dims = launch.thread_dims or (launch.threads,)
    extent = dims[axis] if axis < len(dims) else 1
    first, last = ir.const_int(_b.integer(start, "T.thread_binding: start")), ir.const_int(_b.integer(stop, "T.thread_binding: stop"))
    if first != 0 or last != extent:
        raise error(f"T.thread_binding({_b.describe(start)}, {_b.describe(stop)}, {thread!r}): the block has {extent} "
                    f"thread(s) along {thread}; the binding runs over all of them, from 0 to {extent}")
    return get_thread_binding(axis)


def use_swizzle(panel_size: int = 10, order: str = "row", enable: bool = True):
    """Visit thread blocks in panels of ``panel_size`` block rows, so blocks that run at the same
    time share tiles of A and B in L2 (TileLang's rasterisation). ``enable=False`` keeps the
    hardware order (also for GEMMs, which are rasterised automatically otherwise)."""
    if order != "row":
        raise error("T.use_swizzle: only order='row' is supported")
    n = ir.const_int(panel_size) if not isinstance(panel_size, _py_bool) else None
    if enable and (n is None or n < 1):
        raise error(f"T.use_swizzle: panel_size must be a positive constant, got {_b.describe(panel_size)}")
    _b.launch("T.use_swizzle").raster_request = n if enable else 0


def _warp_size(warp_size, what: str) -> int:
    n = 32 if warp_size is None else _b.constant_int(warp_size, f"{what}: warp_size")
    if n != 32:
        raise error(f"{what}: a warp is 32 threads on NVIDIA GPUs, not {n}")
    return n


def get_lane_idx(warp_size=None):
    """The calling thread's lane in its warp (``threadIdx.x % 32``)."""
    return _b.launch("T.get_lane_idx()").thread_var % _warp_size(warp_size, "T.get_lane_idx")


def get_warp_idx(warp_size=None):
    """The calling thread's warp in the block (``threadIdx.x / 32``)."""
    return _b.launch("T.get_warp_idx()").thread_var // _warp_size(warp_size, "T.get_warp_idx")


def get_warp_group_idx(warp_size=None, warps_per_group=None):
    """The calling thread's warpgroup (four warps) in the block."""
    n = 4 if warps_per_group is None else _b.constant_int(warps_per_group, "T.get_warp_group_idx: warps_per_group")
    if n != 4:
        raise error(f"T.get_warp_group_idx: a warpgroup is 4 warps on Hopper, not {n}")
    return _b.launch("T.get_warp_group_idx()").thread_var // (_warp_size(warp_size, "T.get_warp_group_idx") * n)


def get_thread_extents():
    """The block's threads along x, y, z as declared (``T.Kernel(threads=...)``)."""
    launch = _b.launch("T.get_thread_extents()")
    return list(launch.thread_dims or (launch.threads,))


def _one_extent(extents: list, dim, what: str, of: str):
    d = _b.constant_int(dim, f"{what}: dim")
    if not 0 <= d < len(extents):
        raise error(f"{what}({d}): {of} has {len(extents)} dimension(s)")
    return extents[d]


def get_thread_extent(dim: int = 0):
    return _one_extent(get_thread_extents(), dim, "T.get_thread_extent", "the block")


def get_block_extents():
    """The grid's blocks along x, y, z (``T.Kernel(bx, by, ...)``)."""
    return list(_b.launch("T.get_block_extents()").grid)


def get_block_extent(dim: int = 0):
    return _one_extent(get_block_extents(), dim, "T.get_block_extent", "the grid")


def disable_warp_group_reg_alloc():
    """No register hand-over between the warpgroups of a warp-specialised kernel (no ``setmaxnreg``):
    every thread keeps the registers the compile gave it."""
    _b.launch("T.disable_warp_group_reg_alloc()").register_handover = False


no_set_max_nreg = disable_warp_group_reg_alloc


def _register_count(reg_count, what: str) -> int:
    n = _b.constant_int(reg_count, f"{what}: reg_count")
    if not 24 <= n <= 256 or n % 8:
        raise error(f"{what}: setmaxnreg takes a multiple of 8 from 24 to 256 registers, not {n}")
    return n


def annotate_producer_reg_dealloc(reg_count: int = 24):
    """The registers a warp-specialised kernel's producer warpgroup keeps (``setmaxnreg.dec``)."""
    _b.launch("T.annotate_producer_reg_dealloc").producer_registers = _register_count(
        reg_count, "T.annotate_producer_reg_dealloc")


def annotate_consumer_reg_alloc(reg_count: int = 240):
    """The registers each consumer thread of a warp-specialised kernel grows to (``setmaxnreg.inc``)."""
    _b.launch("T.annotate_consumer_reg_alloc").consumer_registers = _register_count(
        reg_count, "T.annotate_consumer_reg_alloc")


def set_max_nreg(reg_count, is_inc):
    """``setmaxnreg``: the warpgroups of the ``if tx < C:`` or ``T.ws`` scope this stands in grow
    (``is_inc`` 1) or shrink (0) their threads' registers to ``reg_count`` (TileLang's hand-written
    warp-specialised kernels: the producer gives registers back, the consumers take them).
    Every warp of a warpgroup must run it, so it stands in a scope of whole warpgroups, outside
    loops and branches; the counts the block's warpgroups end with must fit the registers the
    block holds (``passes.verify_register_counts``), where asking for more blocks for ever."""
    what = "T.set_max_nreg"
    count = _register_count(reg_count, what)
    inc = _b.constant_int(is_inc, f"{what}: is_inc")
    if inc not in (0, 1):
        raise error(f"{what}: is_inc is 1 (setmaxnreg.inc: grow to reg_count) or 0 (.dec: shrink), not {inc}")
    scope = _b.current().thread_scope
    if scope is None or scope[0] % 128 or scope[1] % 128:
        where = "the whole block" if scope is None else f"threads {scope[0]} to {scope[0] + scope[1] - 1}"
        raise error(f"{what}({count}, {inc}) is run here by {where}: setmaxnreg is run by every warp of "
                    "a warpgroup together, so it belongs in a scope of whole warpgroups (`if tx < 128:`, "
                    "`elif 128 <= tx < 256:`, `with T.ws(...)`)")
    _b.current().emit(ir.set_max_registers(count, increase=bool(inc)))


def get_block_binding(dim: int = 0):
    launch = _b.launch("T.get_block_binding()")
    d = _b.constant_int(dim, "T.get_block_binding: dim")
    if not 0 <= d < len(launch.block_vars):
        raise error(f"T.get_block_binding({d}): the grid has {len(launch.block_vars)} dimension(s), "
                    f"so dim is between 0 and {len(launch.block_vars) - 1}")
    return launch.block_vars[d]


# ---- allocation --------------------------------------------------------------------------------


_ALLOC_NAMES = {"shared": "T.alloc_shared", "fragment": "T.alloc_fragment", "local": "T.alloc_local"}


def _checked(shape, dtype, what: str) -> tuple:
    """(shape as constants, dtype) of a buffer ``what`` allocates, each checked."""
    dims = _shape(shape)
    if not dims:
        raise error(f"{what}: a buffer needs at least one dimension")
    shape = tuple(ir.const(_b.constant_int(s, f"{what}: dimension {i}", low=1)) for i, s in enumerate(dims))
    return shape, _dtype(dtype, what)


def _alloc(shape, dtype, scope: str) -> ir.Buffer:
    shape, dtype = _checked(shape, dtype, _ALLOC_NAMES[scope])
    if dtype.shared_only and scope != "shared":
        raise error(f"{dtype.name} can only live in shared memory")
    buf = ir.Buffer("buf", shape, dtype, scope, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


def alloc_global(shape, dtype=float32):
    """A workspace in global memory, made before the function's ``with T.Kernel(...)`` blocks: each
    call allocates it (uninitialised) and every kernel of the function can read and write it, the
    later kernels seeing what the earlier ones wrote (flash decoding's partial results)."""
    b = _b.current()
    if b.in_kernel:
        raise error("T.alloc_global makes a workspace for the whole function: call it before the "
                    "`with T.Kernel(...)` blocks, not inside one")
    shape, dtype = _checked(shape, dtype, "T.alloc_global")
    buf = ir.Buffer("buf", shape, dtype, "global", loc=b.loc)
    b.workspaces.append(buf)
    return buf


def alloc_shared(shape, dtype=float32, scope="shared.dyn"):
    return _alloc(shape, dtype, "shared")


def alloc_fragment(shape, dtype=float32, scope="local.fragment"):
    """A block-wide tile spread over the threads' registers; with ``scope="local"`` (TileLang's
    spelling of a per-thread array) a ``T.alloc_local`` instead."""
    if scope not in ("local.fragment", "local"):
        raise error(f"T.alloc_fragment: scope {scope!r} is not one of 'local.fragment' (a fragment) and "
                    "'local' (a per-thread array, as T.alloc_local)")
    return _alloc(shape, dtype, "local" if scope == "local" else "fragment")


def alloc_local(shape, dtype=float32, scope="local"):
    return _alloc(shape, dtype, "local")


def alloc_var(dtype=int32, init=None):
    buf = _alloc((1,), dtype, "local")
    _b.current().var_buffers.add(buf)
    if init is not None:
        value = _b.number(init, "T.alloc_var: init")
        _b.current().emit(ir.BufferStore(buf, (ir.const(0),), ir.cast(value, buf.dtype)))
    return buf


def alloc_barrier(arrive_count) -> ir.Buffer:
    """``T.alloc_barrier(128)`` or ``T.alloc_barrier([32] * 8)``: mbarriers with init counts."""
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    if not counts:
        raise error("T.alloc_barrier needs at least one arrive count")
    # An mbarrier's arrival count is a 20-bit field.
    counts = [_b.constant_int(c, "T.alloc_barrier: an arrive count", low=1, high=2**20 - 1) for c in counts]
    buf = ir.Buffer("mbar", (ir.const(len(counts)),), _dt.uint64, "barrier",
                    attrs={"counts": counts}, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


def annotate_layout(layouts: dict):
    """``T.annotate_layout({tile: layout, ...})``. On a shared tile a hint the compiler may take:
    it lays out every shared tile itself (``tileworkbench.layout``), and a shared tile's layout
    changes no value the program computes. On a global tensor a ``T.Layout`` says where each
    element lies in memory, and is honoured (``global_layouts``). On a fragment it would decide
    which thread holds an element: refused until it is honoured."""
    if not isinstance(layouts, dict):
        raise error(f"T.annotate_layout takes a dict {{buffer: layout}}, not {_b.describe(layouts)}")
    for buf, layout in layouts.items():
        if not isinstance(buf, ir.Buffer):
            raise error(f"T.annotate_layout: {_b.describe(buf)} is not a buffer")
        if buf.scope == "global" and isinstance(layout, Layout):
            lay_out(buf, layout)  # where each element lies in memory: honoured (global_layouts)
        elif buf.scope != "shared":
            what = ("a T.Layout(shape, forward)" if buf.scope == "global" else "which thread holds each element, "
                    "which is not supported yet")
            raise error(f"T.annotate_layout on {buf.scope} buffer {buf.name}: its layout decides {what}; "
                        f"got {_b.describe(layout)}")


def view_tensor(data, shape, dtype, name: str = "tensor", layout_of: ir.Buffer | None = None):
    """``T.Tensor(shape, dtype, t.data)`` inside a kernel: the contiguous tensor ``t``'s memory seen
    with another row-major shape of no more elements (convolution's ``(KH, KW, C, F)`` weights as a
    ``(KH * KW * C, F)`` matrix). What the view's accesses need of ``t`` (alignment) the launcher
    checks on ``t``."""
    if not isinstance(data, _b.TensorData):
        raise error(f"T.Tensor(shape, dtype, data): data must be a tensor's .data (t.data), not {_b.describe(data)}")
    base = data.buffer
    if base.strides is not None:
        raise error(f"T.Tensor(shape, dtype, {base.name}.data): {base.name} has strides of its own; a view "
                    "needs a contiguous tensor")
    if dtype != base.dtype:
        raise error(f"T.Tensor(shape, dtype, {base.name}.data): the view is {dtype.name} but {base.name} holds "
                    f"{base.dtype.name}")
    shape = _tensor_dims(shape, "T.Tensor", dtype)
    view_dims, base_dims = ([ir.const_int(d) for d in dims] for dims in (shape, base.shape))
    if None in view_dims + base_dims:
        raise error("T.Tensor(shape, dtype, t.data): both shapes must be known when the kernel is compiled")
    view_n, base_n = math.prod(view_dims), math.prod(base_dims)
    if view_n > base_n:
        raise error(f"T.Tensor(shape, dtype, {base.name}.data): the view has {view_n} elements, more than "
                    f"{base.name}'s {base_n}")
    start = ir.Call("address_of", (ir.BufferLoad(base, tuple(ir.const(0) for _ in base.shape), base.dtype),),
                    _dt.handle)
    attrs = {"device_bound": True, "view_of": base}
    if layout_of is not None:  # the memory of a tensor given a layout (global_layouts)
        attrs["layout_of"] = layout_of
    buf = ir.Buffer(name, shape, dtype, "global", data=start, attrs=attrs, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


def reshape(src, shape):
    """``T.reshape(t, shape)``: the global tensor ``t``'s memory seen with another row-major shape of
    as many elements (TileLang's ``T.Tensor(shape, t.dtype, t.data)``); of a fragment, its elements
    seen so (``frontend.fragment_views``)."""
    return _reshaped_view(src, shape, None, "T.reshape")


def view(src, shape=None, dtype=None):
    """``T.view(t, shape=None, dtype=None)``: as ``T.reshape``; of a shared tile, in any shape and
    dtype of no more bytes, a tile of its own (``_shared_view``); a global tensor or fragment seen
    in another dtype is refused."""
    return _reshaped_view(src, shape, dtype, "T.view")


def _reshaped_view(src, shape, dtype, what: str):
    if not isinstance(src, ir.Buffer):
        raise error(f"{what}: {_b.describe(src)} is not a tensor")
    if src.scope == "fragment":
        return _fragment_view(src, shape, dtype, what)
    if src.scope == "shared" and what == "T.view":
        return _shared_view(src, shape, dtype)
    if src.scope != "global":
        raise error(f"{what} of the {src.scope} buffer {src.name} is not supported yet: the compiler plans and "
                    "checks each tile by its own shape, and a second shape over its memory would hide accesses "
                    "from those analyses. Global tensors can be reshaped; for a tile, T.copy it into one of "
                    "the shape wanted")
    if laid_out(src) is not None:
        raise error(f"{what} of {src.name}, which has a layout (T.annotate_layout), is not supported: its elements "
                    "do not lie in row-major order")
    base = src.attrs.get("view_of", src) if src.data is not None else src
    if base.data is not None:
        raise error(f"{what}: {src.name} is a tensor made from a pointer (T.make_tensor); give it the shape "
                    "wanted there")
    dt, dims, new_n, old_n = _view_shape(src, shape, dtype, what)
    if dt != src.dtype:
        raise error(f"{what}: {src.name} as {dt.name} (it holds {src.dtype.name}) is not supported yet: "
                    "views keep the tensor's dtype (T.reinterpret converts single values)")
    if new_n != old_n:
        raise error(f"{what}: {src.name} has {old_n} elements and the shape asked for {new_n}; a reshaped "
                    "view keeps every element")
    return view_tensor(_b.TensorData(base), dims, dt)


def _view_shape(src: ir.Buffer, shape, dtype, what: str) -> tuple:
    """``(dtype, dims, elements, src's elements)`` of a view of ``src`` asked for with ``shape`` and
    ``dtype`` (None: ``src``'s); both shapes must be constants."""
    dt = src.dtype if dtype is None else _dtype(dtype, what)
    dims = _tensor_dims(src.shape if shape is None else shape, what, dt)
    new_n, old_n = (math.prod(ir.const_int(d) or 0 for d in ds) for ds in (dims, src.shape))
    if not new_n or not old_n:
        raise error(f"{what}: both shapes must be known when the kernel is compiled")
    return dt, dims, new_n, old_n


def _shared_view(src: ir.Buffer, shape, dtype) -> ir.Buffer:
    """``T.view(S, shape, dtype)`` of a shared tile: TileLang's view shares ``S``'s bytes, to reuse
    shared memory. Here it is checked as a tile of its own (``ir.records.SharedView``): the same
    where no value passes between the two names, and ``verify_shared_views`` refuses a program where
    one would (what one name reads of the other's writes would depend on each tile's layout);
    ``share_view_storage`` then lays it over ``S``'s bytes where the syncs can order the two."""
    dt, dims, new_n, _ = _view_shape(src, shape, dtype, f"T.view of the shared tile {src.name}")
    if src.attrs.get(ir.SHARED_VIEW) is not None:
        src = src.attrs[ir.SHARED_VIEW].source  # a view of a view: of the tile itself
    if dt.bytes_for(new_n) > src.dtype.bytes_for(src.numel):
        raise error(f"T.view of the shared tile {src.name}: the view takes {dt.bytes_for(new_n)} bytes "
                    f"({'x'.join(map(str, (ir.const_int(d) for d in dims)))} {dt.name}), more than the tile's "
                    f"{src.dtype.bytes_for(src.numel)}")
    view_tile = _alloc(dims, dt, "shared")
    view_tile.attrs[ir.SHARED_VIEW] = SharedView(src, _b.current().loc)
    return view_tile


def _fragment_view(src: ir.Buffer, shape, dtype, what: str) -> ir.Buffer:
    """A view of a fragment (``frontend.fragment_views``): a buffer no statement allocates, whose
    element accesses and reductions the front end turns into the fragment's."""
    if _b.current().fragment_views.get(src) is not None:
        src = _b.current().fragment_views[src].base  # a view of a view: of the fragment itself
    if shape is None:
        raise error(f"{what} of the fragment {src.name} needs the shape to see it with")
    if dtype is not None and _dtype(dtype, what) != src.dtype:
        raise error(f"{what}: {src.name} as {_dtype(dtype, what).name} (it holds {src.dtype.name}) is not "
                    "supported: a view of a fragment keeps its dtype")
    dims = _tensor_dims(shape, what, src.dtype)
    new = [ir.const_int(d) for d in dims]
    if None in new:
        raise error(f"{what}: a view of the fragment {src.name} needs a shape known when the kernel is built")
    if math.prod(new) != math.prod(src.static_shape()):
        raise error(f"{what}: {src.name} has {math.prod(src.static_shape())} elements and the shape asked for "
                    f"{math.prod(new)}; a reshaped view keeps every element")
    view = ir.Buffer(f"{src.name}_view", tuple(ir.const(n) for n in new), src.dtype, "fragment",
                     loc=_b.current().loc)
    _b.current().fragment_views[view] = FragmentView.of(view, src)
    return view


def make_tensor(ptr, shape, dtype=float32, strides=None):
    """A global tensor whose address is loaded inside the kernel (``src_ptrs[0]``)."""
    dt = _dtype(dtype, "T.make_tensor")
    shape = _tensor_dims(shape, "T.make_tensor", dt)
    if strides is not None:
        strides = tuple(_b.integer(s, f"T.make_tensor: stride {i}") for i, s in enumerate(_shape(strides)))
        if len(strides) != len(shape):
            raise error(f"T.make_tensor: shape and strides differ in rank ({len(shape)} and {len(strides)})")
    if not isinstance(ptr, ir.Expr) or ptr.dtype.kind not in ("handle", "int", "uint"):
        raise error(f"T.make_tensor: the pointer must be a kernel value (e.g. ptrs[0] of a T.ptr tensor), "
                    f"not {_b.describe(ptr)}")
    buf = ir.Buffer("tensor", shape, dt, "global", strides=strides,
                    data=ptr, attrs={"device_bound": True}, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


@opens_thread_scope
def ws(*warpgroups) -> WarpGroups:
    """``with T.ws(1):`` -- only warpgroup 1 (threads 128..255) runs the body; ``T.ws(0, 1)`` two
    consecutive warpgroups. TileLang's warp specialisation written by hand: the groups share data
    through shared memory and the mbarriers the program arrives and waits on."""
    if not warpgroups:
        raise error("T.ws needs the warpgroup(s) that run its body, e.g. T.ws(0)")
    groups = []
    for g in warpgroups:
        n = None if isinstance(g, _py_bool) else ir.const_int(_b.integer(g, "T.ws: a warpgroup"))
        if n is None or n < 0:
            raise error(f"T.ws: a warpgroup is a constant number from 0, got {_b.describe(g)}")
        groups.append(n)
    return WarpGroups(tuple(groups))


WarpSpecialize = ws  # TileLang's long name
