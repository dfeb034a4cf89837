"""``import tileworkbench.language as T`` — the tile DSL users write kernels in.

Names and signatures follow TileLang. Each function checks its arguments, builds IR nodes and
emits them through :mod:`.builder`; the meaning of the nodes is fixed by the passes.
"""

from __future__ import annotations

import builtins as _builtins
from dataclasses import dataclass, field

from .. import dtypes as _dt
from ..dtypes import DType
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


def Tensor(shape, dtype=float32) -> TensorSpec:  # noqa: N802
    return TensorSpec(_shape(shape), _dt.as_dtype(dtype))


Buffer = Tensor


def StridedTensor(shape, strides, dtype=float32) -> TensorSpec:  # noqa: N802
    shape, strides = _shape(shape), _shape(strides)
    if len(shape) != len(strides):
        raise error(f"T.StridedTensor: shape {shape} and strides {strides} differ in rank")
    return TensorSpec(shape, _dt.as_dtype(dtype), strides)


def prim_func(fn):
    """Parse ``fn`` into a :class:`tileworkbench.ir.PrimFunc` (the front end does the work)."""
    from ..frontend import parse

    return parse(fn)


# ---- kernel and thread bindings ----------------------------------------------------------------


@dataclass
class KernelSpec:
    grid: tuple
    threads: int


def Kernel(*grid, threads=128, **unsupported):  # noqa: N802
    if unsupported:
        raise error(f"T.Kernel: unsupported keyword(s) {', '.join(unsupported)}")
    if isinstance(threads, (list, tuple)):
        if len(threads) == 1 or all(ir.const_int(t) == 1 for t in threads[1:]):
            threads = threads[0]
        else:
            raise error("T.Kernel: only one-dimensional thread blocks are supported (threads=N)")
    if ir.const_int(threads) is None or not 1 <= ir.const_int(threads) <= 1024:
        raise error(f"T.Kernel: threads must be a constant between 1 and 1024, got {threads!r}")
    if len(grid) > 3:
        raise error(f"T.Kernel takes at most 3 grid dimensions, got {len(grid)}")
    return KernelSpec(tuple(ir.as_expr(g) for g in grid) or (ir.const(1),), ir.const_int(threads))


def get_thread_binding(dim: int = 0):
    b = _b.current()
    if dim != 0:
        raise error("only threadIdx.x exists: thread blocks are one-dimensional")
    return b.launch.thread_var


def use_swizzle(panel_size: int = 10, order: str = "row", enable: bool = True):
    """Visit thread blocks in panels of ``panel_size`` block rows, so blocks that run at the same
    time share tiles of A and B in L2 (TileLang's rasterisation). ``enable=False`` keeps the
    hardware order (also for GEMMs, which are rasterised automatically otherwise)."""
    if order != "row":
        raise error("T.use_swizzle: only order='row' is supported")
    n = ir.const_int(panel_size)
    if enable and (n is None or n < 1):
        raise error(f"T.use_swizzle: panel_size must be a positive constant, got {panel_size!r}")
    _b.current().launch.raster_request = n if enable else 0


def get_block_binding(dim: int = 0):
    return _b.current().launch.block_vars[dim]


# ---- allocation --------------------------------------------------------------------------------


def _alloc(shape, dtype, scope: str) -> ir.Buffer:
    shape = tuple(ir.as_expr(s) for s in _shape(shape))
    if any(ir.const_int(s) is None or ir.const_int(s) <= 0 for s in shape):
        raise error(f"{scope} buffers need positive constant shapes, got {shape}")
    dtype = _dt.as_dtype(dtype)
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
        _b.current().emit(ir.BufferStore(buf, (ir.const(0),), ir.cast(init, buf.dtype)))
    return buf


