"""``tileworkbench.compile`` and the ``Kernel`` it returns."""

from __future__ import annotations

import builtins
import time

from ..errors import KernelRuntimeError
from ..frontend import parse
from ..ir.printer import print_ir
from ..passes.tma_rules import TmaDescriptor
from ..passes.trace import Trace
from ..target import PassContext, Target
from . import cache
from .lower import lower


class Kernel:
    """A compiled kernel: call it with GPU arrays; outputs named by ``out_idx`` are allocated."""

    def __init__(self, record: dict, out_idx, load_device: bool = True):
        self.record = record
        self.name = record["kernel_name"]
        self.params = record["params"]
        self.out_idx = _normalize_out_idx(out_idx, len(self.params))
        self.trace = Trace.from_dict(record["trace"])
        self.target = Target(**record["target"])
        self.tma_descriptors = {d["name"]: _descriptor(d) for d in record["tma_descriptors"]}
        self.timings = dict(record.get("timings", {}))
        self._launch = None
        self._runtime = None
        if load_device:
            self._load()

    # ---- sources ---------------------------------------------------------------------------
    def get_kernel_source(self) -> str:
        return self.record["device_source"]

    def get_host_source(self) -> str:
        return self.record["host_source"]

    # ---- device ----------------------------------------------------------------------------
    def _load(self):
        from ..backend.runtime import Runtime, load_module

        start = time.perf_counter()
        module = load_module(self.record["device_source"], self.target.arch)
        self._runtime = Runtime(module, self.record["smem_bytes"])
        self._runtime.site_lines = _wait_lines(self.trace)  # for debug-mode timeout messages
        self._runtime.source_file = self.trace.kernel.get("source_file")
        self._runtime.function(self.name)  # loads the module, sets the shared-memory limit
        namespace: dict = {}
        exec(builtins.compile(self.record["host_source"], f"<tileworkbench host launcher {self.name}>", "exec"), namespace)
        self._launch = namespace["launch"]
        self.timings["load_s"] = time.perf_counter() - start

    def __call__(self, *args):
        if self._launch is None:
            self._load()
        n_in = len(self.params) - len(self.out_idx)
        if len(args) == len(self.params):
            full = list(args)
            outputs = [args[i] for i in self.out_idx]
        elif len(args) == n_in:
            full, outputs, it = [], [], iter(args)
            like = next((a for a in args if hasattr(a, "shape")), None)
            for i, p in enumerate(self.params):
                if i in self.out_idx:
                    out = _allocate(p, like)
                    full.append(out)
                    outputs.append(out)
                else:
                    full.append(next(it))
        else:
            names = ", ".join(p["name"] for i, p in enumerate(self.params) if i not in self.out_idx)
            raise KernelRuntimeError(f"{self.name} takes {n_in} inputs ({names}) or all {len(self.params)} "
                                     f"arguments; got {len(args)}")
        self._launch(self._runtime, *full)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_profiler(self, tensor_supply_type=None):
        from .profiler import Profiler

        return Profiler(self)


def _wait_lines(trace) -> dict:
    """Lowered statement index -> kernel line of every simulated barrier wait (debug-mode messages)."""
    events = (trace.barriers or {}).get("events", [])
    return {e["stmt"]: e["line"] for e in events if e.get("kind") == "wait" and e.get("stmt") is not None}


def _normalize_out_idx(out_idx, n):
    if out_idx is None:
        return []
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    return sorted(i + n if i < 0 else i for i in out_idx)


def _descriptor(doc: dict) -> TmaDescriptor:
    fields = {k: v for k, v in doc.items() if k != "data_type_name"}
    for k in ("global_dims", "global_strides_bytes", "box_dims", "element_strides"):
        fields[k] = tuple(fields[k])
    return TmaDescriptor(**fields)


def _allocate(param: dict, like):
    """An output array in the framework of the inputs (torch if they are torch tensors)."""
    shape, dtype = list(param["shape"]), param["dtype"]
    if param.get("packed"):
        shape[-1] //= 2
        dtype = "int8"
    if like is not None and type(like).__module__.startswith("torch"):
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    import cupy

    from .. import dtypes

    return cupy.empty(shape, dtype=dtypes.numpy_dtype(dtypes.as_dtype(dtype)))


def _record(artifact, out_idx, timings) -> dict:
    from ..ir import nodes as ir

    params = []
    for p in artifact.func.params:
        if isinstance(p, ir.Buffer):
            params.append({"name": p.name, "kind": "tensor", "shape": [ir.const_int(s) for s in p.shape],
                           "dtype": p.dtype.name, "packed": p.dtype.packed})
        else:
            params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
    return {
        "kernel_name": artifact.kernel_name, "device_source": artifact.device_source,
        "host_source": artifact.host_source, "params": params, "target": artifact.target.to_json(),
        "smem_bytes": artifact.func.attrs.get("smem_bytes", 0), "trace": artifact.trace.to_dict(),
        "tma_descriptors": [d.to_json() for d in artifact.tma_descriptors.values()], "timings": timings,
    }


def compile(func, out_idx=None, target="auto", pass_configs=None, execution_backend="cupy",  # noqa: A001
            load_device: bool | None = None, verbose: bool = False) -> Kernel:
    """Lower, generate, compile (NVRTC through CuPy) and load a kernel.

    Results are cached in this process and on disk (``~/.cache/tileworkbench``), keyed by the
    kernel, target, pass configs, ``out_idx``, package version and header contents.
    """
    start = time.perf_counter()
    tgt = Target.of(target)
    configs = PassContext.merged_configs(pass_configs)
    src = parse(func)
    key = cache.cache_key(print_ir(src), tgt, configs, out_idx)
    if load_device is None:
        load_device = _gpu_present()
    hit = cache.MEMORY.get(key)
    if hit is not None:
        return hit
    record = cache.load(key)
    source = "disk"
    if record is None:
        artifact = lower(src, target=tgt, pass_configs=configs, out_idx=out_idx)
        record = _record(artifact, out_idx, {"lower_s": time.perf_counter() - start})
        source = "lowered"
        cache.store(key, record)
    kernel = Kernel(record, out_idx, load_device=load_device)
    kernel.timings["cache"] = source
    kernel.timings["compile_s"] = time.perf_counter() - start
    cache.MEMORY[key] = kernel
    return kernel


def _gpu_present() -> bool:
    from ..target import detect_arch

    return detect_arch() is not None
