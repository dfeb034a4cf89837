"""How ``lower_tile_ops`` lowers ``T.reduce_*``.

Rows of a fragment into a fragment that has those rows' layout (``infer_fragment_layouts`` gives
the result of ``T.reduce_*(x, s, dim=1)`` the rows of ``x``'s layout, ``ir.fragment_parts.ProjectedLayout``)
stay in registers:
  1. each thread combines the elements of each row it holds into its own partial, one slot per row;
  2. the threads of a warp that hold one row combine their partials with ``shfl.xor`` (the
     layout's ``lane_masks``: the four lanes of a wgmma or mma.sync accumulator row, up to 32 lanes
     of a blocked one);
  3. where several warps hold parts of one row (``warp_sharers``: mma.sync warps side by side, a
     blocked row over more than 32 threads), one lane of each warp writes its row's value to a
     shared scratch tile, and after a block barrier every thread combines the warps' values;
  4. the result is the destination (or, with ``clear=False``, combined with what it held).
Every thread holding a row ends with its value, which is what later loops over the row read.
Runs of a tensor-core accumulator's rows (``ir.Reduce.segment``) into a fragment with
``ir.fragment_parts.SegmentsLayout`` go the same way, a partial per row and run (steps 1, 2 and 4).
Anything else (shared buffers, layouts whose slots need a guard, 1-D sources) goes through a
shared scratch copy of the source, each destination element computed from its row there.
"""

from __future__ import annotations

import math

from ... import dtypes
from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.fragment_parts import ProjectedLayout, SegmentsLayout, project
from .fragments import EACH_WARP, PARTIAL_ROWS

FULL_WARP = ir.Raw("0xffffffffu")


def _abs(x):
    return ir.Call("abs", (x,), x.dtype)


def _max(a, b):
    return ir.binop("max", a, b)


def _min(a, b):
    return ir.binop("min", a, b)


def _add(a, b):
    return a + b


def _bits(op):
    return lambda a, b: ir.binop(op, a, b)


def _lowest(t):
    return ir.Const(-math.inf, t) if t.is_float else ir.Const(dtypes.value_range(t)[0], t)


def _highest(t):
    return ir.Const(math.inf, t) if t.is_float else ir.Const(dtypes.value_range(t)[1], t)


# kind -> (initial value of a dtype, how an element joins a partial, how two partials join)
REDUCERS = {
    "sum": (lambda t: ir.cast(ir.const(0), t), _add, _add),
    "abssum": (lambda t: ir.cast(ir.const(0), t), lambda a, x: a + _abs(x), _add),
    "max": (_lowest, _max, _max),
    "min": (_highest, _min, _min),
    "absmax": (lambda t: ir.cast(ir.const(0), t), lambda a, x: _max(a, _abs(x)), _max),
    # bitwise, of integers only (the front end checks): all ones, and zero, to start from
    "bitand": (lambda t: ir.cast(ir.const(-1), t), _bits("&"), _bits("&")),
    "bitor": (lambda t: ir.cast(ir.const(0), t), _bits("|"), _bits("|")),
    "bitxor": (lambda t: ir.cast(ir.const(0), t), _bits("^"), _bits("^")),
}
BITWISE_KINDS = ("bitand", "bitor", "bitxor")

# 64-bit types and uint32 keep their own type; narrower ones are widened (below)
_WIDE = {"float64": dtypes.float64, "int64": dtypes.int64, "uint64": dtypes.uint64, "uint32": dtypes.uint32}


def accumulator(dtype: dtypes.DType) -> dtypes.DType:
    """The type partials (reductions) and running values (scans) of ``dtype`` are combined in:
    float32 for 32-bit and narrower floats, int32 for narrower integers, the type itself for 64-bit
    types and uint32 (whose values int32 cannot hold)."""
    if dtype.name in _WIDE:
        return _WIDE[dtype.name]
    return dtypes.float32 if dtype.is_float else dtypes.int32


def _accumulator_dtype(src: ir.Buffer):
    return accumulator(src.dtype)


