"""``tileworkbench.lower``: front end + pass pipeline + code generators, no GPU needed."""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import numbers
import threading
import time
import warnings
from dataclasses import dataclass, field

from ..version import __version__
from ..analysis.stage import run_analyses
from ..backend.nvrtc import RegisterShortage
from ..codegen import block_order
from ..codegen.cuda import generate_cuda
from ..codegen.host import fast_call_plan, generate_host
from ..errors import (CompileError, SourceLocation, TileworkbenchWarning, internal_errors, labelled, user_error,
                      where)
from ..frontend import parse
from ..frontend.parser import deep_recursion
from ..ir import nodes as ir
from ..ir.printer import print_ir
from ..ir.visitor import collect
from ..passes.manager import LowerContext, run_pipeline
from ..passes.plan_shared_memory import SplitDoesNotFit
from ..passes import reread_thread_index
from ..passes.pipeline import REREAD, codegen_pass_list, pass_list
from ..passes.rules.registers import fragment_registers, thread_register_limit
from ..trace import Trace
from ..target import PassConfigKey, PassContext, Target

@dataclass
class Artifact:
    """What lowering produces. ``device_mod``/``host_mod`` are IR texts (as TileLang's are)."""

    func: ir.PrimFunc  # the lowered function
    source_func: ir.PrimFunc  # the function as parsed
    kernel_name: str
    device_source: str
    host_source: str
    trace: Trace
    target: Target
    pass_configs: dict
    tma_descriptors: dict = field(default_factory=dict)
    # With enable_device_compile: NVRTC's result (the cubin, ptxas's report) and how long lower()
    # waited for it after its own work (NVRTC runs in a thread while the analyses run).
    nvrtc: object = None  # backend.nvrtc.NvrtcResult
    nvrtc_wait_s: float = 0.0
    # What the C launch path checks and launches (codegen.host.fast_call_plan); None: calls take
    # the Python launcher.
    fast_plan: dict | None = None

    @property
    def kernel_source(self) -> str:
        return self.device_source

    @property
    def device_mod(self) -> str:
        return print_ir(self.func)

    @property
    def host_mod(self) -> str:
        return self.host_source


def lower(func, target="auto", pass_configs=None, enable_device_compile=False, out_idx=None) -> Artifact:
    """Lower a ``@T.prim_func`` (or a plain function written in the DSL) to CUDA and a host launcher,
    then run the analysis stage on the result (``analysis.stage``: shared-memory plan, barrier
    simulation, barrier check), each recorded in ``artifact.trace``.

    With ``enable_device_compile=True`` the generated CUDA is also compiled by NVRTC to a cubin
    (no GPU needed): ``artifact.nvrtc`` holds it, the trace records registers and spills. NVRTC
    runs in a thread while the host launcher is generated and the analyses run (it releases the
    GIL); an analysis that rejects the kernel raises first, and that compile is discarded.
    """
    tgt = Target.of(target)
    configs = PassContext.merged_configs(pass_configs)
    src = parse(func)
    if isinstance(src, ir.KernelSequence):
        raise user_error(f"{src.name} runs {len(src.kernels)} kernel(s) one after another (several `with "
                         "T.Kernel` blocks, or T.alloc_global workspaces): lower each of them "
                         f"(`{src.name}.kernels[i]`), or compile the whole with tileworkbench.compile")
    check_out_idx(out_idx, [(p.name, isinstance(p, ir.Buffer)) for p in src.params], src.name)
    with deep_recursion():
        return _lower(src, tgt, configs, enable_device_compile, out_idx)


def lower_tile_level(src: ir.PrimFunc, configs: dict, trace: Trace | None = None) -> ir.PrimFunc:
    """The kernel compiled for sm_90a through its tile-level passes (pipelining, versions,
    warp specialisation), before TMA, tile operations and threads are lowered: what the CPU
    interpreter runs."""
    tiles = [name for name in pass_list(configs)]
    tiles = tiles[:tiles.index("lower_tma")]
    ctx = LowerContext(Target.of("sm_90a"), configs)
    with deep_recursion():
        return run_pipeline(copy.deepcopy(src), tiles, ctx, trace or Trace(kernel={"name": src.name}))


def _new_trace(src: ir.PrimFunc, tgt: Target, configs: dict) -> Trace:
    return Trace(kernel={"name": src.name, "target": tgt.to_json(), "pass_configs": _jsonable(configs),
                         "source_file": src.source_file, "source_line": src.source_line,
                         "version": __version__,
                         # a notebook cell, as the user knows it (In [3], line 10)
                         **({"source_label": where(src.source_file, src.source_line)}
                            if labelled(src.source_file) else {})})


