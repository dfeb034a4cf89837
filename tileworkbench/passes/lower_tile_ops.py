"""lower_tile_ops: copies, fills, gemms and reductions become loops and header calls.

Expects: TMA already lowered (``lower_tma``), fragment layouts inferred.
Guarantees: no ``Copy``/``Fill``/``Gemm``/``Reduce`` remains. Instead:
  * copies between global and shared memory are ``T.Parallel`` loops of vector copies (up to 16
    bytes, when alignment and extents allow) or ``cp.async`` for ``prefer_instruction="cp_async"``,
    with bounds checks against the global tensor's shape (out-of-bounds loads fill zeros,
    out-of-bounds stores are skipped);
  * an extent known only when the kernel runs (``T.copy(A[0:n], s[0:n])``, the same expression on
    both sides, which the front end checks) is a loop over its largest value (interval analysis
    over the loop and block indices; none known is a CompileError), guarded by ``i < n``; a
    slice of a shared, fragment or local buffer must provably stay inside it. Fills alike;
  * copies to or from fragments are ``T.Parallel`` loops the next pass maps through the
    fragment's layout; copies to or from per-thread ``local`` buffers are serial loops;
  * ``T.gemm`` is one call of ``tw::wgmma_gemm_ss<...>`` (Hopper warpgroup MMA, when
    ``choose_shared_layouts`` chose that path) or ``tw::gemm_ss<M, N, K, WM, WN, transA, transB,
    swizzleA, swizzleB, T>`` (mma.sync) on the shared tiles and the accumulator;
  * reductions go through a shared scratch tile: all threads write it, then each thread
    reduces the rows its destination elements need.
"""

from __future__ import annotations

import math

from .. import dtypes
from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.simplify import RangeTracker, interval, is_multiple_of, launch_ranges, simplify
from ..ir.visitor import IRMutator, reassigned_vars
from ..ir.records import wgmma_functor_name
from .lower_tma import address_of, call
from .manager import register


def _non_unit(region: ir.Region) -> list[int]:
    return [d for d, e in enumerate(region.extents) if ir.const_int(e) != 1]


def _bounds(region: ir.Region, idx) -> ir.Expr | None:
    """Condition that ``idx`` lies inside a global buffer (None for other scopes)."""
    if region.buffer.scope != "global":
        return None
    return ir.logical_and(*[ir.cmp("<", i, dim) for i, dim in zip(idx, region.buffer.shape)])


def _extent_bounds(regions, dims, ranges, what: str, loc) -> tuple[list[int], list]:
    """For the non-unit dimensions ``dims`` of the first region: each extent's largest value and,
    where it is known only at run time, the extent itself (else None); checks that each region's
    slice stays inside a buffer that is not global."""
    first = regions[0]
    bounds, dynamic = [], []
    for d in dims:
        extent = first.extents[d]
        n = ir.const_int(extent)
        if n is None:
            n = interval(simplify(extent, ranges), ranges)[1]
            if n is None:
                raise CompileError(f"{what}: the extent {extent} has no upper bound known when the kernel is "
                                   f"compiled (it may depend on a kernel parameter); slice a tile of fixed size "
                                   f"and guard the elements you use", loc)
        bounds.append(max(n, 0))
        dynamic.append(extent if ir.const_int(extent) is None else None)
    for region in regions:
        buf = region.buffer
        if buf.scope == "global" or all(ir.const_int(e) is not None for e in region.extents):
            continue
        for d, (start, extent, size) in enumerate(zip(region.starts, region.extents, buf.shape)):
            last = interval(simplify(start + extent, ranges), ranges)[1]
            if last is None or ir.const_int(size) is None or last > ir.const_int(size):
                raise CompileError(f"{what}: the slice of {buf.name} along dimension {d} can reach element "
                                   f"{last if last is not None else '(unknown)'}, past its {size}", loc)
    return bounds, dynamic


def _fragment_frame(region: ir.Region, what: str, loc) -> list[int] | None:
    """For a copy or fill of a fragment: the loop dimensions, every one of the fragment's (its
    unit ones too, so the loop nest has the fragment's shape, which partition_parallel_loops maps
    through its layout); None for other buffers. Part of a fragment is refused: each thread holds
    fixed elements of the whole."""
    if region.buffer.scope != "fragment":
        return None
    if not region.is_full:
        raise CompileError(f"{what} of part of fragment {region.buffer.name} is not supported (each thread holds "
                           f"fixed elements of the whole fragment); copy or fill the whole fragment", loc)
    return list(range(region.buffer.ndim))