def alloc_barrier(arrive_count) -> ir.Buffer:
    """``T.alloc_barrier(128)`` or ``T.alloc_barrier([32] * 8)``: mbarriers with init counts."""
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    if not counts or any(ir.const_int(c) is None or ir.const_int(c) <= 0 for c in counts):
        raise error(f"T.alloc_barrier needs positive constant arrive counts, got {arrive_count!r}")
    buf = ir.Buffer("mbar", (ir.const(len(counts)),), _dt.uint64, "barrier",
                    attrs={"counts": [ir.const_int(c) for c in counts]}, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


def make_tensor(ptr, shape, dtype=float32, strides=None):
    """A global tensor whose address is loaded inside the kernel (``src_ptrs[0]``)."""
    shape = tuple(ir.as_expr(s) for s in _shape(shape))
    if strides is not None:
        strides = tuple(ir.as_expr(s) for s in _shape(strides))
    buf = ir.Buffer("tensor", shape, _dt.as_dtype(dtype), "global", strides=strides,
                    data=ir.as_expr(ptr), attrs={"device_bound": True}, loc=_b.current().loc)
    _b.current().emit(ir.Allocate(buf))
    return buf


# ---- loops -------------------------------------------------------------------------------------


@dataclass
class LoopSpec:
    kind: str
    extents: tuple
    starts: tuple
    annotations: dict = field(default_factory=dict)


def _range_args(args, fn):
    if len(args) == 1:
        return (ir.const(0),), (ir.as_expr(args[0]),)
    if len(args) == 2:
        start, stop = ir.as_expr(args[0]), ir.as_expr(args[1])
        return (start,), (stop - start,)
    raise error(f"{fn} takes (extent) or (start, stop)")


def Parallel(*extents, coalesced_width=None):  # noqa: N802
    if not extents:
        raise error("T.Parallel needs at least one extent")
    return LoopSpec("parallel", tuple(ir.as_expr(e) for e in extents),
                    tuple(ir.const(0) for _ in extents))


def serial(*args, annotations=None):
    starts, extents = _range_args(args, "T.serial")
    return LoopSpec("serial", extents, starts, dict(annotations or {}))


def unroll(*args, explicit=False, unroll_factor=None):
    starts, extents = _range_args(args, "T.unroll")
    return LoopSpec("unrolled", extents, starts)


def Pipelined(*args, num_stages=0, order=None, stage=None, sync=None, group=None):  # noqa: N802
    starts, extents = _range_args(args, "T.Pipelined")
    if ir.const_int(num_stages) is None or ir.const_int(num_stages) < 0:
        raise error(f"T.Pipelined: num_stages must be a non-negative constant, got {num_stages!r}")
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
        n = ir.const_int(leader_scope_threads)
        if n is None or n <= 0 or n % 32 != 0:
            raise error(f"leader_scope_threads must be a positive multiple of 32, got {leader_scope_threads!r}")
        leader_scope_threads = n
    _b.current().emit(ir.TmaCopy(s, d, barrier, leader_scope_threads))


def fill(buffer, value):
    region = as_region(buffer, "T.fill destination")
    if isinstance(region, _b.Point):
        raise error("T.fill needs a buffer or a slice, not a single element")
    _b.current().emit(ir.Fill(region, ir.cast(value, region.buffer.dtype)))


def clear(buffer):
    region = as_region(buffer, "T.clear destination")
    fill(buffer, 0.0 if region.buffer.dtype.is_float else 0)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False,  # noqa: N803
         k_pack=1, wg_wait=0):
    """``C += A @ B`` on tiles: A, B in shared memory (or fragments), C a float32 fragment."""
    a, b, c = (as_region(x, f"T.gemm {n}") for x, n in ((A, "A"), (B, "B"), (C, "C")))
    for r, n in ((a, "A"), (b, "B"), (c, "C")):
        if isinstance(r, _b.Point):
            raise error(f"T.gemm {n} must be a whole buffer or a slice")
        if r.static_extents() is None or len(_b.unit_dropped(r.extents)) != 2:
            raise error(f"T.gemm {n} must be a 2-D tile with constant extents")
    (m, ka), (kb, n), (mc, nc) = (
        [ir.const_int(e) for e in _b.unit_dropped(r.extents)] for r in (a, b, c)
    )
    if transpose_A:
        m, ka = ka, m
    if transpose_B:
        kb, n = n, kb
    if ka != kb or m != mc or n != nc:
        raise error(f"T.gemm: shapes do not agree: A is {m}x{ka}, B is {kb}x{n}, C is {mc}x{nc}")
    if c.buffer.scope not in ("fragment", "local"):
        raise error(f"T.gemm: the accumulator C must be a fragment, not {c.buffer.scope} memory")
    if a.buffer.dtype != b.buffer.dtype:
        raise error(f"T.gemm: A and B must have one dtype ({a.buffer.dtype} vs {b.buffer.dtype})")
    _b.current().emit(ir.Gemm(a, b, c, _py_bool(transpose_A), _py_bool(transpose_B), _py_bool(clear_accum)))


def _reduce(kind):
    def reduce(buffer, out, dim=-1, clear=True):
        if not isinstance(buffer, ir.Buffer) or not isinstance(out, ir.Buffer):
            raise error(f"T.reduce_{kind} takes whole buffers")
        nd = buffer.ndim
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
    _b.current().emit(ir.BarrierWait(bar, ir.as_expr(parity)))


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
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (ir.as_expr(a) + b - 1) // b


def cast(value, dtype):
    return ir.cast(value, _dt.as_dtype(dtype))


def if_then_else(cond, a, b):
    a, b = ir.as_expr(a), ir.as_expr(b)
    dtype = ir.result_dtype("+", a.dtype, b.dtype)
    return ir.Select(ir.as_expr(cond), ir.cast(a, dtype), ir.cast(b, dtype), dtype)


def _math(name, float_only=True):
    def fn(x):
        x = ir.as_expr(x)
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
    x = ir.as_expr(x)
    return ir.Call("abs", (x,), x.dtype)


def max(a, b):  # noqa: A001
    return ir.binop("max", a, b)


def min(a, b):  # noqa: A001
    return ir.binop("min", a, b)


def infinity(dtype):
    return ir.Const(_builtin_float("inf"), _dt.as_dtype(dtype))


def max_value(dtype):
    d = _dt.as_dtype(dtype)
    if d.is_float:
        return ir.Const({"float16": 65504.0, "bfloat16": 3.3895313892515355e38}.get(d.name, 3.4028234663852886e38), d)
    return ir.Const(2 ** (d.bits - 1) - 1 if d.kind == "int" else 2**d.bits - 1, d)


def min_value(dtype):
    d = _dt.as_dtype(dtype)
    if d.is_float:
        return ir.Const(-max_value(d).value, d)
    return ir.Const(-(2 ** (d.bits - 1)) if d.kind == "int" else 0, d)


_builtin_float = _builtins.float