def _warp_specialization(src: ir.PrimFunc, lowered: ir.PrimFunc) -> dict | None:
    """What ``warp_specialize`` made of a kernel's pipelined loop, for the trace (None for a kernel
    without one): split (its stages, consumer threads, whether its shared tiles share bytes by
    lifetime) or kept to one role, and why."""
    if not any(loop.kind == "pipelined" for loop in collect(src.body, ir.For)):
        return None
    ws = lowered.attrs.get("warp_specialized") or {}
    if not ws.get("applied"):
        return {"applied": False, "reason": ws.get("reason", "not tried"), "retried": bool(ws.get("retried"))}
    return {"applied": True, "stages": ws["stages"], "consumer_threads": ws["consumer_threads"],
            "producer_threads": ws["producer_threads"], "shares_bytes": bool(ws.get("shares_bytes"))}


def _lower(src: ir.PrimFunc, tgt: Target, configs: dict, enable_device_compile: bool, out_idx) -> "Artifact":
    trace = _new_trace(src, tgt, configs)
    ctx = LowerContext(tgt, configs)
    # Passes record what they learn on buffers (layouts, offsets); work on a copy so the parsed
    # function stays as written (its printed IR is the compile-cache key).
    try:
        lowered = run_pipeline(copy.deepcopy(src), pass_list(configs), ctx, trace)
    except SplitDoesNotFit:
        # warp_specialize sized the split's tiles by lifetime and plan_shared_memory could not place
        # them so: the one-role pipeline, whose tiles fit (the trace says why, as for any refusal)
        configs = {**configs, PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value: True}
        trace, ctx = _new_trace(src, tgt, configs), LowerContext(tgt, configs)
        lowered = run_pipeline(copy.deepcopy(src), pass_list(configs), ctx, trace)
        lowered.attrs["warp_specialized"] = {"applied": False, "retried": True, "reason": (
            "split, its shared tiles placed by lifetime did not fit after all: compiled again with one role")}
    # The codegen phase builds new nodes only, so ``lowered`` stays what the analyses and the host
    # code read.
    printed = run_pipeline(lowered, codegen_pass_list(configs), ctx, trace)
    kernel_name = f"{src.name}_kernel"
    debug = debug_timeout(configs)
    with internal_errors("code generation", SourceLocation(src.source_file, src.source_line)):
        device = generate_cuda(printed, kernel_name, tgt, debug_timeout_s=debug,
                               code_offset=configs.get(PassConfigKey.TW_CODE_OFFSET.value, 0))
        host = generate_host(lowered, kernel_name, out_idx, debug_timeout_s=debug,
                             timeline=printed.attrs.get("timeline"))
        fast_plan = fast_call_plan(lowered, debug_timeout_s=debug, timeline=printed.attrs.get("timeline"))
    device_compile = (_start_device_compile(device, tgt.arch, f"{src.name}.cu", nvrtc_extra_options(configs))
                      if enable_device_compile else None)
    reread = (enable_device_compile and _RereadTrial.wanted(printed, configs)) or None
    trial = functools.partial(_RereadTrial, printed, ctx, trace, kernel_name, f"{src.name}.cu", debug,
                              SourceLocation(src.source_file, src.source_line))
    if reread and _RereadTrial.alongside(lowered):
        reread = trial()
    trace.sources = {"device": device, "host": host}
    if printed.attrs.get("timeline") is not None:
        trace.timeline = {"plan": printed.attrs["timeline"].to_json(), "measured": None}
    descs = lowered.attrs.get("tma_descriptors", [])
    trace.tma_descriptors = [d.to_json() for d in descs]
    trace.resources.update({"smem_bytes": lowered.attrs.get("smem_bytes", 0), "threads": lowered.launch.threads,
                            "grid": [ir.const_int(g) for g in lowered.launch.grid],
                            "block_order": block_order.describe(lowered.launch)})
    split = _warp_specialization(src, lowered)
    if split is not None:
        trace.resources["warp_specialization"] = split
    artifact = Artifact(lowered, src, kernel_name, device, host, trace, tgt, configs, {d.name: d for d in descs},
                        fast_plan=fast_plan)
    run_analyses(artifact)  # the analysis stage: smem plan, barrier simulation and check (analysis/stage.py)
    if device_compile is not None:
        wait_start = time.perf_counter()
        try:
            result = device_compile.result()  # NVRTC's CompileError, with its log, surfaces here
        except RegisterShortage as short:
            raise _registers_error(src, lowered.launch, short) from None
        if isinstance(reread, _RereadTrial) and result.spills_bytes:  # compiled beside the first form
            result = reread.choose(artifact, result)
        elif reread and (result.spills_bytes or 0) > REREAD_AFTER_MIN_SPILL_BYTES:  # worth a second compile now
            result = trial().choose(artifact, result)
        artifact.nvrtc_wait_s = time.perf_counter() - wait_start
        artifact.nvrtc = result
        trace.resources.update({"registers": result.registers, "spills_bytes": result.spills_bytes})
        trace.findings += _ptxas_findings(src, result)
    return artifact


