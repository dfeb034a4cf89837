"""CUDA C++ for one lowered PrimFunc (sm_90a), using only our headers in ``runtime/include/tw``.

The renderer walks the lowered IR once. 16-bit floats are stored as ``tw::half`` /
``tw::bfloat16`` and every arithmetic expression on them is computed in float32: loads convert
with ``tw::to_float``, stores with ``tw::from_float<T>``, and same-type copies move raw bits.
Shared tiles with a swizzle are addressed through ``tw::swizzled<T, SPAN>``, the same pattern TMA
writes, so threads, TMA and the tensor cores agree on one layout.

Index arithmetic is ``int`` where intervals prove it fits (every kernel whose tensors hold fewer
than 2^31 elements, in practice): an integer ``+ - * // %`` whose value may leave the int32 range
is computed in 64 bits (its left operand cast to ``long long``, unless an operand already is), and
a scalar declared with such a value is a ``long long``. Where a value's range is unknown (a kernel
parameter in it, say), it is computed in 64 bits only inside the offset of a global tensor that
has 2^31 elements or more (``wide_tensor``).

Debug mode (``debug_timeout_s``, pass config ``tw.debug_barrier_timeout``): the kernel takes a
last parameter ``unsigned int* tw_debug`` (a record the host allocates), every mbarrier wait
becomes ``bar.wait_debug(..., tw_debug, ...);`` (bounded by the timeout; a thread that gives up
exits from inside it); block barriers stay ``__syncthreads()`` (a thread that left releases
them); see tw/sync.h for why no thread is left waiting. Without debug mode the output is exactly what it always was
(the header's debug sections are stripped).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..version import __version__
from ..ir import nodes as ir
from ..ir.layout import shared_element_offset
from ..ir.simplify import Affine, interval, is_nonnegative, launch_ranges, simplify
from ..ir.visitor import collect, reassigned_vars, uses_var

HEADER_DIR = Path(__file__).resolve().parent.parent / "runtime" / "include" / "tw"
HEADER_ORDER = ("common.h", "sync.h", "tma.h", "cp_async.h", "mma.h", "wgmma.h")

# Names a kernel's own cannot take in the generated CUDA: C++ and CUDA keywords, CUDA's built-in
# variables, and what the generated code itself names at kernel scope (our namespace, the
# shared-memory array, the block-order helpers, the functions it calls unqualified).
_CPP_KEYWORDS = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
    "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
    "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    "half", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "tw", "tw_smem", "CUtensorMap",
    "min", "max", "fminf", "fmaxf", "fmin",
    "fmax", "abs", "fabsf", "floorf", "expf", "exp2f", "logf", "log2f", "sqrtf", "rsqrtf", "tanhf", "sinf",
    "cosf", "ceilf", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil",
}


# What the rasterised block order declares by name (rasterized_block_indices).
_RASTER_NAMES = ("tw_block", "tw_panel_first", "tw_panel_rows", "tw_in_panel")


def c_identifier(name: str) -> str:
    """``name`` as a C++ identifier: ASCII letters, digits and ``_`` as they are, any other
    character as ``_u<hex>`` (unicode names), and a trailing ``_`` on a reserved word."""
    out = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else f"_u{ord(ch):x}" for ch in name)
    if not out or out[0].isdigit():
        out = "_" + out
    return out + "_" if out in _CPP_KEYWORDS else out

_MATH_F32 = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf", "rsqrt": "rsqrtf",
             "tanh": "tanhf", "sin": "sinf", "cos": "cosf", "floor": "floorf", "ceil": "ceilf",
             "sigmoid": "tw::sigmoid"}
_MATH_F64 = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
             "tanh": "tanh", "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil"}


_DEBUG_SECTION = re.compile(r"^[ \t]*// >>> debug mode.*?^[ \t]*// <<< debug mode[^\n]*\n", re.MULTILINE | re.DOTALL)
DEBUG_PARAM = "tw_debug"  # the debug record parameter (last)
INT32 = (-(2**31), 2**31 - 1)
_WIDENED_OPS = ("+", "-", "*", "//", "%", "<<")


def wide_tensor(buf: ir.Buffer) -> bool:
    """A global tensor whose element offsets may not fit an ``int`` (its largest offset is 2^31 or
    more, or not known when the kernel is compiled)."""
    shape, strides = buf.static_shape(), [ir.const_int(s) for s in buf.effective_strides()]
    if shape is None or None in strides:
        return True
    return sum((d - 1) * s for d, s in zip(shape, strides)) > INT32[1]


def inlined_headers(debug: bool = False) -> str:
    """Our headers, concatenated, with their local #includes and #pragma once removed (and their
    debug-mode sections unless ``debug``)."""
    parts = []
    for name in HEADER_ORDER:
        text = (HEADER_DIR / name).read_text()
        if not debug:
            text = _DEBUG_SECTION.sub("", text)
        text = re.sub(r'^#include "[a-z_]+\.h"\n', "", text, flags=re.M)
        text = text.replace("#pragma once\n", "")
        parts.append(f"// ---- tw/{name} ----\n{text.strip()}\n")
    return "\n".join(parts)


def value_type(dtype) -> str:
    """C++ type that holds a *value* of dtype in generated arithmetic."""
    if dtype.is_low_precision_float:
        return "float"
    if dtype.name in ("float8_e4m3", "float8_e5m2", "float4_e2m1fn", "float4_e2m1_unpacked"):
        return "unsigned char"
    return dtype.cpp


class CudaRenderer:
    def __init__(self, func: ir.PrimFunc, kernel_name: str, debug_timeout_s: float | None = None):
        self.func = func
        self.kernel_name = kernel_name
        self.debug_ns = int(debug_timeout_s * 1e9) if debug_timeout_s else 0
        self.stmt_index = 0  # pre-order number of the statement being rendered (analysis/program.py's)
        self.barrier_ids: dict = {}
        self.store_addresses: dict = {}  # id(BufferLoad) -> () -> its address text, in a store loop with a hoisted base
        self.lines: list[str] = []
        self.names: dict = {}
        self.taken: set = set()
        self.raw_names: dict = {}  # names that lowering wrote as text (ir.Raw) -> their C++ spelling
        launch = func.launch
        self.ranges: dict = launch_ranges(func)
        self.reassigned = reassigned_vars(func.body)
        self.block_ranges = dict(self.ranges) if launch.persistent_tiles else {}
        self.block_ranges.pop(launch.thread_var, None)
        self.wide_unknown = False  # rendering a wide tensor's offset: unknown ranges are 64-bit

    # ---- names -----------------------------------------------------------------------------
    def declare(self, var) -> str:
        base = c_identifier(var.name)
        name, n = base, 1
        while name in self.taken:
            name = f"{base}_{n}"
            n += 1
        self.taken.add(name)
        self.names[var] = name
        if isinstance(var, ir.Buffer) and name != var.name:
            self.raw_names[var.name] = name  # the gemm call names its accumulator as text
        return name

    def name(self, var) -> str:
        if var not in self.names:
            return self.declare(var)
        return self.names[var]

    # ---- expressions -------------------------------------------------------------------------
    def expr(self, e) -> str:
        if isinstance(e, ir.Var):
            return self.name(e)
        if isinstance(e, ir.Const):
            return self.const(e)
        if isinstance(e, ir.BinOp):
            return self.binop(e)
        if isinstance(e, ir.Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, ir.Cast):
            return self.cast(e)
        if isinstance(e, ir.Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, ir.BufferLoad):
            ref = self.element(e.buffer, e.indices)
            return f"tw::to_float({ref})" if e.buffer.dtype.is_low_precision_float else ref
        if isinstance(e, ir.Call):
            return self.call(e)
        if isinstance(e, ir.Raw):
            return self.raw_names.get(e.text, e.text)
        if isinstance(e, ir.BarrierRef):
            return f"{self.buffer_name(e.buffer)}[{self.expr(simplify(e.index, self.ranges))}]"
        raise TypeError(f"cannot render {type(e).__name__}")

    def const(self, e: ir.Const) -> str:
        if e.dtype.kind == "bool" or isinstance(e.value, bool):
            return "true" if e.value else "false"
        if e.dtype.is_float:
            v = float(e.value)
            if math.isinf(v):
                return "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
            if math.isnan(v):
                return "__int_as_float(0x7fc00000)"
            text = repr(v)
            return text if e.dtype.name == "float64" else f"{text}f"
        if e.dtype.name in ("int64", "uint64"):
            return f"{e.value}LL"
        return str(e.value)

    def is_64_bit(self, e) -> bool:
        """The integer expression is rendered in 64 bits: a 64-bit value, or arithmetic whose value
        may leave the int32 range (module doc)."""
        if e.dtype.bits == 64 and not e.dtype.is_float:
            return True
        if not isinstance(e, ir.BinOp) or e.op not in _WIDENED_OPS or e.dtype.is_float:
            return False
        lo, hi = interval(e, self.ranges)
        if lo is None or hi is None:
            return self.wide_unknown
        return lo < INT32[0] or hi > INT32[1]

    def binop(self, e: ir.BinOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if self.is_64_bit(e) and not (self.is_64_bit(e.a) or self.is_64_bit(e.b)):
            a = f"(long long)({a})"  # the operation (and C++'s promotion of the other side) in 64 bits
        if e.op in ("//", "%") and self.is_64_bit(e) and not (
                is_nonnegative(e.a, self.ranges) and is_nonnegative(e.b, self.ranges)):
            return self.floor_div_mod_64(e.op, a, b)
        if e.op in ("min", "max"):
            fn = {"min": "fminf", "max": "fmaxf"}[e.op] if e.dtype.is_float else e.op
            if e.dtype.name == "float64":
                fn = "f" + e.op
            return f"{fn}({a}, {b})"
        if e.op in ("//", "%") and not e.dtype.is_float:
            if is_nonnegative(e.a, self.ranges) and is_nonnegative(e.b, self.ranges):
                return f"({a} {'/' if e.op == '//' else '%'} {b})"
            return f"tw::{'floordiv' if e.op == '//' else 'floormod'}({a}, {b})"
        if e.op in ("//", "%"):  # floats: Python's floor division and the modulo that goes with it
            floor = "floor" if e.dtype.name == "float64" else "floorf"
            return f"{floor}({a} / {b})" if e.op == "//" else f"({a} - {floor}({a} / {b}) * {b})"
        if e.op == "/" and not (e.a.dtype.is_float or e.b.dtype.is_float):
            return f"((float)({a}) / (float)({b}))"
        op = {"and": "&&", "or": "||"}.get(e.op, e.op)
        return f"({a} {op} {b})"

    @staticmethod
    def floor_div_mod_64(op: str, a: str, b: str) -> str:
        """Floor division or modulo of 64-bit values of any sign (tw::floordiv takes ints)."""
        if op == "//":
            return f"(({a}) / ({b}) - ((({a}) % ({b}) != 0) && ((({a}) < 0) != (({b}) < 0))))"
        return f"(((({a}) % ({b})) + ({b})) % ({b}))"

    def cast(self, e: ir.Cast) -> str:
        inner = self.expr(e.value)
        if e.dtype.is_low_precision_float:
            cpp = e.dtype.cpp
            return f"tw::to_float(tw::from_float<{cpp}>((float)({inner})))"
        return f"(({value_type(e.dtype)})({inner}))"

    def call(self, e: ir.Call) -> str:
        if e.name == "address_of":
            load = e.args[0]
            if id(load) in self.store_addresses:
                return self.store_addresses[id(load)]()
            return self.address(load.buffer, load.indices)
        if e.name in _MATH_F32:
            table = _MATH_F64 if e.dtype.name == "float64" else _MATH_F32
            return f"{table[e.name]}({self.expr(e.args[0])})"
        if e.name == "abs":
            fn = "fabsf" if e.dtype.is_float else "abs"
            return f"{fn}({self.expr(e.args[0])})"
        if e.name.startswith("."):
            target, *rest = e.args
            return f"{self.expr(target)}{e.name}({', '.join(self.expr(a) for a in rest)})"
        return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"

    # ---- buffers -----------------------------------------------------------------------------
    def buffer_name(self, buf: ir.Buffer) -> str:
        return self.names.get(buf, buf.name)

    def linear(self, buf: ir.Buffer, indices) -> str:
        offset = simplify(shared_element_offset(buf, indices), self.ranges)
        return self.wide_expr(offset) if buf.scope == "global" and wide_tensor(buf) else self.expr(offset)

    def wide_expr(self, e) -> str:
        """``e`` rendered as part of a wide tensor's offset (unknown ranges in 64 bits)."""
        outer, self.wide_unknown = self.wide_unknown, True
        try:
            return self.expr(e)
        finally:
            self.wide_unknown = outer

    def element(self, buf: ir.Buffer, indices) -> str:
        span = buf.attrs.get("swizzle", 0) if buf.scope == "shared" else 0
        name, lin = self.buffer_name(buf), self.linear(buf, indices)
        if span:
            return f"tw::swizzled<{buf.dtype.cpp}, {span}>({name}, {lin})"
        return f"{name}[{lin}]"

    def address(self, buf: ir.Buffer, indices) -> str:
        if buf.dtype.packed:
            return f"({self.buffer_name(buf)} + (({self.linear(buf, indices)}) >> 1))"
        return f"(&{self.element(buf, indices)})"

    # ---- statements --------------------------------------------------------------------------
    def emit(self, depth: int, text: str):
        self.lines.append("  " * depth + text)

    def stmt(self, s, d: int):
        if not isinstance(s, ir.SeqStmt):
            self.stmt_index += 1
        getattr(self, "s_" + type(s).__name__)(s, d)

    def s_SeqStmt(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def s_Comment(self, s, d):
        self.emit(d, f"// {s.text}")

    def s_For(self, s, d):
        start, extent = ir.const_int(s.start), ir.const_int(s.extent)
        if start is not None:  # a loop var never falls below its start (a tile loop has no constant end)
            self.ranges[s.var] = (start, start + extent - 1 if extent is not None else None)
        var = self.declare(s.var)
        begin = self.expr(s.start)
        end = self.expr(simplify(s.start + s.extent, self.ranges))
        if s.annotations.get("pairs") or s.annotations.get("matrices"):
            self.hoist_store_base(s, d)
        if self.wgmma_loop_runs_at_least_once(s, extent):
            # ptxas treats a wgmma loop that may run zero times badly: written as a for loop the
            # lower-triangular matmul's main loop ran 16-18% slower than this do-while, instruction
            # for instruction the same loop (scripts/experiments/zero_trip_loops.py).
            self.emit(d, f"int {var} = {begin};  // at least one iteration: a do-while")
            self.emit(d, "#pragma unroll 1")
            self.emit(d, "do {")
            self.stmt(s.body, d + 1)
            self.emit(d, f"}} while (++{var} < {end});")
            return
        if s.kind == "unrolled":
            self.emit(d, "#pragma unroll")
        elif s.pipeline is not None and s.pipeline.steady:
            self.emit(d, "#pragma unroll 1")
        self.emit(d, f"for (int {var} = {begin}; {var} < {end}; ++{var}) {{")
        self.stmt(s.body, d + 1)
        self.emit(d, "}")

    def wgmma_loop_runs_at_least_once(self, s: ir.For, extent) -> bool:
        """A serial loop around a wgmma gemm whose trip count is not a constant but provably at
        least one (a pipelined loop over ``(by + 1) * 2`` stages, say). Constant trip counts keep
        their for loops: ptxas sees through those already."""
        if s.kind == "unrolled" or extent is not None:
            return False
        if not any(c.name.startswith("tw::wgmma_gemm") for c in collect(s.body, ir.Call)):
            return False
        low = interval(simplify(s.extent, self.ranges), self.ranges)[0]
        return low is not None and low >= 1

    def hoist_store_base(self, s, d):
        """A loop of 16-bit result stores (``tw::store_pair`` or ``tw::store_matrix_x4``, from
        partition_parallel_loops) indexes with only the part of the offset that depends on the
        loop variable, added to a base declared before the loop: a pointer into a global tensor,
        or an element offset into a shared tile (whose swizzle applies to the sum). NVVM no
        longer has to find the common part of every unrolled copy of the whole address: for the
        global stores the cubin's code came out the same and NVRTC took ~15 ms less on the spec
        GEMM; the shared ones came with stmatrix, and the two took the spec GEMM's NVRTC time
        from 0.21 to 0.16 s on the CPU machine."""
        call = s.body.call if isinstance(s.body, ir.Evaluate) else None
        if not (isinstance(call, ir.Call) and call.name in ("tw::store_pair", "tw::store_matrix_x4")):
            return
        load = call.args[0].args[0]  # address_of(out[...])
        buf = load.buffer
        if buf.scope not in ("global", "shared") or buf.dtype.packed:
            return
        linear = simplify(shared_element_offset(buf, load.indices), self.ranges)
        aff = Affine.of(linear)
        fixed = Affine({k: t for k, t in aff.terms.items() if not uses_var(t[0], s.var)})
        if not fixed.terms or len(fixed.terms) == len(aff.terms):
            return
        moving = Affine({k: t for k, t in aff.terms.items() if k not in fixed.terms}, aff.const).to_expr(linear.dtype)
        wide = buf.scope == "global" and wide_tensor(buf)
        fixed_text = (self.wide_expr if wide else self.expr)(fixed.to_expr(linear.dtype))
        if buf.scope == "global":
            name = self.declare(ir.Var(f"{self.buffer_name(buf)}_pairs"))
            self.emit(d, f"{buf.dtype.cpp}* {name} = &{self.buffer_name(buf)}[{fixed_text}];")
            self.store_addresses[id(load)] = lambda: f"(&{name}[{(self.wide_expr if wide else self.expr)(moving)}])"
            return
        name = self.declare(ir.Var(f"{self.buffer_name(buf)}_thread"))
        self.emit(d, f"const int {name} = {fixed_text};")
        span = buf.attrs.get("swizzle", 0)

        def address() -> str:
            if span:
                return f"(&tw::swizzled<{buf.dtype.cpp}, {span}>({self.buffer_name(buf)}, ({name} + {self.expr(moving)})))"
            return f"(&{self.buffer_name(buf)}[{name} + {self.expr(moving)}])"

        self.store_addresses[id(load)] = address

    def s_IfThenElse(self, s, d):
        self.emit(d, f"if ({self.expr(s.cond)}) {{")
        self.stmt(s.then_body, d + 1)
        if s.else_body is not None:
            self.emit(d, "} else {")
            self.stmt(s.else_body, d + 1)
        self.emit(d, "}")

    def s_LetStmt(self, s, d):
        value = simplify(s.value, self.ranges)
        cpp = value_type(s.var.dtype)
        if not s.var.dtype.is_float and s.var.dtype.bits < 64 and self.is_64_bit(value):
            cpp = "long long"  # its value may pass the int32 range
        if s.var in self.block_ranges:  # a persistent kernel's block index, bound per tile
            self.ranges[s.var] = self.block_ranges[s.var]
        elif not s.var.dtype.is_float and s.var not in self.reassigned:  # else only the first value
            lo, hi = interval(value, self.ranges)
            if lo is not None or hi is not None:
                self.ranges[s.var] = (lo, hi)
        self.emit(d, f"{cpp} {self.declare(s.var)} = {self.expr(value)};")

    def s_Assign(self, s, d):
        self.ranges.pop(s.var, None)
        self.emit(d, f"{self.name(s.var)} = {self.expr(s.value)};")

    def s_BufferStore(self, s, d):
        buf, value = s.buffer, s.value
        target = self.element(buf, s.indices)
        if isinstance(value, ir.BufferLoad) and value.buffer.dtype == buf.dtype:
            rhs = self.element(value.buffer, value.indices)  # same type: move the bits
        elif buf.dtype.is_low_precision_float:
            if isinstance(value, ir.Cast) and value.dtype == buf.dtype:
                value = value.value  # the store rounds once; a cast to the same type adds nothing
            rhs = f"tw::from_float<{buf.dtype.cpp}>((float)({self.expr(value)}))"
        else:
            rhs = self.expr(value)
        self.emit(d, f"{target} = {rhs};")

    def s_Evaluate(self, s, d):
        call = s.call
        if self.debug_ns and isinstance(call, ir.Call) and call.name == ".wait":
            self.emit(d, self.debug_wait(s, call))
            return
        self.emit(d, f"{self.expr(s.call)};")

    def debug_wait(self, s, call) -> str:
        """A bounded wait that reports (barrier id, slot, parity, site, line) and exits on timeout."""
        ref, parity = call.args
        line = s.loc.line if s.loc is not None else (ref.buffer.loc.line if ref.buffer.loc is not None else 0)
        slot = self.expr(simplify(ref.index, self.ranges))
        bar = self.barrier_ids.setdefault(ref.buffer.name, len(self.barrier_ids))
        site = self.stmt_index - 1
        return (f"{self.expr(ref)}.wait_debug({self.expr(parity)}, {DEBUG_PARAM}, {bar}u, {slot}, {site}u, "
                f"{line}u, {self.debug_ns}ull);  // debug mode: bounded wait")

    def s_SyncThreads(self, s, d):
        if s.threads is not None:  # consumer threads of a warp-specialised block (never in debug mode)
            self.emit(d, f"tw::sync_consumers<{s.threads}>();")
            return
        self.emit(d, "__syncthreads();")

    def s_WarpSpecialize(self, s, d):
        tid = self.func.launch.thread_var
        outer = self.ranges[tid]
        self.emit(d, f"if ({self.name(tid)} >= {s.consumer_threads}) {{  // producer warpgroup")
        self.ranges[tid] = s.producer_range
        self.stmt(s.producer, d + 1)
        self.emit(d, "} else {  // consumer warpgroups")
        self.ranges[tid] = s.consumer_range
        self.stmt(s.consumer, d + 1)
        self.emit(d, "}")
        self.ranges[tid] = outer

    def s_Allocate(self, s, d):
        buf = s.buffer
        name = self.declare(buf)
        if buf.scope == "shared":
            off = buf.attrs["offset"]
            self.emit(d, f"{buf.dtype.cpp}* {name} = reinterpret_cast<{buf.dtype.cpp}*>(tw_smem + {off});")
        elif buf.scope == "barrier":
            off = buf.attrs["offset"]
            self.emit(d, f"unsigned char* {name}_mem = tw_smem + {off};")
            self.emit(d, f"tw::Barrier* {name} = reinterpret_cast<tw::Barrier*>({name}_mem);")
        elif buf.scope == "local":
            self.emit(d, f"{buf.dtype.cpp} {name}[{buf.numel}];")
        elif buf.scope == "global":
            self.emit(d, f"{buf.dtype.cpp}* {name} = reinterpret_cast<{buf.dtype.cpp}*>({self.expr(buf.data)});")
        else:
            raise TypeError(f"cannot allocate {buf.scope} memory")

    # ---- the kernel --------------------------------------------------------------------------
    def params(self) -> list[str]:
        out = []
        for p in self.func.params:
            if isinstance(p, ir.Buffer):
                out.append(f"{p.dtype.cpp}* __restrict__ {self.declare(p)}")
            else:
                out.append(f"{value_type(p.dtype)} {self.declare(p)}")
        for desc in self.func.attrs.get("tma_descriptors", []):
            name = self.declare(ir.Var(desc.name))
            if name != desc.name:
                self.raw_names[desc.name] = name  # lower_tma names it as text in each copy
            out.append(f"const __grid_constant__ CUtensorMap {name}")
        if self.debug_ns:
            self.taken.add(DEBUG_PARAM)
            out.append(f"unsigned int* __restrict__ {DEBUG_PARAM}")
        return out

    def rasterized_block_indices(self, launch):
        """(bx, by) from the hardware order so that consecutive blocks walk down a panel of
        ``raster_panel`` block rows (the last panel may be shorter), then move right."""
        gx, gy = (ir.const_int(g) for g in launch.grid)
        panel = launch.raster_panel
        bx, by = (self.declare(v) for v in launch.block_vars)
        self.emit(1, f"// blocks visited in panels of {panel} block rows (L2 reuse)")
        self.emit(1, "const int tw_block = blockIdx.y * gridDim.x + blockIdx.x;")
        self.emit(1, f"const int tw_panel_first = (tw_block / {panel * gx}) * {panel};")
        self.emit(1, f"const int tw_panel_rows = min({gy} - tw_panel_first, {panel});")
        self.emit(1, f"const int tw_in_panel = tw_block % {panel * gx};")
        self.emit(1, f"const int {by} = tw_panel_first + tw_in_panel % tw_panel_rows;")
        self.emit(1, f"const int {bx} = tw_in_panel / tw_panel_rows;")

    def render(self) -> str:
        launch = self.func.launch
        # Barrier ids of the debug record: declaration order (codegen/host.py's DEBUG_BARRIERS).
        self.barrier_ids = {name: i for i, name in enumerate(barrier_names(self.func))}
        rasterized = launch.raster_panel and not launch.persistent_tiles
        if rasterized:
            self.taken.update(_RASTER_NAMES)  # a kernel's own names for these get another spelling
        params = self.params()
        if self.func.attrs.get("tma_descriptors"):
            self.emit(0, "using CUtensorMap = tw::TensorMap;  // host-encoded TMA descriptors (cuTensorMapEncodeTiled)")
        self.emit(0, f'extern "C" __global__ void __launch_bounds__({launch.total_threads}, 1) {self.kernel_name}(')
        self.emit(2, (",\n    ").join(params) + ") {")
        if self.func.attrs.get("smem_bytes", 0):
            self.emit(1, "extern __shared__ __align__(1024) unsigned char tw_smem[];")
        self.emit(1, f"const int {self.declare(launch.thread_var)} = threadIdx.x;")
        if launch.persistent_tiles:
            pass  # the kernel's tile loops bind the block indices, one tile at a time
        elif rasterized:
            self.rasterized_block_indices(launch)
        else:
            for v, axis in zip(launch.block_vars, "xyz"):
                self.emit(1, f"const int {self.declare(v)} = blockIdx.{axis};")
        self.stmt(self.func.body, 1)
        self.emit(0, "}")
        return "\n".join(self.lines) + "\n"


def barrier_names(func: ir.PrimFunc) -> list[str]:
    """The kernel's barriers in declaration order (their index is the debug record's id)."""
    names: list[str] = []

    def walk(s):
        if isinstance(s, ir.SeqStmt):
            for c in s.stmts:
                walk(c)
        elif isinstance(s, ir.Allocate):
            if s.buffer.scope == "barrier" and s.buffer.name not in names:
                names.append(s.buffer.name)
        elif isinstance(s, ir.For):
            walk(s.body)
        elif isinstance(s, ir.IfThenElse):
            walk(s.then_body)
            if s.else_body is not None:
                walk(s.else_body)
        elif isinstance(s, ir.WarpSpecialize):
            walk(s.producer)
            walk(s.consumer)

    walk(func.body)
    return names


def generate_cuda(func: ir.PrimFunc, kernel_name: str, target, debug_timeout_s: float | None = None) -> str:
    """The device source. ``debug_timeout_s`` (seconds, None/0: off) switches on debug mode."""
    from .wgmma import functor_source

    body = CudaRenderer(func, kernel_name, debug_timeout_s).render()
    for shape in sorted(func.attrs.get("wgmma_shapes", ())):
        body = functor_source(*shape) + "\n" + body
    banner = (f"// Generated by tileworkbench {__version__} for {target.arch} from "
              f"{func.source_file}:{func.source_line} ({func.name}).\n"
              "// Only tileworkbench's own headers (inlined below); no CUDA toolkit headers needed.\n")
    if debug_timeout_s:
        banner += (f"// Debug mode: every mbarrier wait gives up after {debug_timeout_s:g} s and reports "
                   "where (tw.debug_barrier_timeout).\n")
    return banner + "\n" + inlined_headers(bool(debug_timeout_s)) + "\n// ---- kernel ----\n" + body