def loop_nest(shape, make_body, kind="parallel", loc=None, annotations=None):
    """``for i0, i1, ... in T.Parallel(*shape): make_body((i0, i1, ...))``."""
    loop_vars = [ir.Var(f"i{n}") for n in range(len(shape))]
    body = make_body(tuple(loop_vars))
    for depth, (var, ext) in reversed(list(enumerate(zip(loop_vars, shape)))):
        ann = dict(annotations or {}) if depth == 0 else {}
        body = ir.For(var, ir.const(ext), body, kind, annotations=ann, loc=loc)
    return body


def in_registers(node: ir.Reduce, threads: int) -> bool:
    """The reduction is rows of a fragment into a fragment with those rows' layout (module doc)."""
    src, dst = node.src, node.dst
    if src.scope != "fragment" or dst.scope != "fragment" or src.ndim != 2 or node.dim != 1:
        return False
    layout = dst.attrs.get("layout")
    src_layout = src.attrs.get("layout")
    if node.segment is not None:  # runs of a tensor-core accumulator's rows (infer_fragment_layouts)
        return layout == SegmentsLayout(src_layout, node.segment) and layout.threads == threads
    if not isinstance(layout, ProjectedLayout) or isinstance(src_layout, ProjectedLayout) or src_layout is None:
        return False
    try:
        if project(src_layout, (0,)) != layout:  # the rows of src, as dst holds them
            return False
    except ValueError:
        return False
    # Every lane of a warp must take part in each shuffle: no slot may be guarded.
    _, guard = layout.forward(ir.Var("t"), ir.Var("r"))
    return guard is None and threads % 32 == 0 and layout.threads == threads