# How many fewer registers a thread the form reading the index again may use and still count as
# needing the registers the loop had (ptxas's counts at its limit move by a few)
REREAD_REGISTER_SLACK = 4
# A kernel whose fragments alone take this share of a thread's registers or more has its second
# form compiled beside the first (NVRTC in a thread of its own), not after the first spilled:
# TileLang's sparse MLA kernels, stream-K, FlashAttention's backward (0.75 to 1.9); of the 112
# kernels of the bench cases and TileLang's examples compiled in session 41, those that spilled
# below it were the mHC pre-norm GEMM (0.42) and the Hadamard transform (0.50)
REREAD_ALONGSIDE_SHARE = 0.7
# Spills up to this many bytes do not get the second form compiled after the first: that doubles
# the cold compile (the Hadamard transform: 0.30 + 0.30 s, 16 bytes spilled with either form) for
# a few local accesses a thread; the smallest spill the second form removed so far was 40 bytes
# (the mHC pre-norm GEMM, session 43's survey of TileLang's examples)
REREAD_AFTER_MIN_SPILL_BYTES = 16


class _RereadTrial:
    """The kernel's second form, its main loop reading the thread index again
    (``passes/reread_thread_index.py``: NVVM lifts the values computed from the index out of the
    loop, and ptxas at its register limit spills them), generated and given to NVRTC in a thread;
    ``choose`` keeps it or the first form. Only where ``tw.reread_thread_index`` is unset, the
    kernel records no timeline and has a main loop that reads the thread index (``wanted``)."""

    def __init__(self, printed: ir.PrimFunc, ctx: LowerContext, trace: Trace, kernel_name: str, name: str,
                 debug, loc: SourceLocation):
        configs = ctx.configs
        before = len(trace.passes)
        self.compile, self.failed = None, None
        try:
            reread = run_pipeline(printed, REREAD, ctx, trace)
            with internal_errors("code generation", loc):
                self.device = generate_cuda(reread, kernel_name, ctx.target, debug_timeout_s=debug,
                                            code_offset=configs.get(PassConfigKey.TW_CODE_OFFSET.value, 0))
            self.compile = _start_device_compile(self.device, ctx.target.arch, name, nvrtc_extra_options(configs))
        except CompileError as err:  # a bug of this second form's: the first stands (``choose`` says so)
            self.failed = err
        self.snapshots = trace.passes[before:]  # the trace takes them back if this form is kept
        del trace.passes[before:]

    @staticmethod
    def wanted(printed: ir.PrimFunc, configs: dict) -> bool:
        return PassConfigKey.TW_REREAD_THREAD_INDEX.value not in configs and \
            printed.attrs.get("timeline") is None and reread_thread_index.applies(printed)

    @staticmethod
    def alongside(lowered: ir.PrimFunc) -> bool:
        """Whether to compile the second form beside the first, before knowing that it spills."""
        return fragment_registers(lowered) >= REREAD_ALONGSIDE_SHARE * thread_register_limit(lowered.launch.threads)

    def choose(self, artifact: "Artifact", result):
        """The NVRTC result kept: this form's where ptxas spills fewer bytes with it and it uses as
        many registers as the first (then the values NVVM lifted had pushed the loop's own work
        into local memory; where reading the index again frees registers, the lifted values had
        mostly fit in them, and computing them again each iteration costs more than the few bytes
        it stops spilling: FlashAttention's backward, 254 -> 192 registers, 8 -> 0 bytes, 12%
        slower on an H100, session 41). The artifact's source and the trace's sources and pass
        snapshots follow the form kept; ``resources.thread_index_reread`` says what each spilled
        and used."""
        other = None
        try:
            if self.compile is not None:
                other = self.compile.result()
        except RegisterShortage:
            pass
        except CompileError as err:
            self.failed = err
        trace = artifact.trace
        if self.failed is not None:  # an optional form must not cost the kernel its compile; but say so
            message = str(self.failed).strip().splitlines()[0] if str(self.failed).strip() else repr(self.failed)
            trace.resources["thread_index_reread"] = {"kept": False, "error": message}
            warnings.warn(f"{artifact.kernel_name}: the form reading the thread index again could not be compiled "
                          f"({message}); the kernel keeps its first form. This is a compiler bug: please report it "
                          "with the kernel", TileworkbenchWarning, stacklevel=2)
            return result
        spills = None if other is None else (other.spills_bytes or 0)
        kept = spills is not None and spills < result.spills_bytes and \
            (other.registers or 0) >= (result.registers or 0) - REREAD_REGISTER_SLACK
        trace.resources["thread_index_reread"] = {"kept": kept, "spills_bytes": spills,
                                                  "spills_bytes_without": result.spills_bytes,
                                                  "registers": None if other is None else other.registers,
                                                  "registers_without": result.registers}
        if not kept:
            return result
        trace.passes += self.snapshots
        artifact.device_source = trace.sources["device"] = self.device
        return other


