"""``import tileworkbench.language as T`` — the tile DSL users write kernels in.

Names and signatures follow TileLang. Each function checks its arguments, builds IR nodes and
emits them through :mod:`.builder`; the meaning of the nodes is fixed by the passes.
"""

from __future__ import annotations

import builtins as _builtins
from dataclasses import dataclass, field

from .. import dtypes as _dt
from ..dtypes import DType
from ..errors import CompileError
from ..ir import nodes as ir
from . import builder as _b
from .builder import as_barrier, as_region, error, resolve_regions

_py_bool = _builtins.bool

# ---- data types ----------------------------------------------------------------------------
float16 = _dt.float16
bfloat16 = _dt.bfloat16
float32 = _dt.float32
float64 = _dt.float64
int8 = _dt.int8
int16 = _dt.int16
int32 = _dt.int32
int64 = _dt.int64
uint8 = _dt.uint8
uint16 = _dt.uint16
uint32 = _dt.uint32
uint64 = _dt.uint64
bool = _dt.boolean  # noqa: A001 - TileLang spells it T.bool
float8_e4m3 = _dt.float8_e4m3
float8_e5m2 = _dt.float8_e5m2
float4_e2m1fn = _dt.float4_e2m1fn
float4_e2m1_unpacked = _dt.float4_e2m1_unpacked
ptr = _dt.handle
handle = _dt.handle
half = float16
float = float32  # noqa: A001


# ---- signatures ------------------------------------------------------------------------------


@dataclass
class TensorSpec:
    """The annotation ``T.Tensor(shape, dtype)`` / ``T.StridedTensor(shape, strides, dtype)``."""

    shape: tuple
    dtype: DType
    strides: tuple | None = None


def _shape(shape) -> tuple:
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    return (shape,)


# A tensor may be far larger than 2^31 elements (kernels index it with 64-bit offsets where
# needed), but not larger than any machine: 2^48 bytes (256 TiB) is past every GPU's memory.
MAX_TENSOR_BYTES = 2**48


def _tensor_dims(shape, what: str, dtype: DType) -> tuple:
    dims = tuple(_b.integer(d, f"{what}: dimension {i}") for i, d in enumerate(_shape(shape)))
    if not dims:
        raise error(f"{what}: a tensor needs at least one dimension")
    total = 1
    for i, d in enumerate(dims):
        n = ir.const_int(d)
        if n is not None and n < 1:
            raise error(f"{what}: dimension {i} must be positive, got {n}")
        total *= n if n is not None else 1
    if dtype.bytes_for(total) > MAX_TENSOR_BYTES:
        raise error(f"{what}: a tensor of shape {tuple(ir.const_int(d) for d in dims)} is {dtype.bytes_for(total)} bytes, "
                    f"more than any GPU holds")
    return dims


def _dtype(value, what: str) -> DType:
    try:
        return _dt.as_dtype(value)
    except CompileError as err:
        raise error(f"{what}: {err.message}") from None


def Tensor(shape, dtype=float32) -> TensorSpec:  # noqa: N802
    dt = _dtype(dtype, "T.Tensor")
    return TensorSpec(_tensor_dims(shape, "T.Tensor", dt), dt)


Buffer = Tensor


def StridedTensor(shape, strides, dtype=float32) -> TensorSpec:  # noqa: N802
    dt = _dtype(dtype, "T.StridedTensor")
    shape, strides = _shape(shape), _shape(strides)
    if len(shape) != len(strides):
        raise error(f"T.StridedTensor: shape {shape} and strides {strides} differ in rank")
    strides = tuple(_b.integer(s, f"T.StridedTensor: stride {i}") for i, s in enumerate(strides))
    for i, st in enumerate(strides):
        n = ir.const_int(st)
        if n is not None and n < 1:
            raise error(f"T.StridedTensor: stride {i} must be positive, got {n}")
    return TensorSpec(_tensor_dims(shape, "T.StridedTensor", dt), dt, strides)


def prim_func(fn):
    """Parse ``fn`` into a :class:`tileworkbench.ir.PrimFunc` (the front end does the work)."""
    from ..frontend import parse

    return parse(fn)


# ---- kernel and thread bindings ----------------------------------------------------------------


@dataclass
class KernelSpec:
    grid: tuple
    threads: int


# What CUDA allows: gridDim.x up to 2^31 - 1, gridDim.y and .z up to 65535.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


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