class _CopyLowering:
    def __init__(self, node: ir.Copy, ranges: dict):
        self.node = node
        self.src, self.dst = node.src, node.dst
        self.sdims, self.ddims = _non_unit(self.src), _non_unit(self.dst)
        # A fragment side sets the loop nest: all its dimensions. Its non-unit ones pair up with
        # the other side's in order (the front end checked that their extents agree).
        frame_dims = _fragment_frame(self.dst, "T.copy", node.loc)
        if frame_dims is not None:
            self.sdims = self.paired(self.dst, frame_dims, self.sdims)
            self.ddims = frame_dims
        elif (frame_dims := _fragment_frame(self.src, "T.copy", node.loc)) is not None:
            self.ddims = self.paired(self.src, frame_dims, self.ddims)
            self.sdims = frame_dims
        # Unit dimensions dropped, the two sides' extents are the same expressions (the front end
        # checks it), so the destination's serve both.
        frame = self.dst if frame_dims is None or self.ddims is frame_dims else self.src
        dims = self.ddims if frame is self.dst else self.sdims
        self.extents, self.dynamic = _extent_bounds([frame, self.src if frame is self.dst else self.dst], dims,
                                                    ranges, "T.copy", node.loc)

    @staticmethod
    def paired(fragment: ir.Region, frame_dims: list, other_dims: list) -> list:
        """The other side's dimension for each loop of a fragment's frame: its non-unit dimensions
        in order for the fragment's non-unit ones, None (index stays the start) for unit ones."""
        others = iter(other_dims)
        return [next(others) if ir.const_int(fragment.extents[d]) != 1 else None for d in frame_dims]

    def indices(self, region, dims, loop_idx):
        idx = list(region.starts)
        for d, i in zip(dims, loop_idx):
            if d is not None:
                idx[d] = region.starts[d] + i
        return tuple(idx)

    def vector_width(self) -> int:
        src, dst = self.src.buffer, self.dst.buffer
        if src.dtype != dst.dtype or src.dtype.packed or src.dtype.storage_bits < 8:
            return 1
        if any(b.scope in ("fragment", "local") for b in (src, dst)) or not self.extents or any(e is not None for e in self.dynamic):
            return 1
        elem = src.dtype.storage_bits // 8
        for v in (16 // elem, 8 // elem, 4 // elem, 2 // elem):
            if v > 1 and self.extents[-1] % v == 0 and all(
                    self.vector_ok(r, dims, v) for r, dims in ((self.src, self.sdims), (self.dst, self.ddims))):
                return v
        return 1

    @staticmethod
    def vector_ok(region: ir.Region, dims, v) -> bool:
        buf = region.buffer
        strides = buf.effective_strides()
        if not dims or dims[-1] != buf.ndim - 1 or ir.const_int(strides[-1]) != 1:
            return False
        if not is_multiple_of(region.starts[-1], v):
            return False
        if any(ir.const_int(s) is None or ir.const_int(s) % v for s in strides[:-1]):
            return False
        if buf.scope == "global" and (ir.const_int(buf.shape[-1]) is None or ir.const_int(buf.shape[-1]) % v):
            return False
        if buf.scope == "global":
            buf.attrs["align_bytes"] = max(buf.attrs.get("align_bytes", 1), v * buf.dtype.storage_bits // 8)
        return True

    def lower(self) -> ir.Stmt:
        src, dst = self.src.buffer, self.dst.buffer
        if src.dtype.packed or dst.dtype.packed:
            raise CompileError("packed FP4 tiles are moved by TMA (T.tma_copy or "
                               "prefer_instruction='tma'), not by threads", self.node.loc)
        per_thread = "local" in (src.scope, dst.scope)
        v = 1 if per_thread else self.vector_width()
        loop_vars = [ir.Var(f"i{n}") for n in range(len(self.extents))]
        scaled = list(loop_vars)
        if v > 1:
            scaled[-1] = loop_vars[-1] * v
        s_idx = self.indices(self.src, self.sdims, scaled)
        d_idx = self.indices(self.dst, self.ddims, scaled)
        guard = ir.logical_and(_bounds(self.src, s_idx), _bounds(self.dst, d_idx))
        body = self.element(s_idx, d_idx, v, guard)
        within = _within_extents(loop_vars, self.dynamic)  # past a run-time extent nothing is written
        if within is not None:
            body = ir.IfThenElse(within, body)
        extents = list(self.extents)
        if v > 1:
            extents[-1] //= v
        kind = "serial" if per_thread else "parallel"
        for var, ext in reversed(list(zip(loop_vars, extents))):
            body = ir.For(var, ir.const(ext), body, kind, annotations={"vector": v} if v > 1 else {},
                          loc=self.node.loc)
        return body

    def element(self, s_idx, d_idx, v, guard) -> ir.Stmt:
        src, dst = self.src.buffer, self.dst.buffer
        nbytes = v * src.dtype.storage_bits // 8
        load_from_global = src.scope == "global"
        if self.node.instruction == "cp_async" and src.scope == "global" and dst.scope == "shared" \
                and nbytes in (4, 8, 16):
            return call(f"tw::cp_async<{nbytes}>", address_of(dst, d_idx), address_of(src, s_idx),
                        guard if guard is not None else ir.const(True))
        if v > 1:
            body = call(f"tw::copy_vec<{nbytes}>", address_of(dst, d_idx), address_of(src, s_idx))
            zero = call(f"tw::zero_vec<{nbytes}>", address_of(dst, d_idx))
        else:
            body = ir.BufferStore(dst, d_idx, ir.cast(ir.BufferLoad(src, s_idx, src.dtype), dst.dtype))
            zero = ir.BufferStore(dst, d_idx, ir.cast(ir.const(0.0 if dst.dtype.is_float else 0), dst.dtype))
        if guard is None:
            return body
        # An out-of-bounds load still defines the tile (zeros); a store out of bounds does nothing.
        fill_zero = zero if load_from_global and dst.scope != "global" else None
        return ir.IfThenElse(guard, body, fill_zero)


def _within_extents(loop_vars, dynamic) -> ir.Expr | None:
    """``i < n`` for each loop over an extent ``n`` known only at run time (None where none is)."""
    return ir.logical_and(*[ir.cmp("<", v, e) for v, e in zip(loop_vars, dynamic) if e is not None])


def _loop_nest(shape, make_body, kind="parallel", loc=None):
    loop_vars = [ir.Var(f"i{n}") for n in range(len(shape))]
    body = make_body(tuple(loop_vars))
    for var, ext in reversed(list(zip(loop_vars, shape))):
        body = ir.For(var, ir.const(ext), body, kind, loc=loc)
    return body


_CPP_TYPES = {"float16": "tw::half", "bfloat16": "tw::bfloat16"}


def _tile_dims(region: ir.Region) -> list[int]:
    return [ir.const_int(e) for e in region.extents if ir.const_int(e) != 1]


class _LowerTileOps(RangeTracker, IRMutator):
    def __init__(self, func: ir.PrimFunc):
        self.func = func
        self.threads = func.launch.threads
        self.tid = func.launch.thread_var
        self.wgmma_shapes: set = set()
        self.ranges = launch_ranges(func)
        self.reassigned = reassigned_vars(func.body)

    def visit_For(self, node: ir.For):
        self.track_loop(node)
        return self.generic_visit(node)

    def visit_LetStmt(self, node: ir.LetStmt):
        self.track_let(node)
        return self.generic_visit(node)

    def visit_Copy(self, node: ir.Copy):
        if node.instruction == "tma":
            raise CompileError("internal: TMA copy left for lower_tile_ops", node.loc)
        return _CopyLowering(node, self.ranges).lower()

    def visit_Fill(self, node: ir.Fill):
        region = node.dst
        dims = _fragment_frame(region, "T.fill", node.loc) or _non_unit(region)
        shape, dynamic = _extent_bounds([region], dims, self.ranges, "T.fill", node.loc)

        def body(idx):
            full = list(region.starts)
            for d, i in zip(dims, idx):
                full[d] = region.starts[d] + i
            store = ir.BufferStore(region.buffer, tuple(full), node.value)
            guard = _within_extents(idx, dynamic)
            return store if guard is None else ir.IfThenElse(guard, store)

        kind = "serial" if region.buffer.scope == "local" else "parallel"
        return _loop_nest(shape, body, kind, node.loc)

    def visit_Gemm(self, node: ir.Gemm):
        a, b, c = node.a, node.b, node.c
        for r, name in ((a, "A"), (b, "B")):
            if r.buffer.scope != "shared":
                raise CompileError(f"T.gemm: operand {name} must be in shared memory on this path "
                                   f"({r.buffer.name} is a {r.buffer.scope} buffer)", node.loc)
            if r.buffer.dtype.name not in _CPP_TYPES:
                raise CompileError(f"T.gemm on tensor cores takes float16 or bfloat16 inputs; "
                                   f"{r.buffer.name} is {r.buffer.dtype.name}", node.loc)
            if _tile_dims(r) != list(r.buffer.static_shape()[-2:]):
                raise CompileError(f"T.gemm: operand {name} must be a whole shared tile", node.loc)
        layout = c.buffer.attrs["layout"]
        plan = node.plan
        if plan is not None:
            return self.wgmma(node, plan)
        if node.in_flight:
            raise CompileError("internal: only a wgmma gemm can leave work in flight", node.loc)
        m, n = layout.shape
        k = _tile_dims(a)[0] if node.trans_a else _tile_dims(a)[1]
        if k % 16:
            raise CompileError(f"T.gemm: K={k} must be a multiple of 16 for mma.sync", node.loc)
        if layout.threads != self.threads:
            raise CompileError("T.gemm: the accumulator layout needs all threads of the block", node.loc)
        flag = {True: "true", False: "false"}
        template = (f"tw::gemm_ss<{m}, {n}, {k}, {layout.warps_m}, {layout.warps_n}, {flag[node.trans_a]}, "
                    f"{flag[node.trans_b]}, {a.buffer.attrs.get('swizzle', 0)}, {b.buffer.attrs.get('swizzle', 0)}, "
                    f"{_CPP_TYPES[a.buffer.dtype.name]}>")
        return self.gemm_call(node, template)

    def wgmma(self, node: ir.Gemm, plan) -> ir.Stmt:
        dtype = node.a.buffer.dtype.name
        self.wgmma_shapes.add((plan.n, dtype, plan.b_k_major, plan.a_k_major))
        flag = "true" if plan.b_k_major else "false"
        # trailing template arguments only where they differ from the defaults (IN_FLIGHT 0, A K-major)
        tail = f", {node.in_flight}" if node.in_flight or not plan.a_k_major else ""
        tail += "" if plan.a_k_major else ", false"
        functor = wgmma_functor_name(plan.n, dtype, plan.b_k_major, plan.a_k_major)
        template = (f"tw::wgmma_gemm_ss<{plan.m}, {plan.n}, {plan.k}, {plan.warpgroups}, {plan.a_span}, "
                    f"{plan.b_span}, {flag}, {functor}{tail}>")
        return self.gemm_call(node, template)

    def gemm_call(self, node: ir.Gemm, template: str) -> ir.Stmt:
        """``template(A tile, B tile, accumulator, thread)``, after zeroing C for clear_accum."""
        a, b, c = node.a, node.b, node.c
        out = []
        if node.clear_accum:
            out.append(self.visit_Fill(ir.Fill(ir.Region.full(c.buffer), ir.const(0.0), loc=node.loc)))
        out.append(call(template, address_of(a.buffer, a.starts), address_of(b.buffer, b.starts),
                        ir.Raw(c.buffer.name), self.tid))
        return ir.seq(out)

    def visit_Reduce(self, node: ir.Reduce):
        src, dst = node.src, node.dst
        if src.scope not in ("fragment", "shared") or dst.scope not in ("fragment", "shared"):
            raise CompileError("T.reduce_* reduces a fragment or shared buffer into one", node.loc)
        scratch = ir.Buffer(f"{src.name}_reduce_scratch", src.shape, src.dtype, "shared",
                            attrs={"swizzle": 0}, loc=node.loc)
        acc_dtype = dtypes.float32 if src.dtype.is_float else dtypes.int32
        init, combine = _REDUCERS[node.kind]

        def to_scratch(idx):
            return ir.BufferStore(scratch, idx, ir.BufferLoad(src, idx, src.dtype))

        def reduce_row(out_idx):
            acc = ir.Var(f"{node.kind}_acc", acc_dtype)
            r = ir.Var("r")
            full = list(out_idx)
            full.insert(node.dim, r)
            start = init(acc_dtype) if node.clear else ir.cast(ir.BufferLoad(dst, out_idx, dst.dtype), acc_dtype)
            value = ir.cast(ir.BufferLoad(scratch, tuple(full), src.dtype), acc_dtype)
            return ir.seq([
                ir.LetStmt(acc, start),
                ir.For(r, src.shape[node.dim], ir.Assign(acc, combine(acc, value)), "serial"),
                ir.BufferStore(dst, tuple(out_idx), ir.cast(acc, dst.dtype)),
            ])

        out_shape = [s for i, s in enumerate(src.static_shape()) if i != node.dim] or [1]
        return ir.seq([
            ir.Allocate(scratch),
            ir.SyncThreads(),
            _loop_nest(src.static_shape(), to_scratch, loc=node.loc),
            ir.SyncThreads(),
            _loop_nest(out_shape, reduce_row, loc=node.loc),
            ir.SyncThreads(),
        ])


def _abs(x):
    return ir.Call("abs", (x,), x.dtype)


_REDUCERS = {
    "sum": (lambda t: ir.cast(ir.const(0), t), lambda a, x: a + x),
    "abssum": (lambda t: ir.cast(ir.const(0), t), lambda a, x: a + _abs(x)),
    "max": (lambda t: ir.Const(-math.inf if t.is_float else -(2**31), t), lambda a, x: ir.binop("max", a, x)),
    "min": (lambda t: ir.Const(math.inf if t.is_float else 2**31 - 1, t), lambda a, x: ir.binop("min", a, x)),
    "absmax": (lambda t: ir.cast(ir.const(0), t), lambda a, x: ir.binop("max", a, _abs(x))),
}


@register("lower_tile_ops", "lower")
def lower_tile_ops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    lowering = _LowerTileOps(func)
    out = func.with_body(lowering.visit(func.body))
    out.attrs["wgmma_shapes"] = sorted(lowering.wgmma_shapes)
    return out