def reduce_in_registers(node: ir.Reduce, tid: ir.Var) -> ir.Stmt:
    src, dst = node.src, node.dst
    layout: ProjectedLayout | SegmentsLayout = dst.attrs["layout"]
    acc_dtype = _accumulator_dtype(src)
    init, join, merge = REDUCERS[node.kind]
    part = ir.Buffer(f"{dst.name}_part", dst.shape, acc_dtype, "fragment", attrs={"layout": layout}, loc=node.loc)
    rows = dst.static_shape()

    def start(idx):
        return ir.BufferStore(part, idx, init(acc_dtype))

    def accumulate(idx):  # idx = (row, column) of the source; with runs, (row, the column's run) of part
        row = idx[:1] if node.segment is None else (idx[0], idx[1] // node.segment)
        return ir.BufferStore(part, row, join(ir.BufferLoad(part, row, acc_dtype),
                                              ir.cast(ir.BufferLoad(src, idx, src.dtype), acc_dtype)))

    def across_lanes(idx):
        steps = []
        for mask in layout.lane_masks:
            mine = ir.BufferLoad(part, idx, acc_dtype)
            theirs = ir.Call(ir.SHFL_XOR_SYNC, (FULL_WARP, mine, ir.const(mask)), acc_dtype)
            steps.append(ir.BufferStore(part, idx, merge(mine, theirs)))
        return ir.seq(steps)

    out = [ir.Allocate(part), loop_nest(rows, start, loc=node.loc),
           loop_nest(src.static_shape(), accumulate, loc=node.loc, annotations={PARTIAL_ROWS: True})]
    if layout.lane_masks:
        out.append(loop_nest(rows, across_lanes, loc=node.loc))
    if layout.warp_sharers > 1:
        out += _across_warps(node, layout, part, acc_dtype, merge, tid)

    def finish(idx):
        value = ir.BufferLoad(part, idx, acc_dtype)
        if not node.clear:
            value = merge(ir.cast(ir.BufferLoad(dst, idx, dst.dtype), acc_dtype), value)
        return ir.BufferStore(dst, idx, ir.cast(value, dst.dtype))

    out.append(loop_nest(rows, finish, loc=node.loc))
    return ir.seq(out)


def _across_warps(node, layout, part, acc_dtype, merge, tid) -> list:
    """Step 3 of the module doc: one lane per warp and row writes, a barrier, every thread reads."""
    warps = layout.warp_sharers
    (rows,) = part.static_shape()
    scratch = ir.Buffer(f"{node.dst.name}_warps", (ir.const(warps), ir.const(rows)), acc_dtype, "shared",
                        attrs={"swizzle": 0, ir.SCRATCH: True}, loc=node.loc)
    writer = ir.cmp("==", tid % (1 << len(layout.lane_masks)), 0)

    def write(idx):
        store = ir.BufferStore(scratch, (layout.warp_slot(tid),) + idx, ir.BufferLoad(part, idx, acc_dtype))
        return ir.IfThenElse(writer, store)

    def read(idx):
        value = ir.BufferLoad(scratch, (ir.const(0),) + idx, acc_dtype)
        for w in range(1, warps):
            value = merge(value, ir.BufferLoad(scratch, (ir.const(w),) + idx, acc_dtype))
        return ir.BufferStore(part, idx, value)

    # The first barrier: the scratch may still be read by the same reduction's last iteration.
    return [ir.Allocate(scratch), ir.SyncThreads(),
            loop_nest((rows,), write, loc=node.loc, annotations={EACH_WARP: True}), ir.SyncThreads(),
            loop_nest((rows,), read, loc=node.loc)]


def reduce_through_shared(node: ir.Reduce) -> ir.Stmt:
    """Everything else: a shared copy of the source; each destination element computed from it (by
    every thread, where the destination is each thread's own: a fragment ``localize_read_fragments``
    made a local array)."""
    src, dst = node.src, node.dst
    if src.scope not in ("fragment", "shared") or dst.scope not in ("fragment", "shared", "local"):
        raise CompileError("T.reduce_* reduces a fragment or shared buffer into one", node.loc)
    scratch = ir.Buffer(f"{src.name}_reduce_scratch", src.shape, src.dtype, "shared",
                        attrs={"swizzle": 0, ir.SCRATCH: True}, loc=node.loc)
    acc_dtype = _accumulator_dtype(src)
    init, join, _ = REDUCERS[node.kind]

    def to_scratch(idx):
        return ir.BufferStore(scratch, idx, ir.BufferLoad(src, idx, src.dtype))

    def reduce_row(out_idx):
        acc = ir.Var(f"{node.kind}_acc", acc_dtype)
        r = ir.Var("r")
        if node.segment is not None:  # the run out_idx names along the dimension
            full = list(out_idx)
            full[node.dim] = out_idx[node.dim] * node.segment + r
        else:
            full = list(out_idx) if src.ndim > 1 else []  # a 1-D source reduces into a 1-element dst
            full.insert(node.dim, r)
        start = init(acc_dtype) if node.clear else ir.cast(ir.BufferLoad(dst, out_idx, dst.dtype), acc_dtype)
        value = ir.cast(ir.BufferLoad(scratch, tuple(full), src.dtype), acc_dtype)
        extent = src.shape[node.dim] if node.segment is None else ir.const(node.segment)
        return ir.seq([
            ir.LetStmt(acc, start),
            ir.For(r, extent, ir.Assign(acc, join(acc, value)), "serial"),
            ir.BufferStore(dst, tuple(out_idx), ir.cast(acc, dst.dtype)),
        ])

    out_shape = [s for i, s in enumerate(src.static_shape()) if i != node.dim] or [1]
    if node.segment is not None:  # one result a run
        out_shape = list(src.static_shape())
        out_shape[node.dim] //= node.segment
    return ir.seq([
        ir.Allocate(scratch),
        ir.SyncThreads(),
        loop_nest(src.static_shape(), to_scratch, loc=node.loc),
        ir.SyncThreads(),
        # a per-thread destination (localize_read_fragments): every thread reduces every element
        loop_nest(out_shape, reduce_row, kind="serial" if dst.scope == "local" else "parallel", loc=node.loc),
        ir.SyncThreads(),
    ])