# ---- loops -------------------------------------------------------------------------------------


@dataclass
class LoopSpec:
    kind: str
    extents: tuple
    starts: tuple
    annotations: dict = field(default_factory=dict)

    def __iter__(self):
        # A Python helper the kernel calls runs as Python: its `for` cannot become a kernel loop.
        raise error(f"a T.{self.kind} loop is only understood in the kernel's own body, not in a Python helper "
                    "it calls (helpers may call T.copy, T.fill, ... but not loop); write the loop in the kernel")


def _loop_extent(extent: ir.Expr, what: str) -> ir.Expr:
    """A trip count the generated ``int`` loop counter can run through."""
    n = ir.const_int(extent)
    if n is not None and n < 0:
        raise error(f"{what} is {n}: a loop cannot run a negative number of times")
    if n is not None and n > _b.INT32_MAX:
        raise error(f"{what} is {n}, more than a loop's 32-bit counter takes (2^31 - 1); split the loop")
    return extent


def _range_args(args, fn):
    if len(args) == 1:
        return (ir.const(0),), (_loop_extent(_b.integer(args[0], f"{fn}: the extent"), f"{fn}: the extent"),)
    if len(args) == 2:
        start, stop = _b.integer(args[0], f"{fn}: the start"), _b.integer(args[1], f"{fn}: the stop")
        for bound, name in ((start, "start"), (stop, "stop")):
            n = ir.const_int(bound)
            if n is not None and not -_b.INT32_MAX - 1 <= n <= _b.INT32_MAX:
                raise error(f"{fn}: the {name} {n} does not fit the loop's 32-bit counter")
        return (start,), (_loop_extent(stop - start, f"{fn}: the trip count"),)
    raise error(f"{fn} takes (extent) or (start, stop)")


def Parallel(*extents, coalesced_width=None):  # noqa: N802
    if not extents:
        raise error("T.Parallel needs at least one extent")
    checked = tuple(_loop_extent(_b.integer(e, f"T.Parallel: extent {i}"), f"T.Parallel: extent {i}")
                    for i, e in enumerate(extents))
    return LoopSpec("parallel", checked, tuple(ir.const(0) for _ in extents))


def serial(*args, annotations=None):
    starts, extents = _range_args(args, "T.serial")
    return LoopSpec("serial", extents, starts, dict(annotations or {}))


def unroll(*args, explicit=False, unroll_factor=None):
    starts, extents = _range_args(args, "T.unroll")
    return LoopSpec("unrolled", extents, starts)


def Pipelined(*args, num_stages=0, order=None, stage=None, sync=None, group=None):  # noqa: N802
    starts, extents = _range_args(args, "T.Pipelined")
    if isinstance(num_stages, _py_bool) or ir.const_int(num_stages) is None or ir.const_int(num_stages) < 0:
        raise error(f"T.Pipelined: num_stages must be a non-negative constant, got {_b.describe(num_stages)}")
    if order is not None or stage is not None or group is not None:
        raise error("T.Pipelined: explicit order/stage/group are not supported; use num_stages")
    return LoopSpec("pipelined", extents, starts, {"num_stages": ir.const_int(num_stages)})


# ---- tile operations ---------------------------------------------------------------------------

_COPY_INSTRUCTIONS = ("tma", "sync", "cp_async", "auto", None)


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None,
         prefer_instruction=None, annotations=None, loop_layout=None):
    """Copy between global, shared, fragment and local memory (any rank, tile origins, slices)."""
    instruction = prefer_instruction
    if annotations and "prefer_instruction" in annotations:
        instruction = annotations["prefer_instruction"]  # the annotation wins, as in TileLang
    if instruction not in _COPY_INSTRUCTIONS:
        raise error(
            f"T.copy: unknown prefer_instruction {instruction!r}; "
            "expected 'tma', 'sync', 'cp_async' or 'auto'"
        )
    if instruction == "auto":
        instruction = None
    if disable_tma and instruction == "tma":
        raise error("T.copy: prefer_instruction='tma' contradicts disable_tma=True")
    s, d = resolve_regions(as_region(src, "T.copy source"), as_region(dst, "T.copy destination"),
                           "T.copy")
    _b.current().emit(ir.Copy(s, d, instruction))


