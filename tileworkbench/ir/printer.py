"""Readable, TVMScript-like text of the IR (what the trace shows after every pass)."""

from __future__ import annotations

from . import nodes as ir

_PRECEDENCE = {
    "or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10,
}
# C's truncating division and remainder, which the codegen phase puts where both operands are
# provably non-negative (there they equal // and %): printed as calls.
TRUNCATING = ("truncdiv", "truncmod")


def _buffer_ref(buffer: ir.Buffer) -> str:
    return buffer.name


def expr_text(e, parent_prec: int = 0) -> str:
    if isinstance(e, (int, float, bool)):
        return repr(e)
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, ir.Const):
        if e.dtype.is_float:
            return repr(float(e.value))
        return repr(e.value)
    if isinstance(e, ir.BinOp):
        if e.op in ("min", "max") or e.op in TRUNCATING:
            return f"T.{e.op}({expr_text(e.a)}, {expr_text(e.b)})"
        prec = _PRECEDENCE[e.op]
        text = f"{expr_text(e.a, prec)} {e.op} {expr_text(e.b, prec + 1)}"
        return f"({text})" if prec < parent_prec else text
    if isinstance(e, ir.Not):
        return f"not {expr_text(e.a, 3)}"
    if isinstance(e, ir.Call):
        args = [expr_text(a) for a in e.args]
        if e.name.startswith("."):  # a member call on a barrier: mbar[0].wait(parity)
            return f"{args[0]}{e.name}({', '.join(args[1:])})"
        if "::" in e.name or e.name.startswith("tw_rng."):  # our headers' intrinsics, shown as called
            return f"{e.name}({', '.join(args)})"
        return f"T.{e.name}({', '.join(args)})"
    if isinstance(e, ir.Cast):
        return f'T.cast({expr_text(e.value)}, "{e.dtype.name}")'
    if isinstance(e, ir.Select):
        return f"T.if_then_else({expr_text(e.cond)}, {expr_text(e.a)}, {expr_text(e.b)})"
    if isinstance(e, ir.BufferLoad):
        flat = ".flat" if e.flat else ""
        return f"{_buffer_ref(e.buffer)}{flat}[{', '.join(expr_text(i) for i in e.indices)}]"
    if isinstance(e, ir.Raw):
        return e.text
    if isinstance(e, ir.Region):
        return region_text(e)
    if isinstance(e, ir.BarrierRef):
        return f"{e.buffer.name}[{expr_text(e.index)}]"
    if isinstance(e, str):
        return repr(e)
    return repr(e)


def region_text(r: ir.Region) -> str:
    if r.is_full:
        return r.buffer.name
    parts = []
    for start, extent in zip(r.starts, r.extents):
        if ir.const_int(extent) == 1:
            parts.append(expr_text(start))
        else:
            parts.append(f"{expr_text(start)}:{expr_text(start + extent)}")
    return f"{r.buffer.name}[{', '.join(parts)}]"



