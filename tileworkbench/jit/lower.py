"""``tileworkbench.lower``: front end + pass pipeline + code generators, no GPU needed."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .. import __version__
from ..codegen.cuda import generate_cuda
from ..codegen.host import generate_host
from ..errors import CompileError
from ..frontend import parse
from ..ir import nodes as ir
from ..ir.printer import print_ir
from ..passes.manager import LowerContext, run_pipeline
from ..passes.pipeline import pass_list
from ..passes.trace import Trace
from ..target import PassConfigKey, PassContext, Target


# Functions ``hook(artifact)`` run after every lowering. The analyses (``analysis.attach``: the
# shared-memory plan and the barrier simulation) register here from the package's __init__,
# since jit/ sits below analysis/ and must not import it.
POST_LOWER_HOOKS: list = []


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
    """Lower a ``@T.prim_func`` (or a plain function written in the DSL) to CUDA and a host launcher.

    With ``enable_device_compile=True`` the generated CUDA is also compiled by NVRTC (no GPU
    needed) and its resource usage recorded in the trace.
    """
    tgt = Target.of(target)
    configs = PassContext.merged_configs(pass_configs)
    src = parse(func)
    trace = Trace(kernel={"name": src.name, "target": tgt.to_json(), "pass_configs": _jsonable(configs),
                          "source_file": src.source_file, "source_line": src.source_line,
                          "version": __version__})
    ctx = LowerContext(tgt, configs)
    # Passes record what they learn on buffers (layouts, offsets); work on a copy so the parsed
    # function stays as written (its printed IR is the compile-cache key).
    lowered = run_pipeline(copy.deepcopy(src), pass_list(configs), ctx, trace)
    kernel_name = f"{src.name}_kernel"
    debug = debug_timeout(configs)
    device = generate_cuda(lowered, kernel_name, tgt, debug_timeout_s=debug)
    host = generate_host(lowered, kernel_name, out_idx, debug_timeout_s=debug)
    trace.sources = {"device": device, "host": host}
    descs = lowered.attrs.get("tma_descriptors", [])
    trace.tma_descriptors = [d.to_json() for d in descs]
    trace.smem = {"limit_bytes": lowered.attrs.get("smem_limit"), "total_bytes": lowered.attrs.get("smem_bytes", 0),
                  "buffers": lowered.attrs.get("smem_plan", [])}
    trace.resources.update({"smem_bytes": lowered.attrs.get("smem_bytes", 0), "threads": lowered.launch.threads,
                            "grid": [ir.const_int(g) for g in lowered.launch.grid]})
    artifact = Artifact(lowered, src, kernel_name, device, host, trace, tgt, configs, {d.name: d for d in descs})
    if enable_device_compile:
        from ..backend.nvrtc import compile_check

        result = compile_check(device, tgt.arch, name=f"{src.name}.cu")
        trace.resources.update({"registers": result.registers, "spills_bytes": result.spills_bytes})
    for hook in POST_LOWER_HOOKS:
        hook(artifact)
    return artifact


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
