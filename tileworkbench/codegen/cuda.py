"""CUDA C++ for one lowered PrimFunc (sm_90a), using only our headers in ``runtime/include/tw``.

The renderer prints the IR the codegen phase leaves (``passes/linearize_accesses``,
``passes/resolve_int_arithmetic``): every access one element offset, every integer operation
typed with the width it needs and ``truncdiv``/``truncmod`` where C's ``/`` and ``%`` are right,
every loop with the bound it runs to; it decides nothing of that itself. 16-bit floats are stored as ``tw::half`` /
``tw::bfloat16`` and every arithmetic expression on them is computed in float32: loads convert
with ``tw::to_float``, stores with ``tw::from_float<T>``, and same-type copies move raw bits.
Shared tiles with a swizzle are addressed through ``tw::swizzled<T, SPAN>``, the same pattern TMA
writes, so threads, TMA and the tensor cores agree on one layout.

An ``int64`` operation on narrower operands casts its left operand to ``long long`` (C++ promotes
the other side); ``//`` and ``%`` on values that may be negative are floor division and modulo
(``tw::floordiv``, or inline for 64-bit values).

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
        self.lines: list[str] = []
        self.names: dict = {}
        self.taken: set = set()
        self.raw_names: dict = {}  # names that lowering wrote as text (ir.Raw) -> their C++ spelling

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
            ref = self.element(e)
            return f"tw::to_float({ref})" if e.buffer.dtype.is_low_precision_float else ref
        if isinstance(e, ir.Call):
            return self.call(e)
        if isinstance(e, ir.Raw):
            return self.raw_names.get(e.text, e.text)
        if isinstance(e, ir.BarrierRef):
            return f"{self.buffer_name(e.buffer)}[{self.expr(e.index)}]"
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

    @staticmethod
    def is_64_bit(e) -> bool:
        return e.dtype.bits == 64 and not e.dtype.is_float

    def binop(self, e: ir.BinOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if self.is_64_bit(e) and not (self.is_64_bit(e.a) or self.is_64_bit(e.b)):
            a = f"(long long)({a})"  # the operation (and C++'s promotion of the other side) in 64 bits
        if e.op in ("truncdiv", "truncmod"):
            return f"({a} {'/' if e.op == 'truncdiv' else '%'} {b})"
        if e.op in ("//", "%") and self.is_64_bit(e):
            return self.floor_div_mod_64(e.op, a, b)
        if e.op in ("min", "max"):
            fn = {"min": "fminf", "max": "fmaxf"}[e.op] if e.dtype.is_float else e.op
            if e.dtype.name == "float64":
                fn = "f" + e.op
            return f"{fn}({a}, {b})"
        if e.op in ("//", "%") and not e.dtype.is_float:
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
            return self.address(e.args[0])
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

    def offset(self, access) -> str:
        """The element offset of a flat access (``linearize_accesses``)."""
        if not access.flat:
            raise TypeError(f"{access.buffer.name}: a {access.buffer.scope} access the codegen phase left unflattened")
        return self.expr(access.indices[0])

    def element(self, access) -> str:
        """The element a ``BufferLoad`` or ``BufferStore`` names, as an lvalue."""
        buf = access.buffer
        span = buf.attrs.get("swizzle", 0) if buf.scope == "shared" else 0
        name, lin = self.buffer_name(buf), self.offset(access)
        if span:
            return f"tw::swizzled<{buf.dtype.cpp}, {span}>({name}, {lin})"
        return f"{name}[{lin}]"

    def address(self, load: ir.BufferLoad) -> str:
        if load.buffer.dtype.packed:
            return f"({self.buffer_name(load.buffer)} + (({self.offset(load)}) >> 1))"
        return f"(&{self.element(load)})"

    # ---- statements --------------------------------------------------------------------------
    def emit(self, depth: int, text: str):
        self.lines.append("  " * depth + text)

    def stmt(self, s, d: int):
        # The numbering is the lowered IR's (the analyses' sites); the codegen phase's base
        # offsets are not in it.
        if not isinstance(s, (ir.SeqStmt, ir.BaseOffset)):
            self.stmt_index += 1
        getattr(self, "s_" + type(s).__name__)(s, d)

    def s_SeqStmt(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def s_Comment(self, s, d):
        self.emit(d, f"// {s.text}")

    def s_For(self, s, d):
        var = self.declare(s.var)
        begin, end = self.expr(s.start), self.expr(s.form.end)
        if s.form.at_least_once:
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

    def s_BaseOffset(self, s, d):
        """A loop of result stores indexes from this base (``linearize_accesses``)."""
        name, offset = self.declare(s.target), self.expr(s.offset)
        if isinstance(s.target, ir.Buffer):  # a pointer into the global tensor
            self.emit(d, f"{s.buffer.dtype.cpp}* {name} = &{self.buffer_name(s.buffer)}[{offset}];")
        else:  # an element offset into the shared tile
            self.emit(d, f"const int {name} = {offset};")

    def s_IfThenElse(self, s, d):
        self.emit(d, f"if ({self.expr(s.cond)}) {{")
        self.stmt(s.then_body, d + 1)
        if s.else_body is not None:
            self.emit(d, "} else {")
            self.stmt(s.else_body, d + 1)
        self.emit(d, "}")

    def s_LetStmt(self, s, d):
        self.emit(d, f"{value_type(s.var.dtype)} {self.declare(s.var)} = {self.expr(s.value)};")

    def s_Assign(self, s, d):
        self.emit(d, f"{self.name(s.var)} = {self.expr(s.value)};")

    def s_BufferStore(self, s, d):
        buf, value = s.buffer, s.value
        target = self.element(s)
        if isinstance(value, ir.BufferLoad) and value.buffer.dtype == buf.dtype:
            rhs = self.element(value)  # same type: move the bits
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
        slot = self.expr(ref.index)
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
        self.emit(d, f"if ({self.name(tid)} >= {s.consumer_threads}) {{  // producer warpgroup")
        self.stmt(s.producer, d + 1)
        self.emit(d, "} else {  // consumer warpgroups")
        self.stmt(s.consumer, d + 1)
        self.emit(d, "}")

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