def _shape(shape) -> str:
    inner = ", ".join(expr_text(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def _buffer_attrs(b: ir.Buffer) -> str:
    notes = []
    for key in ("versions", "swizzle", "offset", "layout", "counts"):
        if key in b.attrs and b.attrs[key] not in (None, 1, "none"):
            value = b.attrs[key]
            notes.append(f"{key}={value}" if key != "layout" else f"layout={value.describe()}")
    if b.attrs.get(ir.SHARED_VIEW) is not None:  # TileLang's T.view sharing that tile's bytes
        view = b.attrs[ir.SHARED_VIEW]
        notes.append(f"T.view of {view.source.name}, " + ("over its bytes" if view.shares_bytes else "a tile of its own"))
    return f"  # {', '.join(notes)}" if notes else ""


def alloc_text(b: ir.Buffer) -> str:
    if b.scope == "barrier":
        counts = b.attrs.get("counts", [])
        return f"{b.name} = T.alloc_barrier({list(counts)}){_buffer_attrs(b)}"
    if b.scope == "global":
        strides = f", strides={_shape(b.strides)}" if b.strides is not None else ""
        return f'{b.name} = T.make_tensor({expr_text(b.data)}, {_shape(b.shape)}, "{b.dtype.name}"{strides})'
    fn = {"shared": "alloc_shared", "fragment": "alloc_fragment", "local": "alloc_local"}[b.scope]
    return f"{b.name} = T.{fn}({_shape(b.shape)}, \"{b.dtype.name}\"){_buffer_attrs(b)}"


class _Printer:
    def __init__(self):
        self.lines: list[str] = []

    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def stmt(self, s, depth: int):
        method = getattr(self, "p_" + type(s).__name__, None)
        if method is None:
            self.emit(depth, f"<{type(s).__name__}>")
        else:
            method(s, depth)

    def p_SeqStmt(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def p_For(self, s, d):
        ann = "".join(f", {k}={v!r}" for k, v in s.annotations.items() if not k.startswith("_"))
        ann += s.pipeline.printed() if s.pipeline is not None else ""
        ann += ", do_while=True" if s.form is not None and s.form.at_least_once else ""
        start = "" if ir.const_int(s.start) == 0 else f"{expr_text(s.start)}, "
        fn = {"serial": "serial", "parallel": "Parallel", "pipelined": "Pipelined",
              "unrolled": "unroll"}.get(s.kind, s.kind)
        self.emit(d, f"for {s.var.name} in T.{fn}({start}{expr_text(s.extent)}{ann}):")
        self.stmt(s.body, d + 1)

    def p_While(self, s, d):
        self.emit(d, f"while {expr_text(s.cond)}:")
        self.stmt(s.body, d + 1)

    def p_IfThenElse(self, s, d):
        self.emit(d, f"if {expr_text(s.cond)}:")
        self.stmt(s.then_body, d + 1)
        if s.else_body is not None:
            self.emit(d, "else:")
            self.stmt(s.else_body, d + 1)

    def p_LetStmt(self, s, d):
        self.emit(d, f"{s.var.name}: {s.var.dtype.name} = {expr_text(s.value)}")

    def p_Assign(self, s, d):
        self.emit(d, f"{s.var.name} = {expr_text(s.value)}")

    def p_BufferStore(self, s, d):
        idx = ", ".join(expr_text(i) for i in s.indices)
        self.emit(d, f"{s.buffer.name}{'.flat' if s.flat else ''}[{idx}] = {expr_text(s.value)}")

    def p_BaseOffset(self, s, d):
        self.emit(d, f"{s.target.name} = T.base({s.buffer.name}, {expr_text(s.offset)})")

    def p_Evaluate(self, s, d):
        self.emit(d, expr_text(s.call))

    def p_Allocate(self, s, d):
        self.emit(d, alloc_text(s.buffer))

    def p_Comment(self, s, d):
        self.emit(d, f"# {s.text}")

    def p_Copy(self, s, d):
        if s.reduce == "add":
            self.emit(d, f"T.atomic_add({region_text(s.dst)}, {region_text(s.src)}, use_tma=True)")
            return
        instr = ", disable_tma=True" if s.instruction == "threads" else \
            f", prefer_instruction={s.instruction!r}" if s.instruction else ""
        self.emit(d, f"T.copy({region_text(s.src)}, {region_text(s.dst)}{instr})")

    def p_Im2Col(self, s, d):
        instr = f", prefer_instruction={s.instruction!r}" if s.instruction else ""
        self.emit(d, f"T.im2col({region_text(s.src)}, {region_text(s.dst)}, {expr_text(s.nhw_step)}, "
                     f"{expr_text(s.c_step)}, {s.kernel}, {s.stride}, {s.dilation}, {s.pad}{instr})")

    def p_TmaCopy(self, s, d):
        extra = f", barrier={expr_text(s.barrier)}" if s.barrier is not None else ""
        if s.leader_scope_threads is not None:
            extra += f", leader_scope_threads={s.leader_scope_threads}"
        self.emit(d, f"T.tma_copy({region_text(s.src)}, {region_text(s.dst)}{extra})")

    def p_Fill(self, s, d):
        self.emit(d, f"T.fill({region_text(s.dst)}, {expr_text(s.value)})")

    def p_Gemm(self, s, d):
        clear = s.clear_accum if isinstance(s.clear_accum, bool) else expr_text(s.clear_accum)
        flags = "".join(
            f", {k}={v}" for k, v in (("transpose_A", s.trans_a), ("transpose_B", s.trans_b),
                                       ("clear_accum", clear)) if v
        ) + (f", in_flight={s.in_flight}" if s.in_flight else "")
        op = "T.wgmma_gemm" if s.in_flight is None else "T.gemm"  # left running for T.wait_wgmma
        self.emit(d, f"{op}({region_text(s.a)}, {region_text(s.b)}, {region_text(s.c)}{flags})")

    def p_Reduce(self, s, d):
        segment = f", segment={s.segment}" if s.segment is not None else ""
        self.emit(d, f"T.reduce_{s.kind}({s.src.name}, {s.dst.name}, dim={s.dim}, clear={s.clear}{segment})")

    def p_Scan(self, s, d):
        reverse = ", reverse=True" if s.reverse else ""
        self.emit(d, f"T.cum{s.kind}({region_text(s.src)}, {region_text(s.dst)}, dim={s.dim}{reverse})")

    def p_BarrierArrive(self, s, d):
        op = "T.cp_async_barrier_noinc" if s.after_copies else "T.barrier_arrive"
        self.emit(d, f"{op}({expr_text(s.barrier)})")

    def p_ThreadCopy(self, s, d):
        self.emit(d, f"T.ptx_cp_async({region_text(s.dst)}, {region_text(s.src)})")

    def p_BarrierWait(self, s, d):
        self.emit(d, f"T.barrier_wait({expr_text(s.barrier)}, {expr_text(s.parity)})")

    def p_TmaStoreWait(self, s, d):
        self.emit(d, f"T.tma_store_wait(read={s.read})")

    def p_SyncThreads(self, s, d):
        if s.threads is None:
            self.emit(d, "T.sync_threads()")
        else:
            named = f", barrier={s.barrier}" if s.barrier != 1 else ""
            self.emit(d, f"T.sync_threads(threads={s.threads}{named})")

    def p_WarpSpecialize(self, s, d):
        first = s.consumer_threads
        self.emit(d, f"with T.ws_producer(threads=range({first}, {first + s.producer_threads})):")
        self.stmt(s.producer, d + 1)
        self.emit(d, f"with T.ws_consumer(threads=range(0, {first})):")
        self.stmt(s.consumer, d + 1)


    def p_ThreadScope(self, s, d):
        if s.of_warpgroups:
            self.emit(d, f"with {s.spelling}:  # threads {s.first}..{s.first + s.count - 1}, "
                         f"{s.var.name} counts from 0 among them")
        else:
            self.emit(d, f"with thread_scope({s.first}, {s.count}):  # {s.spelling}, "
                         f"{s.var.name} counts from 0 among them")
        self.stmt(s.body, d + 1)


def _param_text(p) -> str:
    if isinstance(p, ir.Buffer):
        if p.strides is not None:
            strides = _shape(p.strides)
            return f"{p.name}: T.StridedTensor({_shape(p.shape)}, {strides}, \"{p.dtype.name}\")"
        return f"{p.name}: T.Tensor({_shape(p.shape)}, \"{p.dtype.name}\")"
    return f"{p.name}: T.{p.dtype.name}"


def print_ir(func: ir.PrimFunc) -> str:
    p = _Printer()
    p.emit(0, "@T.prim_func")
    p.emit(0, f"def {func.name}({', '.join(_param_text(x) for x in func.params)}):")
    launch = func.launch
    grid = ", ".join(expr_text(g) for g in launch.grid)
    names = ", ".join(v.name for v in launch.block_vars)
    notes = [f"+ {launch.producer_threads} producer threads"] if launch.producer_threads else []
    if launch.persistent_tiles:
        notes.append(f"persistent: balanced_blocks({launch.persistent_tiles}, resident blocks) blocks walk the tiles")
    extra = f"  # {'; '.join(notes)}" if notes else ""
    p.emit(1, f"with T.Kernel({grid}, threads={launch.threads}) as ({names}):{extra}")
    p.emit(2, f"{launch.thread_var.name} = T.get_thread_binding()")
    if launch.raster_panel:
        p.emit(2, f"T.use_swizzle(panel_size={launch.raster_panel})  # blocks visited in panels of "
                  f"{launch.raster_panel} rows")
    if launch.heaviest_first:
        panel = f", {launch.heaviest_first_panel} (y, z) pairs at a time" if launch.heaviest_first_panel else ""
        p.emit(2, f"# blocks run from the last along x{panel}: their loops grow with bx, the longest start first")
    p.stmt(func.body, 2)
    return "\n".join(p.lines) + "\n"


def stmt_text(s) -> str:
    p = _Printer()
    p.stmt(s, 0)
    return "\n".join(p.lines)
