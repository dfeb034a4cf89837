"""The kernel's launch and its memory: ``T.Kernel``, the block and thread bindings, block
rasterisation, and the allocations of shared, fragment, local and barrier memory."""

from __future__ import annotations

import builtins as _builtins

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.specs import KernelSpec, opens_kernel_scope
from ..ir import nodes as ir
from .types import _dtype, _shape, _tensor_dims, float32, int32

_py_bool = _builtins.bool


# What CUDA allows: gridDim.x up to 2^31 - 1, gridDim.y and .z up to 65535.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


@opens_kernel_scope
def Kernel(*grid, threads=128, **unsupported):  # noqa: N802
    if unsupported:
        raise error(f"T.Kernel: unsupported keyword(s) {', '.join(unsupported)}")
    if isinstance(threads, (list, tuple)):
        if len(threads) == 1 or all(ir.const_int(t) == 1 for t in threads[1:]):
            threads = threads[0]
        else:
            raise error("T.Kernel: only one-dimensional thread blocks are supported (threads=N)")
    if isinstance(threads, _py_bool) or ir.const_int(threads) is None or not 1 <= ir.const_int(threads) <= 1024:
        raise error(f"T.Kernel: threads must be a constant between 1 and 1024, got {_b.describe(threads)}")
    if len(grid) > 3:
        raise error(f"T.Kernel takes at most 3 grid dimensions, got {len(grid)}")
    dims = []
    for axis, g in enumerate(grid):
        what = f"T.Kernel: grid dimension {'xyz'[axis]}"
        e = _b.integer(g, what)
        n = ir.const_int(e)
        if n is not None and not 1 <= n <= GRID_LIMITS[axis]:
            raise error(f"{what} must be between 1 and {GRID_LIMITS[axis]} blocks (CUDA's limit), got {n}")
        dims.append(e)
    return KernelSpec(tuple(dims) or (ir.const(1),), ir.const_int(threads))


def get_thread_binding(dim: int = 0):
    launch = _b.launch("T.get_thread_binding()")
    if _b.constant_int(dim, "T.get_thread_binding: dim") != 0:
        raise error("only threadIdx.x exists: thread blocks are one-dimensional")
    return launch.thread_var


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


def get_block_binding(dim: int = 0):
    launch = _b.launch("T.get_block_binding()")
    d = _b.constant_int(dim, "T.get_block_binding: dim")
    if not 0 <= d < len(launch.block_vars):
        raise error(f"T.get_block_binding({d}): the grid has {len(launch.block_vars)} dimension(s), "
                    f"so dim is between 0 and {len(launch.block_vars) - 1}")
    return launch.block_vars[d]


# ---- allocation --------------------------------------------------------------------------------


_ALLOC_NAMES = {"shared": "T.alloc_shared", "fragment": "T.alloc_fragment", "local": "T.alloc_local"}


def _alloc(shape, dtype, scope: str) -> ir.Buffer:
    what = _ALLOC_NAMES[scope]
    dims = _shape(shape)
    if not dims:
        raise error(f"{what}: a buffer needs at least one dimension")
    shape = tuple(ir.const(_b.constant_int(s, f"{what}: dimension {i}", low=1)) for i, s in enumerate(dims))
    dtype = _dtype(dtype, what)
    if dtype.shared_only and scope != "shared":
        raise error(f"{dtype.name} can only live in shared memory")
    buf = ir.Buffer("buf", shape, dtype, scope, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


def alloc_shared(shape, dtype=float32, scope="shared.dyn"):
    return _alloc(shape, dtype, "shared")


def alloc_fragment(shape, dtype=float32, scope="local.fragment"):
    return _alloc(shape, dtype, "fragment")


def alloc_local(shape, dtype=float32, scope="local"):
    return _alloc(shape, dtype, "local")


def alloc_var(dtype=int32, init=None):
    buf = _alloc((1,), dtype, "local")
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
