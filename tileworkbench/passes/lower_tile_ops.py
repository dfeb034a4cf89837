"""lower_tile_ops: copies, fills, gemms, reductions and scans become loops and header calls.

Expects: TMA already lowered (``lower_tma``), fragment layouts inferred.
Guarantees: no ``Copy``/``Fill``/``Gemm``/``Reduce``/``Scan`` remains. Instead:
  * copies between global and shared memory are ``T.Parallel`` loops of vector copies (up to 16
    bytes, when alignment and extents allow) or ``cp.async`` for ``prefer_instruction="cp_async"``,
    with bounds checks against the global tensor's shape (out-of-bounds loads fill zeros,
    out-of-bounds stores are skipped); a fill of a global tensor skips its elements past the shape too;
  * an extent known only when the kernel runs (``T.copy(A[0:n], s[0:n])``, the same expression on
    both sides, which the front end checks) is a loop over its largest value (interval analysis
    over the loop and block indices; none known is a CompileError), guarded by ``i < n``; a
    slice of a shared, fragment or local buffer must provably stay inside it. Fills alike
    (the copy lowering itself: ``rules.copies``);
  * copies to or from fragments are ``T.Parallel`` loops the next pass maps through the
    fragment's layout; copies to or from per-thread ``local`` buffers are serial loops;
  * ``T.gemm`` is one call of ``tw::wgmma_gemm_ss<...>`` (Hopper warpgroup MMA, when
    ``choose_shared_layouts`` chose that path), ``tw::wgmma_gemm_rs<...>`` for an A in a fragment
    (its registers are wgmma's A operand), or ``tw::gemm_ss<M, N, K, WM, WN, transA, transB,
    swizzleA, swizzleB, T[, panelA, panelB]>`` (mma.sync; the panels where a wgmma gemm reading
    the same tile had it stored in 128-byte panels; ``gemm_ss_tf32`` takes them too) on the
    shared tiles and the accumulator; float32 tiles
    run in TF32: on wgmma (m64nNk8) where both are K-major, else ``tw::gemm_ss_tf32<...>``
    (mma.sync m16n8k8, each operand rounded to TF32);
  * reductions of a fragment's rows into a fragment with those rows' layout stay in registers
    (each thread's partial, ``shfl.xor`` across the lanes of a row, shared memory across warps);
    others go through a shared scratch tile (``rules.reductions``);
  * ``T.cumsum``/``T.cummax`` are runs of each line scanned by one thread each, the runs' totals
    combined through shared memory (``rules.scans``).
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.simplify import RangeTracker, launch_ranges, simplify
from ..ir.visitor import IRMutator, reassigned_vars
from ..ir.records import wgmma_functor_name
from .rules.calls import address_of, call
from .rules.gemm import ONE_BYTE_TYPES
from .rules.copies import (CopyLowering, extent_bounds, fragment_frame, global_bounds, lower_im2col,
                           partial_fragment_copy, within_extents)
from .rules.reductions import in_registers, loop_nest, reduce_in_registers, reduce_through_shared
from .rules.scans import lower_scan
from .rules.thread_scopes import ScopedThreads
from .manager import register


# the 16-bit unit tw::gemm_ss walks a tile in: an element, or four int4 values (int4x2 tiles' bytes)
_CPP_TYPES = {"float16": "tw::half", "bfloat16": "tw::bfloat16", "int4x2": "tw::int4x4"}
_MMA_SYNC_TYPES = (*_CPP_TYPES, "float32")  # float32: tw::gemm_ss_tf32
NO_WAIT = -1  # tw::wgmma_gemm_*'s IN_FLIGHT for a group the program waits for itself (T.wait_wgmma)


def _tile_dims(region: ir.Region) -> list[int]:
    return [ir.const_int(e) for e in region.extents if ir.const_int(e) != 1]


def _inside(region: ir.Region) -> ir.Expr | None:
    """That ``region`` (of constant extents) lies inside its buffer, where that is not known from
    constants: each start from 0 and its end at most the dimension's size."""
    conds = []
    for start, extent, size in zip(region.starts, region.extents, region.buffer.shape):
        end = simplify(start + extent)
        lo, hi = ir.const_int(start), ir.const_int(end)
        if lo is None or lo < 0:
            conds.append(ir.cmp(">=", start, 0))
        if hi is None or ir.const_int(size) is None or hi > ir.const_int(size):
            conds.append(ir.cmp("<=", end, size))
    return ir.logical_and(*conds)