def interpreted_arch(func: ir.PrimFunc) -> str:
    """The GPU a CPU-interpreted kernel's trace and CUDA stand for: sm_100 where it asks for a TMA
    copy of FP4 data (``T.tma_copy``, or ``prefer_instruction="tma"``: 4-bit tensor maps are
    sm_100's, the spec's FP4 kernels), else sm_90a."""
    copies = [c for c in collect(func.body, (ir.TmaCopy, ir.Copy)) if isinstance(c, ir.TmaCopy) or c.instruction == "tma"]
    return "sm_100" if any(r.buffer.dtype.is_fp4 for c in copies for r in (c.src, c.dst)) else "sm_90a"


def _at_largest_gemm(src: ir.PrimFunc) -> SourceLocation:
    """Where register trouble is the user's to fix: the kernel's largest gemm (whose accumulator
    holds most of the registers), or else its first line."""
    biggest = max(collect(src.body, ir.Gemm), key=lambda g: g.c.buffer.numel, default=None)
    if biggest is not None and biggest.loc is not None:
        return biggest.loc
    return SourceLocation(src.source_file, src.source_line)


# What a kernel's author can do about ptxas's notes, by code
_PTXAS_HINTS = {
    "C7511": ("the kernel is short of registers: its gemm accumulators and fragments need more than a thread has "
              "(a float32 accumulator of block_M x block_N keeps block_M * block_N / threads in each thread); "
              "smaller tiles or more threads keep the wgmma pipeline whole"),
}


def _ptxas_findings(src: ir.PrimFunc, result) -> list[dict]:
    """ptxas's performance notes as warnings in the trace, at the kernel's largest gemm (whose
    accumulator holds the registers the notes are about) or else its first line."""
    line = _at_largest_gemm(src).line
    return [{"severity": "warning", "source": "ptxas", "code": code, "line": line,
             "message": f"ptxas ({code}): {note}" + (f"; {_PTXAS_HINTS[code]}" if code in _PTXAS_HINTS else "")}
            for code, note in result.performance_notes]


def _registers_error(src: ir.PrimFunc, launch, short) -> CompileError:
    """The user's error for a kernel ptxas could not fit in registers, at its largest gemm (whose
    accumulator the registers hold) or else its first line."""
    loc = _at_largest_gemm(src)
    producer = f" ({launch.threads} + a {launch.producer_threads}-thread producer warpgroup)" \
        if launch.producer_threads else ""
    return CompileError(
        f"the kernel does not fit in registers: ptxas needs {short.needed} registers per thread for one "
        f"instruction, and {launch.total_threads} threads a block{producer} leave {short.available} each "
        f"(65536 a multiprocessor); use fewer threads or smaller tiles (a float32 accumulator of block_M x "
        f"block_N keeps block_M * block_N / threads registers in each thread)", loc)


# False: NVRTC runs after the analyses, in the calling thread (for measuring what the overlap buys)
OVERLAP_DEVICE_COMPILE = True