def tma_copy(src, dst, barrier=None, leader_scope_threads=None, **unsupported):
    """A TMA copy with user-managed synchronisation.

    Load (global -> shared): one elected thread of the leader scope does ``expect_tx(bytes)`` on
    ``barrier`` and issues the TMA; nobody arrives or waits. Store (shared -> global): the elected
    thread issues the bulk store and commits the bulk group; wait with ``T.tma_store_wait``.
    """
    if unsupported:
        raise error(f"T.tma_copy: unsupported keyword(s) {', '.join(unsupported)}")
    s, d = resolve_regions(as_region(src, "T.tma_copy source"),
                           as_region(dst, "T.tma_copy destination"), "T.tma_copy")
    scopes = (s.buffer.scope, d.buffer.scope)
    if scopes == ("global", "shared"):
        if barrier is None:
            raise error("T.tma_copy: a load from global to shared memory needs barrier=<mbarrier>")
        barrier = as_barrier(barrier)
    elif scopes == ("shared", "global"):
        if barrier is not None:
            raise error("T.tma_copy: a store (shared -> global) takes no barrier; "
                        "wait for it with T.tma_store_wait()")
    else:
        raise error(f"T.tma_copy copies global -> shared or shared -> global, not {scopes[0]} -> {scopes[1]}")
    if leader_scope_threads is not None:
        n = ir.const_int(leader_scope_threads) if not isinstance(leader_scope_threads, _py_bool) else None
        if n is None or n <= 0 or n % 32 != 0:
            raise error(f"leader_scope_threads must be a positive multiple of 32, got "
                        f"{_b.describe(leader_scope_threads)}")
        leader_scope_threads = n
    _b.current().emit(ir.TmaCopy(s, d, barrier, leader_scope_threads))


def fill(buffer, value):
    region = as_region(buffer, "T.fill destination")
    if isinstance(region, _b.Point):
        raise error("T.fill needs a buffer or a slice, not a single element")
    value = _b.stored_value(value, region.buffer, "T.fill: the value")
    _b.current().emit(ir.Fill(region, ir.cast(value, region.buffer.dtype)))


def clear(buffer):
    region = as_region(buffer, "T.clear destination")
    fill(buffer, 0.0 if region.buffer.dtype.is_float else 0)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False,  # noqa: N803
         k_pack=1, wg_wait=0):
    """``C += A @ B`` on tiles: A and B whole shared tiles (float16 or bfloat16 for the tensor
    cores), C a whole float32 fragment. ``transpose_A`` reads A stored K x M, ``transpose_B`` B
    stored N x K. A in a fragment (register-A wgmma, attention's P @ V) is not supported yet."""
    a, b, c = (as_region(x, f"T.gemm {n}") for x, n in ((A, "A"), (B, "B"), (C, "C")))
    for r, n in ((a, "A"), (b, "B"), (c, "C")):
        if isinstance(r, _b.Point):
            raise error(f"T.gemm {n} must be a whole buffer or a slice")
        if r.static_extents() is None or len(_b.unit_dropped(r.extents)) != 2:
            raise error(f"T.gemm {n} must be a 2-D tile with constant extents")
    for r, n in ((a, "A"), (b, "B")):
        if r.buffer.scope == "fragment":
            raise error(f"T.gemm {n}: {r.buffer.name} is a fragment; T.gemm reads A and B from shared memory "
                        "(A from registers, as attention's P @ V does, is not supported yet: copy it to a "
                        "T.alloc_shared tile first)")
        if r.buffer.scope != "shared":
            raise error(f"T.gemm {n} must be a shared tile (T.alloc_shared), not {_b.describe(r.buffer)}")
        if not r.is_full:
            raise error(f"T.gemm {n} must be a whole shared tile; {r.buffer.name} is sliced here (allocate a "
                        f"tile of the operand's shape instead)")
    if c.buffer.scope != "fragment":
        raise error(f"T.gemm: the accumulator C must be a fragment (T.alloc_fragment), not "
                    f"{_b.describe(c.buffer)}")
    if not c.is_full:
        raise error(f"T.gemm C must be a whole fragment: a gemm into part of {c.buffer.name} is not supported "
                    f"(the accumulator's thread layout covers the whole tile); allocate a fragment of the "
                    f"gemm's shape and copy it where it belongs")
    if c.buffer.dtype.name != "float32":
        raise error(f"T.gemm accumulates in float32; {c.buffer.name} is {c.buffer.dtype.name}")
    (m, ka), (kb, n), (mc, nc) = (
        [ir.const_int(e) for e in _b.unit_dropped(r.extents)] for r in (a, b, c)
    )
    if transpose_A:
        m, ka = ka, m
    if transpose_B:
        kb, n = n, kb
    if ka != kb or m != mc or n != nc:
        raise error(f"T.gemm: shapes do not agree: A is {m}x{ka}, B is {kb}x{n}, C is {mc}x{nc}")
    if a.buffer.dtype != b.buffer.dtype:
        raise error(f"T.gemm: A and B must have one dtype ({a.buffer.dtype} vs {b.buffer.dtype})")
    _b.current().emit(ir.Gemm(a, b, c, _py_bool(transpose_A), _py_bool(transpose_B), _py_bool(clear_accum)))