class _LowerTileOps(ScopedThreads, RangeTracker, IRMutator):
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
        return partial_fragment_copy(node, self.ranges) or CopyLowering(node, self.ranges).lower()

    def visit_ThreadCopy(self, node: ir.ThreadCopy):
        """Each thread's ``cp.async`` of its run, zeros where the run leaves the tensor (or the
        predicate is false), nothing where it leaves the tile."""
        dst, src = node.dst, node.src
        nbytes = dst.buffer.dtype.bytes_for(ir.const_int(dst.extents[-1]))
        valid = ir.logical_and(_inside(src), node.predicate)
        copy = call(f"tw::cp_async<{nbytes}>", address_of(dst.buffer, dst.starts), address_of(src.buffer, src.starts),
                    valid if valid is not None else ir.const(True))
        inside = _inside(dst)
        return copy if inside is None else ir.IfThenElse(inside, copy, loc=node.loc)

    def visit_Im2Col(self, node: ir.Im2Col):
        return lower_im2col(node)

    def visit_Fill(self, node: ir.Fill):
        region = node.dst
        dims = fragment_frame(region, "T.fill", node.loc) or region.non_unit_dims()
        shape, dynamic = extent_bounds([region], dims, self.ranges, "T.fill", node.loc)

        def body(idx):
            full = list(region.starts)
            for d, i in zip(dims, idx):
                full[d] = region.starts[d] + i
            store = ir.BufferStore(region.buffer, tuple(full), node.value)
            # a global tensor's elements past its shape are not written, as a copy's are not
            guard = ir.logical_and(within_extents(idx, dynamic), global_bounds(region, full, self.ranges))
            return store if guard is None else ir.IfThenElse(guard, store)

        kind = "serial" if region.buffer.scope == "local" else "parallel"
        return loop_nest(shape, body, kind, node.loc)

    def visit_Gemm(self, node: ir.Gemm):
        a, b, c = node.a, node.b, node.c
        for r, name in ((a, "A"), (b, "B")):
            if r.buffer.scope == "fragment" and node.plan is not None and node.plan.a_registers and name == "A":
                continue
            if r.buffer.scope != "shared":
                raise CompileError(f"T.gemm: operand {name} must be in shared memory on this path "
                                   f"({r.buffer.name} is a {r.buffer.scope} buffer)", node.loc)
            if r.buffer.dtype.name in ONE_BYTE_TYPES and node.plan is None:
                kind = "int8" if r.buffer.dtype.is_int else "FP8"
                raise CompileError(f"T.gemm on {kind} tiles ({r.buffer.name} is {r.buffer.dtype.name}) runs on Hopper's "
                                   "wgmma only: sm_90a, A stored M x K and B stored N x K (transpose_B=True), K a "
                                   "multiple of 32, threads a multiple of 128, 64 rows per warpgroup and a "
                                   f"{'int32' if kind == 'int8' else 'float32'} accumulator", node.loc)
            if r.buffer.dtype.name not in _MMA_SYNC_TYPES and node.plan is None:
                raise CompileError(f"T.gemm on tensor cores takes float16, bfloat16, float32 (as TF32) or int4 inputs; "
                                   f"{r.buffer.name} is {r.buffer.dtype.name}", node.loc)
            if node.plan is None and _tile_dims(r) != list(r.buffer.static_shape()[-2:]):
                dims = _tile_dims(r)
                raise CompileError(f"T.gemm reads a {' x '.join(map(str, dims))} part of {r.buffer.name} as its {name}, "
                                   "and this gemm takes mma.sync, which reads whole tiles only (wgmma reads a "
                                   "block of whole 128-byte panels of a K-major tile's columns where it stands); "
                                   "allocate a tile of the operand's shape and copy into it", node.loc)
        layout = c.buffer.attrs["layout"]
        plan = node.plan
        if plan is not None:
            return self.wgmma(node, plan)
        if node.in_flight is None:
            raise CompileError("T.wgmma_gemm runs on sm_90a's wgmma only, and this gemm takes mma.sync: wgmma needs "
                               "A stored M x K (or in a fragment), B in shared memory, threads a multiple of 128 and "
                               "64 rows per warpgroup; use T.gemm", node.loc)
        if node.in_flight:
            raise CompileError("internal: only a wgmma gemm can leave work in flight", node.loc)
        m, n = layout.shape
        k = _tile_dims(a)[0] if node.trans_a else _tile_dims(a)[1]
        tf32 = a.buffer.dtype.name == "float32"  # B and C float32 too: the front end checks
        int4 = a.buffer.dtype.name == "int4x2"  # K counted in bytes here, two values each
        k_step = 8 if tf32 else 32 if int4 else 16  # mma.sync m16n8k8 (TF32), m16n8k64 (int4) or m16n8k16
        if k % k_step:
            raise CompileError(f"T.gemm: K={k * 2 if int4 else k} must be a multiple of {k_step * 2 if int4 else k_step} "
                               "for mma.sync", node.loc)
        if int4:
            k //= 2  # tw::gemm_ss counts K in its 16-bit unit, tw::int4x4
        if layout.threads != self.threads:
            raise CompileError("T.gemm: the accumulator layout needs all threads of the block", node.loc)
        flag = {True: "true", False: "false"}
        shape = (f"{m}, {n}, {k}, {layout.warps_m}, {layout.warps_n}, {flag[node.trans_a]}, {flag[node.trans_b]}, "
                 f"{a.buffer.attrs.get('swizzle', 0)}, {b.buffer.attrs.get('swizzle', 0)}")
        # a tile a wgmma gemm also reads may be stored in 128-byte panels (choose_shared_layouts)
        panels = [r.buffer.attrs.get("panel", 0) for r in (a, b)]
        panel_args = f", {panels[0]}, {panels[1]}" if any(panels) else ""
        template = (f"tw::gemm_ss_tf32<{shape}{panel_args}>" if tf32 else
                    f"tw::gemm_ss<{shape}, {_CPP_TYPES[a.buffer.dtype.name]}{panel_args}>")
        return self.gemm_call(node, template)

    def wgmma(self, node: ir.Gemm, plan) -> ir.Stmt:
        dtype = node.a.buffer.dtype.name
        in_flight = NO_WAIT if node.in_flight is None else node.in_flight
        self.wgmma_shapes.add((plan.n_per_instruction, dtype, plan.b_k_major, plan.a_k_major, plan.a_registers))
        flag = "true" if plan.b_k_major else "false"
        if plan.a_registers:  # A is the fragment's own registers (its layout: infer_fragment_layouts)
            functor = wgmma_functor_name(plan.n, dtype, plan.b_k_major, a_registers=True)
            tail = f", {in_flight}" if in_flight else ""
            template = ir.wgmma_gemm_name(True, plan.m, plan.n, plan.k,
                                          f"{plan.warpgroups}, {plan.b_span}, {flag}, {functor}{tail}")
            return self.gemm_call(node, template)
        # trailing template arguments only where they differ from the defaults (IN_FLIGHT 0, A
        # K-major, one warpgroup along N, one instruction along N)
        split = plan.n_groups > 1 or plan.n_chunks > 1
        tail = f", {in_flight}" if in_flight or not plan.a_k_major or split else ""
        tail += "" if plan.a_k_major and not split else f", {'true' if plan.a_k_major else 'false'}"
        tail += f", {plan.n_groups}" if split else ""
        tail += f", {plan.n_chunks}" if plan.n_chunks > 1 else ""
        functor = wgmma_functor_name(plan.n_per_instruction, dtype, plan.b_k_major, plan.a_k_major)
        template = ir.wgmma_gemm_name(False, plan.m, plan.n, plan.k,
                                      f"{plan.warpgroups}, {plan.a_span}, {plan.b_span}, {flag}, {functor}{tail}")
        return self.gemm_call(node, template)

    def gemm_call(self, node: ir.Gemm, template: str) -> ir.Stmt:
        """``template(A tile, B tile, accumulator, thread)``, after zeroing C for clear_accum."""
        a, b, c = node.a, node.b, node.c
        out = []
        if node.may_clear:
            zero = ir.const(0.0) if c.buffer.dtype.is_float else ir.const(0)  # int32 for int8 tiles
            clear = self.visit_Fill(ir.Fill(ir.Region.full(c.buffer), zero, loc=node.loc))
            out.append(clear if node.always_clears else ir.IfThenElse(node.clear_accum, clear, loc=node.loc))
        a_arg = ir.Raw(a.buffer.name) if a.buffer.scope == "fragment" else address_of(a.buffer, a.starts)
        out.append(call(template, a_arg, address_of(b.buffer, b.starts), ir.Raw(c.buffer.name), self.tid))
        return ir.seq(out)

    def visit_Reduce(self, node: ir.Reduce):
        if in_registers(node, self.threads):
            return reduce_in_registers(node, self.tid)
        return reduce_through_shared(node)

    def visit_Scan(self, node: ir.Scan):
        dims = list(range(len(node.src.extents)))
        extent_bounds([node.src, node.dst], dims, self.ranges, f"T.cum{node.kind}", node.loc)
        return lower_scan(node, self.threads)


@register("lower_tile_ops", "lower")
def lower_tile_ops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    lowering = _LowerTileOps(func)
    out = func.with_body(lowering.visit(func.body))
    out.attrs["wgmma_shapes"] = sorted(lowering.wgmma_shapes)
    return out