def nvrtc_extra_options(configs: dict) -> tuple:
    """NVRTC options a kernel's pass configs ask for: ``tl.enable_fast_math`` is NVRTC's
    ``--use_fast_math`` (approximate division, square root and transcendentals, denormals flushed);
    ``tw.ptxas_options`` and ``tl.ptxas_register_usage_level`` go to ptxas (``-Xptxas=``), as nvcc
    hands TileLang's ``--ptxas-options`` on (TileLang's sparse MLA seesaw and FlashMLA scripts ask
    for ``--register-usage-level=10``)."""
    options = ["--use_fast_math"] if configs.get(PassConfigKey.TL_ENABLE_FAST_MATH.value) else []
    level = configs.get(PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL.value)
    if level is not None:
        options.append(f"-Xptxas=--register-usage-level={int(level)}")
    options += [f"-Xptxas={o}" for o in configs.get(PassConfigKey.TW_PTXAS_OPTIONS.value) or ()
                if o != "-v"]  # -v: every compile asks for ptxas's report already
    return tuple(options)


# A compile running in a thread may ask to hear when its NVRTC has started (``compile_sequence``
# lowers a sequence's kernels one at a time, each thread waiting for the one before to get there).
device_compile_started = threading.local()


def _announce_device_compile():
    hook = getattr(device_compile_started, "hook", None)
    if hook is not None:
        hook()


def _start_device_compile(source: str, arch: str, name: str, extra_options: tuple = ()):
    """``backend.nvrtc.compile_check`` for the source; ``.result()`` gives the NvrtcResult or raises
    what the compile raised. Overlapped: in a thread of its own (NVRTC releases the GIL) that ends
    with the compile, so no idle thread outlives it (autotune may fork); nobody waits for one whose
    kernel an analysis rejected, and interpreter exit waits for it as for any executor's."""
    from ..backend.nvrtc import compile_check

    if not OVERLAP_DEVICE_COMPILE:
        return _Deferred(lambda: compile_check(source, arch, name=name, extra_options=extra_options))
    thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"tileworkbench-nvrtc-{name}")
    future = thread.submit(compile_check, source, arch, name=name, extra_options=extra_options)
    thread.shutdown(wait=False)
    _announce_device_compile()
    return future


class _Deferred:
    """A compile run only when its result is asked for (the serial mode above)."""

    def __init__(self, run):
        self.run = run

    def result(self):
        return self.run()


def check_out_idx(out_idx, params: list[tuple[str, bool]], kernel: str, sizes=()) -> list[int]:
    """The parameters ``out_idx`` names as outputs (``params``: (name, is a tensor) in order), as
    sorted indices; negative indices count from the end, as TileLang's do, of the parameters a
    caller passes (``sizes``, the names of ``T.dynamic`` sizes, are parameters a call fills in).
    Anything else is a CompileError at the user's line."""
    if out_idx is None:
        return []
    n = len(params)
    passed = [i for i, (name, _) in enumerate(params) if name not in sizes]
    items = [out_idx] if isinstance(out_idx, numbers.Integral) else out_idx
    if not isinstance(items, (list, tuple)) or any(isinstance(i, bool) or not isinstance(i, numbers.Integral)
                                                   for i in items):
        raise user_error(f"out_idx names the output parameters of {kernel} by position: an int or a list of "
                         f"ints, not {out_idx!r}")
    chosen: list[int] = []
    for i in items:
        if not -len(passed) <= i < n:
            raise user_error(f"out_idx {i} is out of range: {kernel} has {len(passed)} parameter(s) "
                             f"({', '.join(params[j][0] for j in passed)})")
        index = passed[int(i)] if i < 0 else int(i)
        name, is_tensor = params[index]
        if index in chosen:
            raise user_error(f"out_idx names parameter {name} twice")
        if not is_tensor:
            raise user_error(f"out_idx {i} names the scalar parameter {name}; outputs are tensors")
        chosen.append(index)
    return sorted(chosen)


def debug_timeout(configs: dict) -> float | None:
    """Seconds of ``tw.debug_barrier_timeout`` (debug mode: bounded mbarrier waits), None when off."""
    value = configs.get(PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT.value)
    if value is None or value is False:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:
        raise CompileError(f"pass config {PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT.value} is a time limit in seconds "
                           f"(0 switches debug mode off), not {value!r}")
    return seconds or None


def _jsonable(configs: dict) -> dict:
    return {k: (v if isinstance(v, (bool, int, float, str)) or v is None else str(v)) for k, v in configs.items()}