def _reduce(kind):
    def reduce(buffer, out, dim=-1, clear=True):
        for value in (buffer, out):
            if not isinstance(value, ir.Buffer) or value.scope not in ("fragment", "shared"):
                raise error(f"T.reduce_{kind} reduces a whole fragment or shared buffer into another, "
                            f"not {_b.describe(value)}")
        nd = buffer.ndim
        dim = _b.constant_int(dim, f"T.reduce_{kind}: dim")
        d = dim + nd if dim < 0 else dim
        if not 0 <= d < nd:
            raise error(f"T.reduce_{kind}: dim {dim} out of range for a {nd}-D buffer")
        expect = [s for i, s in enumerate(buffer.static_shape()) if i != d] or [1]
        if list(out.static_shape()) != expect:
            raise error(f"T.reduce_{kind}: output shape {out.static_shape()} should be {tuple(expect)}")
        _b.current().emit(ir.Reduce(kind, buffer, out, d, _py_bool(clear)))

    reduce.__name__ = f"reduce_{kind}"
    return reduce


reduce_sum = _reduce("sum")
reduce_max = _reduce("max")
reduce_min = _reduce("min")
reduce_abssum = _reduce("abssum")
reduce_absmax = _reduce("absmax")


# ---- synchronisation -------------------------------------------------------------------------


def barrier_arrive(barrier=None, mbarrier=None):
    _b.current().emit(ir.BarrierArrive(as_barrier(_one(barrier, mbarrier, "barrier_arrive"))))


def mbarrier_arrive(mbarrier=None, barrier=None):
    barrier_arrive(barrier, mbarrier)


def barrier_wait(barrier=None, parity=None, mbarrier=None):
    bar = as_barrier(_one(barrier, mbarrier, "barrier_wait"))
    if parity is None:
        raise error("T.barrier_wait needs a parity (usually k % 2 in a loop, 0 outside)")
    parity = _b.integer(parity, "T.barrier_wait: the parity")
    if ir.const_int(parity) not in (None, 0, 1):
        raise error(f"T.barrier_wait: the parity is 0 or 1 (the phase's last bit), got {ir.const_int(parity)}")
    _b.current().emit(ir.BarrierWait(bar, parity))


def mbarrier_wait_parity(mbarrier=None, parity=None, barrier=None):
    barrier_wait(barrier, parity, mbarrier)


def _one(a, b, fn):
    if (a is None) == (b is None):
        raise error(f"T.{fn} needs exactly one barrier")
    return a if a is not None else b


def tma_store_wait(read=False):
    _b.current().emit(ir.TmaStoreWait(_py_bool(read)))


def sync_threads():
    _b.current().emit(ir.SyncThreads())


# ---- scalar helpers and math -----------------------------------------------------------------


def ceildiv(a, b):
    x, y = _b.integer(a, "T.ceildiv: the dividend"), _b.integer(b, "T.ceildiv: the divisor")
    if ir.const_int(y) is not None and ir.const_int(y) <= 0:
        raise error(f"T.ceildiv: the divisor must be positive, got {ir.const_int(y)}")
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (x + b - 1) // b


def cast(value, dtype):
    return ir.cast(_b.number(value, "T.cast: the value"), _dtype(dtype, "T.cast"))


def if_then_else(cond, a, b):
    cond = _b.number(cond, "T.if_then_else: the condition")
    a, b = _b.number(a, "T.if_then_else: the first value"), _b.number(b, "T.if_then_else: the second value")
    dtype = ir.result_dtype("+", a.dtype, b.dtype)
    return ir.Select(cond, ir.cast(a, dtype), ir.cast(b, dtype), dtype)


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
