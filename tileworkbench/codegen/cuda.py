"""CUDA C++ for one lowered PrimFunc (sm_90a), using only our headers in ``runtime/include/tw``.

``CudaRenderer`` is the CUDA override of ``codegen/c_style.CStyleRenderer``, which prints the IR the
codegen phase leaves and decides nothing itself. 16-bit floats are stored as ``tw::half`` /
``tw::bfloat16`` and every arithmetic expression on them is computed in float32: loads convert
with ``tw::to_float``, stores with ``tw::from_float<T>``, and same-type copies move raw bits, as
do choices between such values and constants the type holds exactly (a guarded gather's zeros).
Shared tiles with a swizzle are addressed through ``tw::swizzled<T, SPAN>``, the same pattern TMA
writes, so threads, TMA and the tensor cores agree on one layout.

Debug mode (``debug_timeout_s``, pass config ``tw.debug_barrier_timeout``): the kernel takes a
last parameter ``unsigned int* tw_debug`` (a record the host allocates), every mbarrier wait
becomes ``bar.wait_debug(..., tw_debug, ...);`` (bounded by the timeout; a thread that gives up
exits from inside it); block barriers stay ``__syncthreads()`` (a thread that left releases
them); see tw/sync.h for why no thread is left waiting. Without debug mode the output is exactly what it always was
(the header's debug sections are stripped).

Timeline mode (pass config ``tw.timeline``, ``func.attrs["timeline"]``, placed by the pass
``instrument_timeline``): the kernel takes a last parameter ``unsigned int* tw_timeline`` (the
buffer the host allocates), declares ``tw::Timeline<CAPACITY, STREAMS> tw_tl`` first, and
inlines ``tw/timeline.h``; without it neither the header nor the parameter is there.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..errors import InternalCompilerError, where
from ..version import __version__
from ..ir import nodes as ir
from ..ir.visitor import collect, uses_var
from . import block_order
from .c_style import MATH_F32, CStyleRenderer
from .swizzled import SwizzledAccesses

HEADER_DIR = Path(__file__).resolve().parent.parent / "runtime" / "include" / "tw"
HEADER_ORDER = ("common.h", "sync.h", "tma.h", "cp_async.h", "mma.h", "wgmma.h")

# Names a kernel's own cannot take in the generated CUDA besides C's (c_style): CUDA's types and
# built-in variables, and what the generated code itself names at kernel scope (our namespace,
# the shared-memory array, the descriptor type).
_CUDA_NAMES = frozenset({"half", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "tw", "tw_smem",
                         "CUtensorMap", "tw_rng"})

_DEBUG_SECTION = re.compile(r"^[ \t]*// >>> debug mode.*?^[ \t]*// <<< debug mode[^\n]*\n", re.MULTILINE | re.DOTALL)
DEBUG_PARAM = "tw_debug"  # the debug record parameter (last)
TIMELINE_PARAM = "tw_timeline"  # the timeline buffer parameter (before the wave)
TIMELINE_WAVE_PARAM = "tw_timeline_wave"  # blocks resident at once on the device (last): tw/timeline.h
TIMELINE_HEADER = "timeline.h"  # inlined only in timeline mode
# Headers inlined only into a kernel that calls what they define (so that adding one leaves every
# other kernel's source as it was): header -> the call that needs it.
ON_DEMAND_HEADERS = {"mma_tf32.h": "tw::gemm_ss_tf32<", "random.h": "tw::Philox tw_rng;",
                     "grid_sync.h": f"{ir.GRID_SYNC}("}


def inlined_headers(debug: bool = False, timeline: bool = False, on_demand: tuple = ()) -> str:
    """Our headers, concatenated, with their local #includes and #pragma once removed (and their
    debug-mode sections unless ``debug``; the timeline header only with ``timeline``; the
    ``on_demand`` ones of ``ON_DEMAND_HEADERS`` after the rest)."""
    parts = []
    for name in HEADER_ORDER + tuple(on_demand) + ((TIMELINE_HEADER,) if timeline else ()):
        text = (HEADER_DIR / name).read_text()
        if not debug:
            text = _DEBUG_SECTION.sub("", text)
        text = re.sub(r'^#include "[a-z_]+\.h"\n', "", text, flags=re.M)
        text = text.replace("#pragma once\n", "")
        parts.append(f"// ---- tw/{name} ----\n{text.strip()}\n")
    return "\n".join(parts)


# FP8 types: raw bytes in memory, float32 in arithmetic, converted by tw::<prefix>_to/from_float.
FP8_PREFIX = {"float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}


def value_type(dtype) -> str:
    """C++ type that holds a *value* of dtype in generated arithmetic."""
    if dtype.computed_in_float32:
        return "float"
    if dtype.name in ("float4_e2m1fn", "float4_e2m1_unpacked"):
        return "unsigned char"
    return dtype.cpp


def exact_bits(dtype, value) -> int | None:
    """The bits of ``value`` as a float16 or bfloat16, where that type holds it exactly (None
    otherwise, or for NaN, whose bits are the conversion's to choose)."""
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    if dtype.name == "float16":
        with np.errstate(over="ignore"):  # past float16's range: inf, which is not the value
            rounded = np.float16(value)
        return int(rounded.view(np.uint16)) if float(rounded) == value else None
    if dtype.name == "bfloat16":
        single = np.float32(value)
        bits = int(single.view(np.uint32))
        return bits >> 16 if float(single) == value and bits & 0xFFFF == 0 else None
    return None


def same_type_choice(renderer, e: ir.Expr, dtype) -> str | None:
    """``e`` as a value of the 16-bit ``dtype`` itself, not through float32, where it is a choice
    (``Select``, nested) between loads of ``dtype`` and constants ``dtype`` holds exactly: the
    guarded gather ``T.if_then_else(ok, KV[...], 0)`` that ``guard_global_accesses`` makes of a
    plain copy. Else None. ``renderer`` prints the loads' elements and the conditions."""
    if isinstance(e, ir.BufferLoad):
        return renderer.element(e) if e.buffer.dtype == dtype else None
    if isinstance(e, ir.Cast) and e.dtype == dtype and isinstance(e.value, ir.Const):
        e = e.value
    if isinstance(e, ir.Const):
        bits = exact_bits(dtype, e.value)
        return None if bits is None else f"{dtype.cpp}{{{bits:#06x}}}"
    if isinstance(e, ir.Select):
        a, b = same_type_choice(renderer, e.a, dtype), same_type_choice(renderer, e.b, dtype)
        return None if a is None or b is None else f"({renderer.expr(e.cond)} ? {a} : {b})"
    return None


def to_float(dtype, text: str) -> str:
    """A stored element of a 16-bit, FP8 or FP4 dtype as the float generated code computes with."""
    if dtype.is_fp4:
        return f"tw::e2m1_to_float({text})"
    if dtype.name in FP8_PREFIX:
        return f"tw::{FP8_PREFIX[dtype.name]}_to_float({text})"
    return f"tw::to_float({text})"


def from_float(dtype, text: str) -> str:
    """A float rounded to a 16-bit, FP8 or FP4 dtype, as stored (FP4: its code, one a byte)."""
    if dtype.is_fp4:
        return f"tw::e2m1_from_float({text})"
    if dtype.name in FP8_PREFIX:
        return f"tw::{FP8_PREFIX[dtype.name]}_from_float({text})"
    return f"tw::from_float<{dtype.cpp}>({text})"


def _c_string(text: str) -> str:
    """``text`` inside a C string literal that printf reads as a format: quotes, backslashes and
    percent signs escaped, other characters outside printable ASCII as octal escapes."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "%":
            out.append("%%")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode())
    return "".join(out)


def _printf_spec(dtype) -> tuple[str, str]:
    """printf's conversion for a value of ``dtype`` and the C type it is passed as."""
    if dtype.is_float:
        return "%g", "double"
    if dtype.kind == "uint":
        return "%llu", "unsigned long long"
    return "%lld", "long long"


def _integer(dtype) -> bool:
    """An integer type (not bool): a float converts to it through ``tw::to_integer``."""
    return dtype.kind in ("int", "uint")


class CudaRenderer(SwizzledAccesses, CStyleRenderer):
    """The CUDA spelling of a kernel (module doc): 16-bit floats held as float, swizzled shared
    tiles, shared memory and mbarriers, warp-specialised branches, the kernel's frame."""

    reserved = CStyleRenderer.reserved | _CUDA_NAMES
    math_f32 = {**MATH_F32, "sigmoid": "tw::sigmoid"}

    def __init__(self, func: ir.PrimFunc, kernel_name: str, debug_timeout_s: float | None = None,
                 code_offset: int = 0):
        super().__init__(func)
        self.kernel_name = kernel_name
        self.code_offset = code_offset
        self.debug_ns = int(debug_timeout_s * 1e9) if debug_timeout_s else 0
        self.hands_registers_over = bool(self.debug_ns) and any(
            isinstance(s.call, ir.Call) and ir.max_registers_set(s.call.name) for s in collect(func.body, ir.Evaluate))
        self.stmt_index = 0  # pre-order number of the statement being rendered (analysis/program.py's)
        self.barrier_ids: dict = {}
        self.draws_random = False  # a call of the thread's generator was rendered (tw/random.h)

    # ---- values ------------------------------------------------------------------------------
    def value_type(self, dtype) -> str:
        return value_type(dtype)

    def special_float(self, v: float) -> str:
        if math.isinf(v):
            return "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
        return "__int_as_float(0x7fc00000)"

    def floor_div_mod(self, op: str, a: str, b: str) -> str:
        return f"tw::{'floordiv' if op == '//' else 'floormod'}({a}, {b})"

    def e_Cast(self, e: ir.Cast) -> str:
        if e.dtype.computed_in_float32:  # rounded to the type, held as float
            return to_float(e.dtype, from_float(e.dtype, f"(float)({self.expr(e.value)})"))
        if _integer(e.dtype) and e.value.dtype.is_float:  # C's own conversion: undefined out of range, NaN
            source = "double" if e.value.dtype.bits == 64 else "float"
            return f"tw::to_integer<{value_type(e.dtype)}>(({source})({self.expr(e.value)}))"
        return super().e_Cast(e)

    def e_Call(self, e: ir.Call) -> str:
        if e.name.startswith("tw_rng."):  # T.rng_init and the draws: the generator is declared at the top
            self.draws_random = True
        if e.name == ir.REINTERPRET:
            return self.reinterpret(e.args[0], e.dtype)
        if e.name == ir.PRINT:
            return self.print_call(e)
        return super().e_Call(e)

    def print_call(self, e: ir.Call) -> str:
        """``T.print``: one ``printf`` line, ``label[i, j] = value (block (x, y) thread t)``."""
        label, where, value, indices = ir.print_parts(e)
        fmt, args = _c_string(label), []
        if indices:
            fmt += "[" + ", ".join("%lld" for _ in indices) + "]"
            args += [f"(long long)({self.expr(i)})" for i in indices]
        if value is not None:
            spec, cast = _printf_spec(value.dtype)
            fmt += f" = {spec}"
            args.append(f"({cast})({self.expr(value)})")
        fmt += " (block (" + ", ".join("%d" for _ in where[:-1]) + ") thread %d)\\n"
        args += [f"(int)({self.expr(w)})" for w in where]
        return f'printf("{fmt}", {", ".join(args)})'

    def reinterpret(self, value: ir.Expr, dtype) -> str:
        """``T.reinterpret``: the value's bits as ``dtype`` (same width). A 16-bit or FP8 float is
        held as float32: its bits are those of the value rounded back to its type (exact), and a
        result of such a type is held as float32 again."""
        text = self.expr(value)
        if value.dtype.computed_in_float32:
            text = from_float(value.dtype, text)
        if dtype.computed_in_float32:
            return to_float(dtype, f"tw::bit_cast<{dtype.cpp}>({text})")
        return f"tw::bit_cast<{value_type(dtype)}>({text})"

    def e_BufferLoad(self, e: ir.BufferLoad) -> str:
        if e.buffer.packed_in_memory:  # two FP4 codes a byte
            return self.load(e, f"tw::fp4_code({self.buffer_name(e.buffer)}, {self.offset(e)})")
        return super().e_BufferLoad(e)

    def load(self, load: ir.BufferLoad, element: str) -> str:
        return to_float(load.buffer.dtype, element) if load.buffer.dtype.computed_in_float32 else element

    def store_value(self, store: ir.BufferStore) -> str:
        buf, value = store.buffer, store.value
        if buf.packed_in_memory:  # verify_tile_ops refuses these
            raise InternalCompilerError(f"a store of one element into packed FP4 {buf.name} reached the code "
                                        "generator (half a byte: two threads would race on it)")
        if buf.dtype.computed_in_float32 and isinstance(value, ir.Select):
            chosen = same_type_choice(self, value, buf.dtype)
            if chosen is not None:  # a choice between elements of the stored type moves bits too
                return chosen
        if buf.dtype.computed_in_float32 and not (isinstance(value, ir.BufferLoad) and value.buffer.dtype == buf.dtype):
            if isinstance(value, ir.Cast) and value.dtype == buf.dtype:
                value = value.value  # the store rounds once; a cast to the same type adds nothing
            return from_float(buf.dtype, f"(float)({self.expr(value)})")
        return super().store_value(store)

    # ---- statements --------------------------------------------------------------------------
    def stmt(self, s, d: int):
        # The numbering is the lowered IR's (the analyses' sites); the codegen phase's base
        # offsets are not in it.
        if not isinstance(s, (ir.SeqStmt, ir.BaseOffset)):
            self.stmt_index += 1
        super().stmt(s, d)

    def loop_pragma(self, s: ir.For) -> str | None:
        if s.form.at_least_once:
            # ptxas treats a wgmma loop that may run zero times badly: written as a for loop the
            # lower-triangular matmul's main loop ran 16-18% slower than this do-while, instruction
            # for instruction the same loop (scripts/experiments/zero_trip_loops.py).
            return "#pragma unroll 1"
        if s.kind == "unrolled":
            return f"#pragma unroll {s.form.unroll_by}" if s.form.unroll_by else "#pragma unroll"
        if s.pipeline is not None and s.pipeline.steady:
            return "#pragma unroll 1"
        return None

    def s_Evaluate(self, s, d):
        call = s.call
        if self.debug_ns and isinstance(call, ir.Call) and call.name == ".wait":
            self.emit(d, self.debug_wait(s, call))
            return
        if self.debug_ns and isinstance(call, ir.Call) and call.name == ir.GRID_SYNC:
            self.emit(d, f"{ir.GRID_SYNC}({ir.GRID_BARRIER_PARAM}, {DEBUG_PARAM});")  # leaves once a wait reported
            return
        super().s_Evaluate(s, d)



    def debug_wait(self, s, call) -> str:
        """A bounded wait that reports (barrier id, slot, parity, site, line) and exits on timeout."""
        ref, parity = call.args
        line = s.loc.line if s.loc is not None else (ref.buffer.loc.line if ref.buffer.loc is not None else 0)
        slot = self.expr(ref.index)
        bar = self.barrier_ids.setdefault(ref.buffer.name, len(self.barrier_ids))
        site = self.stmt_index - 1
        # a kernel that hands registers over keeps its setmaxnreg only with the bounded loop inline (tw/sync.h)
        wait = "wait_debug_inline" if self.hands_registers_over else "wait_debug"
        return (f"{self.expr(ref)}.{wait}({self.expr(parity)}, {DEBUG_PARAM}, {bar}u, {slot}, {site}u, "
                f"{line}u, {self.debug_ns}ull);  // debug mode: bounded wait")

    def s_SyncThreads(self, s, d):
        if s.threads is not None and s.barrier != 1:  # a T.ws scope's threads
            self.emit(d, f"tw::sync_named<{s.barrier}, {s.threads}>();")
            return
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

    def s_ThreadScope(self, s, d):
        tid = self.name(self.func.launch.thread_var)
        self.emit(d, f"if ({tid} >= {s.first} && {tid} < {s.first + s.count}) {{  // {s.spelling}")
        if uses_var(s.body, s.var):
            self.emit(d + 1, f"const int {self.declare(s.var)} = {tid} - {s.first};")
        self.stmt(s.body, d + 1)
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
            align = buf.attrs.get("align_bytes")  # moved in 16-byte runs (rules.fragment_runs)
            self.emit(d, f"{f'alignas({align}) ' if align else ''}{buf.dtype.cpp} {name}[{buf.numel}];")
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
        if ir.syncs_grid(self.func.body):  # the word its grid barriers count in (host: zeroed per launch)
            self.taken.add(ir.GRID_BARRIER_PARAM)
            out.append(f"unsigned int* {ir.GRID_BARRIER_PARAM}")
        if self.debug_ns:
            self.taken.add(DEBUG_PARAM)
            out.append(f"unsigned int* __restrict__ {DEBUG_PARAM}")
        if self.func.attrs.get("timeline") is not None:
            self.taken.update((TIMELINE_PARAM, TIMELINE_WAVE_PARAM, "tw_tl"))
            out.append(f"unsigned int* __restrict__ {TIMELINE_PARAM}")
            out.append(f"unsigned int {TIMELINE_WAVE_PARAM}")
        return out

    def render(self) -> str:
        launch = self.func.launch
        # Barrier ids of the debug record: declaration order (codegen/host.py's DEBUG_BARRIERS).
        self.barrier_ids = {name: i for i, name in enumerate(barrier_names(self.func))}
        self.taken.update(block_order.reserved_names(launch))  # the kernel's own such names are respelt
        params = self.params()
        if self.func.attrs.get("tma_descriptors"):
            self.emit(0, "using CUtensorMap = tw::TensorMap;  // host-encoded TMA descriptors (cuTensorMapEncodeTiled)")
        self.emit(0, f'extern "C" __global__ void __launch_bounds__({launch.total_threads}, 1) {self.kernel_name}(')
        self.emit(2, (",\n    ").join(params) + ") {")
        if self.func.attrs.get("smem_bytes", 0):
            self.emit(1, "extern __shared__ __align__(1024) unsigned char tw_smem[];")
        self.emit(1, f"const int {self.declare(launch.thread_var)} = threadIdx.x;")
        generator_at = len(self.lines)
        if self.code_offset:  # tw.code_offset: where ptxas places a loop can move a kernel by percents
            self.emit(1, f"// tw.code_offset: {self.code_offset} one-instruction fillers, the code after them "
                         f"moved {16 * self.code_offset} bytes")
            for _ in range(self.code_offset):
                self.emit(1, 'asm volatile("nanosleep.u32 0;");')
        timeline = self.func.attrs.get("timeline")
        if timeline is not None:
            tiles = timeline.unit == "tile"  # every block opens its streams and samples its tiles
            sampling = (f"{timeline.block_every}, {timeline.every}" if tiles
                        else f"{timeline.every}, 1, {TIMELINE_WAVE_PARAM}")
            says = (f"every block records every {timeline.every} tile(s)" if tiles
                    else f"every {timeline.every} block(s) record" + (", none of the last wave"
                                                                    if timeline.every > 1 else ""))
            self.emit(1, f"tw::Timeline<{timeline.capacity}, {len(timeline.recorders)}> tw_tl({TIMELINE_PARAM}, "
                         f"{sampling});  // tw.timeline: {says}")
        names = [self.declare(v) for v in launch.block_vars] if not launch.persistent_tiles else []
        for line in block_order.block_index_lines(launch, names):
            self.emit(1, line)
        self.stmt(self.func.body, 1)
        if self.draws_random:
            self.lines.insert(generator_at, "  tw::Philox tw_rng;  // this thread's random numbers (T.rng_init)")
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
        elif isinstance(s, (ir.For, ir.While)):
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


def generate_cuda(func: ir.PrimFunc, kernel_name: str, target, debug_timeout_s: float | None = None,
                  code_offset: int = 0) -> str:
    """The device source. ``debug_timeout_s`` (seconds, None/0: off) switches on debug mode;
    ``code_offset`` (``tw.code_offset``) puts that many one-instruction fillers at the top of the
    kernel, which move the code after them 16 bytes each (docs/experiments.md, "Where the loop lands")."""
    from .wgmma import functor_source

    body = CudaRenderer(func, kernel_name, debug_timeout_s, code_offset).render()
    for shape in sorted(func.attrs.get("wgmma_shapes", ())):
        body = functor_source(*shape) + "\n" + body
    banner = (f"// Generated by tileworkbench {__version__} for {target.arch} from "
              f"{where(func.source_file, func.source_line)} ({func.name}).\n"
              "// Only tileworkbench's own headers (inlined below); no CUDA toolkit headers needed.\n")
    if debug_timeout_s:
        banner += (f"// Debug mode: every mbarrier wait gives up after {debug_timeout_s:g} s and reports "
                   "where (tw.debug_barrier_timeout).\n")
    timeline = func.attrs.get("timeline") is not None
    if timeline:
        banner += "// Timeline mode: the kernel records its barrier, TMA, wgmma and store events (tw.timeline).\n"
    on_demand = tuple(name for name, call in ON_DEMAND_HEADERS.items() if call in body)
    imported = "".join(f"// T.import_source\n{text.strip()}\n\n" for text in func.launch.extern_sources)
    return (banner + "\n" + inlined_headers(bool(debug_timeout_s), timeline, on_demand) + "\n// ---- kernel ----\n"
            + imported + body)
