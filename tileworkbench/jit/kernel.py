"""``tileworkbench.compile`` and the ``Kernel`` it returns."""

from __future__ import annotations

import base64
import builtins
import contextlib
import inspect
import operator
import os
import sys
import warnings
import time

from ..backend.launch import stream_handle
from ..errors import KernelRuntimeError, where
from ..frontend import parse
from ..ir import nodes as ir
from ..ir.printer import print_ir
from ..ir.records import TmaDescriptor, size_arguments
from ..trace import Trace
from ..target import PassContext, Target
from . import cache, sized_launch
from .lower import check_out_idx, lower


class Kernel:
    """A compiled kernel: call it with GPU arrays; outputs named by ``out_idx`` are allocated."""

    def __init__(self, record: dict, out_idx, load_device: bool = True):
        self.record = record
        self.name = record["kernel_name"]
        self.params = record["params"]
        self.out_idx = check_out_idx(out_idx, [(p["name"], p["kind"] == "tensor") for p in self.params], self.name,
                                     record.get("sizes", {}))
        self.trace = Trace.from_dict(record["trace"])
        self.target = Target(**record["target"])
        self.tma_descriptors = {d["name"]: _descriptor(d) for d in record["tma_descriptors"]}
        self.timings = dict(record.get("timings", {}))
        self._launch = None
        self._runtime = None
        self._fast = None  # the C launch path (backend/fastcall.py) on the device it loaded on, or None
        self._refusals = None  # where calls the C path refuses go (None: the Python launcher, _call)
        self._sized: dict = {}  # T.dynamic sizes -> the C launcher for them (jit/sized_launch.py)
        self._sizes_called: dict = {}  # T.dynamic sizes called once, with no launcher yet (the same)
        self._entry = self._call  # what a call of the kernel runs: see __call__
        self._cubin: bytes | None = None
        # T.dynamic sizes: scalar parameter index -> (index of the input tensor, its dimension, the
        # multiple the kernel is compiled for: it takes the size divided by it)
        self._sizes = {[p["name"] for p in self.params].index(name): tuple(where)
                       for name, where in record.get("sizes", {}).items()}
        self._out_forms = {} if self._sizes else {i: output_form(self.params[i]) for i in self.out_idx}
        self._param_count = len(self.params)
        self._input_count = self._param_count - len(self.out_idx)
        self._outputs_last = sorted(self.out_idx) == list(range(self._input_count, self._param_count))
        self._out_form_list = [self._out_forms[i] for i in sorted(self.out_idx) if i in self._out_forms]
        inputs = [p for i, p in enumerate(self.params) if i not in self.out_idx]
        self._like_at = next((j for j, p in enumerate(inputs) if p["kind"] == "tensor"), None)
        if load_device:
            self._load()

    # ---- sources ---------------------------------------------------------------------------
    def get_kernel_source(self) -> str:
        return self.record["device_source"]

    def get_host_source(self) -> str:
        return self.record["host_source"]

    @property
    def cubin(self) -> bytes | None:
        """The device code NVRTC made for ``self.target.arch`` (an ELF cubin), as the compile
        record (and the disk cache) holds it; None only where NVRTC was unavailable at compile."""
        if self._cubin is None and self.record.get("cubin"):
            self._cubin = _decode_cubin(self.record["cubin"])
        return self._cubin

    # ---- device ----------------------------------------------------------------------------
    def _load(self):
        from ..target import detect_arch

        if detect_arch() is None:  # rather than CUDA's "driver version is insufficient" or a missing CuPy
            raise KernelRuntimeError(
                f"{self.name} cannot run here: no NVIDIA GPU was found (or no CUDA driver). It compiled: "
                "get_kernel_source() and .cubin hold the CUDA and the sm_90a code; run it on a CUDA machine "
                "with tileworkbench[cuda13] installed (CuPy for CUDA 13), or run it on the CPU interpreter: "
                "compile(..., target=\"cpu\") (or TILEWORKBENCH_INTERPRET=1) with numpy arrays.")
        from ..backend.runtime import Runtime, load_module

        start = time.perf_counter()
        if self.cubin is None:  # compiled where NVRTC was unavailable: compile now
            from ..backend.nvrtc import compile_check

            from .lower import nvrtc_extra_options

            result = compile_check(self.record["device_source"], self.target.arch, name=f"{self.name}.cu",
                                   extra_options=nvrtc_extra_options(self.record["trace"]["kernel"].get("pass_configs", {})))
            self.record.update(_cubin_fields(result))
            self._cubin = result.cubin
            self.timings["nvrtc_s"] = result.seconds
        module_start = time.perf_counter()
        module = load_module(self.cubin, self.target.arch)  # cuModuleLoadData: no NVRTC here
        runtime = Runtime(module, self.record["smem_bytes"])
        runtime.function(self.name)  # gets the kernel, sets the shared-memory limit
        self.timings["module_load_s"] = time.perf_counter() - module_start
        self.bind_runtime(runtime)
        self.take_c_path(_c_launcher(self, runtime))
        self.timings["load_s"] = time.perf_counter() - start

    def bind_runtime(self, runtime):
        """Launch through ``runtime`` (a ``backend.runtime.Runtime``, or one that checks arguments
        and launches nothing, for tests without a GPU) with the generated host launcher."""
        runtime.site_lines = _wait_lines(self.trace)  # for debug-mode timeout messages
        runtime.block_order = self.trace.resources.get("block_order")  # ... which name the kernel's block indices
        runtime.source_file = self.trace.kernel.get("source_file")
        namespace: dict = {}
        exec(builtins.compile(self.record["host_source"], f"<tileworkbench host launcher {self.name}>", "exec"), namespace)
        self._runtime, self._launch = runtime, namespace["launch"]
        self._host_namespace = namespace  # the launcher's constants (tensor maps' fields) for the C path

    def take_c_path(self, launcher) -> None:
        """Calls go to ``launcher`` (a ``backend.fastcall`` Launcher) first, which hands what it
        does not take to the Python launcher (``_call``); None: to the Python launcher alone."""
        self._fast = launcher
        if launcher is not None:
            launcher.fallback = self._refusals or self._call
        self._entry = self._call if launcher is None else launcher

    def refuse_to(self, dispatch) -> None:
        """Calls the C path refuses go to ``dispatch`` instead of this kernel's Python launcher
        (``jit.decorator.SizedKernels``: a call its aligned form's launcher refuses may be one for
        the form for any sizes); ``dispatch`` must not call this kernel's ``__call__`` again (its
        ``_call`` is the Python launcher)."""
        self._refusals = dispatch
        if self._fast is not None:
            self._fast.fallback = dispatch

    # A call of the kernel is a call of ``_entry``: the C launch path where there is one, the Python
    # launcher otherwise. Looked up through a property, so that a call the C path takes runs no Python
    # frame (a quarter of a microsecond of the few that a tiny kernel's call costs, issue 18).
    __call__ = property(operator.attrgetter("_entry"), doc=(
        "kernel(*args, stream=None): launch with ``args`` (all parameters, or the inputs: ``out_idx`` outputs are "
        "then allocated in the framework of the inputs) on ``stream``: the current stream of that framework unless "
        "given (a ``torch.cuda.Stream``, ``cupy.cuda.Stream`` or int handle)."))

    @property
    def launch_path(self) -> str:
        """How a call of this kernel is launched, in words: the C launch path (and how it reads
        tensors) or the Python launcher, and why (``python -m tileworkbench.bench launch`` times both)."""
        from .launch_path import launch_path

        return launch_path(self)

    @property
    def __signature__(self) -> inspect.Signature:  # inspect.signature(kernel): the call's, not the property's
        return inspect.signature(self._call)

    def _call(self, *args, stream=None, **keywords):
        """The Python launcher: every call the C path does not take (CuPy arrays, a stream object,
        T.dynamic sizes, the checks that fail and their messages)."""
        if keywords:
            raise KernelRuntimeError(f"{self.name} takes its arguments by position "
                                     f"({', '.join(p['name'] for p in self.params)}), not by keyword "
                                     f"({', '.join(keywords)})")
        if self._launch is None:
            self._load()
        runtime = self._runtime
        runtime.begin_call()
        if self._sizes:  # the T.dynamic sizes from the tensors, the outputs allocated at them
            full, outputs = self._with_sizes(args, stream)
            self._launch_sized(runtime, full, stream)
        elif len(args) == self._param_count:  # every argument given: nothing to allocate
            self._launch(runtime, *args, stream=stream_handle(stream, args))
            outputs = [args[i] for i in self.out_idx]
        elif self._outputs_last and len(args) == self._input_count and self._like_at is not None \
                and type(args[self._like_at]).__module__ == "torch" and stream is None:
            # The common torch call, the outputs after the inputs: allocated like the first input
            # (its device, torch's current stream: the one the launch goes on).
            like = args[self._like_at]
            outputs = [like.new_empty(shape, dtype=_torch_dtype(dtype)) for shape, dtype in self._out_form_list]
            full = (*args, *outputs)
            self._launch(runtime, *full, stream=stream_handle(None, full))
        elif stream is not None:  # outputs allocated for the stream the launch goes on
            handle = stream_handle(stream, args)
            with _allocating_on(args, handle):
                full, outputs = bind_arguments(self.name, self.params, self.out_idx, args, self._out_forms)
            self._launch(runtime, *full, stream=handle)
        else:
            full, outputs = bind_arguments(self.name, self.params, self.out_idx, args, self._out_forms)
            self._launch(runtime, *full, stream=stream_handle(stream, full))
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _launch_sized(self, runtime, full, stream) -> None:
        """The Python launcher's launch of a call with ``T.dynamic`` sizes (``full``: every
        argument, the sizes among them); with ``jit/sized_launch.py`` on, the C launcher for these
        sizes (made from this call where there is none yet and the sizes were called before)
        becomes the kernel's entry, so that the next call of the same sizes takes the C path."""
        handle = stream_handle(stream, full)
        key = tuple(int(full[i]) for i in sorted(self._sizes))
        launcher = self._sized.get(key)
        if launcher is not None or not _sized_wanted(self, full, stream) or \
                not sized_launch.called_before(self._sizes_called, key):
            self._launch(runtime, *full, stream=handle)
        else:
            recorder = sized_launch.CallRecorder(runtime)
            self._launch(recorder, *full, stream=handle)
            launcher = _sized_c_launcher(self, runtime, recorder)
            if launcher is not None:
                if len(self._sized) >= sized_launch.SIZED_KEPT:
                    self._sized.pop(next(iter(self._sized)))
                self._sized[key] = launcher
        if launcher is not None:
            self.take_c_path(launcher)

    def _with_sizes(self, args, stream) -> tuple[list, list]:
        """(every argument, the outputs) of a call of a kernel with ``T.dynamic`` sizes: the
        caller passes the tensors (and scalars) but not the sizes, which come from the tensors'
        shapes; outputs not passed are allocated at those sizes."""
        params = [(p["name"], len(p["shape"]) if p["kind"] == "tensor" else None) for p in self.params]
        full, values = size_arguments(self.name, params, self._sizes, self.out_idx, args)
        forms = {i: output_form(self.params[i], values) for i in self.out_idx}
        inputs = [a for i, a in enumerate(full) if i not in self.out_idx]
        if any(a is None for a in full):
            handle = stream_handle(stream, inputs) if stream is not None else None
            with _allocating_on(inputs, handle) if handle is not None else contextlib.nullcontext():
                like = next((a for a in inputs if hasattr(a, "shape")), None)
                for i in self.out_idx:
                    full[i] = _allocate(self.params[i], like, forms[i])
        return full, [full[i] for i in self.out_idx]

    def as_torch_op(self, qualname: str):
        """This kernel as the torch operator ``qualname`` ("namespace::name"), with a fake
        implementation for ``torch.compile`` (``jit/torch_op.py``); returns the operator."""
        from .torch_op import as_torch_op

        return as_torch_op(self, qualname)

    def timeline(self, block=None):
        """The events the last call recorded (a kernel compiled with ``pass_configs={"tw.timeline":
        True}`` or every k-th block, or persistent tile, with k), as a DataFrame (``analysis.timeline_frame``): one row
        an event, on one clock; ``.waits()``, ``.summary()``, ``.to_chrome_trace(path)``. The trace
        (``kernel.trace.timeline["measured"]``) keeps ``block``'s events (the first recorded block
        unless given) and the summary, for the workbench views. Waits for the call to finish."""
        plan = (self.trace.timeline or {}).get("plan")
        if plan is None:
            raise KernelRuntimeError(f"{self.name} records no timeline: compile it with pass_configs="
                                     "{'tw.timeline': True} (or k: every k-th block, or tile of a persistent kernel)")
        last = self._runtime.timeline_words(self.name) if self._runtime is not None else None
        if last is None:
            raise KernelRuntimeError(f"{self.name} has not run yet: call it, then read its timeline")
        from ..analysis.timeline import decode
        from ..analysis.timeline_frame import MeasuredTimeline

        words, grid, wave = last
        columns, facts = decode(words, grid, plan, wave)
        order = self.trace.resources.get("block_order")
        if order is not None:  # the recorded blocks by the kernel's own indices too (a reordered grid)
            from ..codegen.block_order import kernel_blocks

            facts["block_indices"] = kernel_blocks(order, facts["blocks"], grid)
        frame = MeasuredTimeline.of(columns, facts)
        self.trace.timeline["measured"] = frame.to_trace_json(block)
        return frame

    def get_profiler(self, tensor_supply_type=None):
        """A ``Profiler`` (``jit/profiler.py``) whose inputs are made as ``tensor_supply_type``
        (a ``TensorSupplyType``) says."""
        from .profiler import Profiler

        return Profiler(self, tensor_supply_type)


def bind_arguments(name: str, params: list, out_idx: list, args, forms: dict | None = None) -> tuple[list, list]:
    """(every argument, the outputs) of a call that passes all ``params`` or only the inputs,
    the ``out_idx`` outputs then allocated in the framework of the inputs (``forms``: each
    output's ``output_form``, where the caller keeps them)."""
    n_in = len(params) - len(out_idx)
    if len(args) == len(params):
        return args, [args[i] for i in out_idx]
    if len(args) != n_in:
        names = ", ".join(p["name"] for i, p in enumerate(params) if i not in out_idx)
        raise KernelRuntimeError(f"{name} takes {n_in} inputs ({names}) or all {len(params)} "
                                 f"arguments; got {len(args)}")
    full, outputs, it = [], [], iter(args)
    like = next((a for a in args if hasattr(a, "shape")), None)
    for i, p in enumerate(params):
        if i in out_idx:
            out = _allocate(p, like, forms.get(i) if forms else None)
            full.append(out)
            outputs.append(out)
        else:
            full.append(next(it))
    return full, outputs


def _wait_lines(trace) -> dict:
    """Lowered statement index -> kernel line of every simulated barrier wait (debug-mode messages)."""
    events = (trace.barriers or {}).get("events", [])
    return {e["stmt"]: e["line"] for e in events if e.get("kind") == "wait" and e.get("stmt") is not None}


def _descriptor(doc: dict) -> TmaDescriptor:
    fields = {k: v for k, v in doc.items() if k != "data_type_name"}
    for k in ("global_dims", "global_strides_bytes", "box_dims", "element_strides"):
        fields[k] = tuple(fields[k])
    return TmaDescriptor(**fields)


def _allocating_on(args, handle: int):
    """A context in which torch allocates for the stream ``handle`` (its caching allocator ties
    memory to the stream current at allocation: an output allocated for another stream than the
    one the kernel writes it on could be handed out again while the kernel still writes)."""
    import contextlib

    if any(type(a).__module__ == "torch" for a in args):
        import torch

        return torch.cuda.stream(torch.cuda.ExternalStream(handle) if handle else torch.cuda.default_stream())
    return contextlib.nullcontext()


def _allocate(param: dict, like, form: tuple | None = None):
    """An output array in the framework of the inputs (torch if they are torch tensors), on
    their device; with no inputs, torch's where the program has imported torch, else CuPy's;
    ``form``: ``output_form(param)``, where the caller keeps it."""
    shape, dtype = form or output_form(param)
    if like is not None and type(like).__module__.startswith("torch"):
        return like.new_empty(shape, dtype=_torch_dtype(dtype))  # like's device; torch's current stream
    torch = sys.modules.get("torch")
    if like is None and torch is not None and torch.cuda.is_available():
        # No input to follow (a kernel of outputs only: TileLang's random example): a torch program
        # gets torch tensors, as TileLang returns, on torch's current device and stream.
        return torch.empty(shape, dtype=_torch_dtype(dtype), device="cuda")
    import cupy

    from .. import dtypes

    if cupy.cuda.get_current_stream().is_capturing():
        raise KernelRuntimeError(f"the output {param['name']} would be allocated inside a CuPy graph capture, where "
                                 "CuPy's memory pool cannot allocate: make it before the capture and pass every "
                                 "argument (kernel(*inputs, *outputs))")
    return cupy.empty(shape, dtype=dtypes.numpy_dtype(dtypes.as_dtype(dtype)))


def _size_name(dim):
    """A dimension that is a size parameter (``m``), or one times a constant (``m_div8 * 8``,
    as ``[name, 8]``), else None."""
    if isinstance(dim, ir.Var):
        return dim.name
    if isinstance(dim, ir.BinOp) and dim.op == "*" and isinstance(dim.a, ir.Var) and ir.const_int(dim.b) is not None:
        return [dim.a.name, ir.const_int(dim.b)]
    return None


def output_form(param: dict, sizes: dict | None = None) -> tuple:
    """(shape, dtype name) an output is allocated with (``sizes``: the ``T.dynamic`` sizes of the
    call, for the dimensions the record names): FP4's two values a byte as int8 bytes."""
    shape, dtype = tuple(param["shape"]), param["dtype"]
    if sizes is not None:
        shape = tuple(n if name is None else sizes[name] if isinstance(name, str) else sizes[name[0]] * name[1]
                      for n, name in zip(shape, param.get("dims", [None] * len(shape))))
    if param.get("packed"):
        shape, dtype = shape[:-1] + (shape[-1] // 2,), "int8"
    return shape, dtype


def _c_launcher(kernel: Kernel, runtime, exchange_api: bool = True):
    """The C launch path for ``kernel`` on the device ``runtime`` loaded it on
    (``backend/fastcall.py``; ``exchange_api``: its tensors read through DLPack's C exchange API
    where torch has it), or None: a kernel without a fast-call plan, no torch, or no C module here
    (``fastcall.why_not()`` says why). Either way every call is checked alike."""
    plan = kernel.record.get("fast_plan")
    if plan is None or kernel._sizes:
        return None
    try:
        import torch  # noqa: F401  (the C path takes torch tensors only)
    except ImportError:
        return None
    encoders = [_map_encoder(runtime, m["name"], kernel._host_namespace[m["fields"]]) for m in plan["maps"]]
    if plan["grid"] is None:  # persistent: the blocks its launcher would ask for, on this device
        blocks = runtime.persistent_blocks(kernel.name, plan["persistent_tiles"], tuple(plan["block"]),
                                           plan["smem_bytes"])
        plan = {**plan, "grid": [blocks, 1, 1]}
    return _launcher_for(kernel, runtime, plan, set(kernel.out_idx), encoders, exchange_api=exchange_api)


def _launcher_for(kernel: Kernel, runtime, plan: dict, outputs: set, encoders: list, layout=None,
                  exchange_api: bool = True):
    """A ``backend.fastcall`` Launcher of ``kernel`` on ``runtime``'s device from a fast-call plan
    (``outputs``: the indices of its tensors that are outputs; ``layout``: the constants between them,
    ``Launcher.interleave``), or None where there is no C path here; a failure of ours is logged and
    the kernel keeps its Python launcher."""
    from ..backend import fastcall

    mod = fastcall.module(cache.cache_dir())
    if mod is None:
        return None
    try:
        launcher = fastcall.launcher(mod, kernel.name, runtime.function(kernel.name).ptr, plan, runtime.device,
                                     [_torch_dtype(p["dtype"]) for p in plan["params"]], outputs, encoders,
                                     KernelRuntimeError, exchange_api)
        if launcher is not None and layout is not None:
            launcher.interleave(layout)
        return launcher
    except Exception as exc:  # a failure of ours: the kernel still runs, on its Python launcher
        import logging

        logging.getLogger("tileworkbench").warning("%s: no C launch path (%s: %s); calls take the Python launcher",
                                                   kernel.name, type(exc).__name__, exc)
        return None


def _sized_wanted(kernel: Kernel, full, stream) -> bool:
    """Whether a call with T.dynamic sizes should leave a C launcher for its sizes: switched on,
    torch tensors (the C path's), on the current stream."""
    if not sized_launch.enabled() or stream is not None:
        return False
    tensors = [a for a, p in zip(full, kernel.params) if p["kind"] == "tensor"]
    return bool(tensors) and all(type(a).__module__ == "torch" and type(a).__name__ == "Tensor" for a in tensors)


def _sized_c_launcher(kernel: Kernel, runtime, recorder):
    """A C launcher for the sizes of the call ``recorder`` saw (``jit/sized_launch.py``); None where
    the call's plan cannot be fixed or there is no C path here."""
    made = sized_launch.sized_plan(recorder, set(kernel.out_idx))
    if made is None:
        return None
    plan, layout, maps = made
    encoders = [_map_encoder(runtime, name, fields) for name, _, fields in maps]
    return _launcher_for(kernel, runtime, plan, set(plan["outputs"]), encoders, layout=layout)


def _map_encoder(runtime, name: str, fields: dict):
    """address -> tensor map ``name``'s 128 bytes, encoded (and kept) by the runtime as the Python
    launcher's ``rt.encode_tiled`` does."""
    return lambda address: runtime.encode_tiled(name, address, fields).tobytes()


_TORCH_DTYPE_OF: dict = {}


def _torch_dtype(dtype: str):
    found = _TORCH_DTYPE_OF.get(dtype)
    if found is None:
        import torch

        from .. import dtypes

        found = _TORCH_DTYPE_OF[dtype] = getattr(torch, dtypes.torch_dtype_name(dtypes.as_dtype(dtype)))
    return found


def _decode_cubin(text: str) -> bytes | None:
    try:
        cubin = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    from ..backend.nvrtc import cubin_sm

    return cubin if cubin_sm(cubin) is not None else None


def _cubin_fields(result) -> dict:
    """The record's device-code fields from a ``backend.nvrtc.NvrtcResult`` (None: no cubin)."""
    if result is None:
        return {"cubin": None, "nvrtc": None}
    return {"cubin": base64.b64encode(result.cubin).decode("ascii"), "nvrtc": result.to_json()}


def _record(artifact, out_idx, timings) -> dict:
    params = []
    for p in artifact.func.params:
        if isinstance(p, ir.Buffer):
            params.append({"name": p.name, "kind": "tensor", "shape": [ir.const_int(s) for s in p.shape],
                           "dtype": p.dtype.name, "packed": p.dtype.packed,
                           **({"dims": [_size_name(s) for s in p.shape]}
                              if any(_size_name(s) is not None for s in p.shape) else {})})
        else:
            params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype.name})
    return {
        "kernel_name": artifact.kernel_name, "device_source": artifact.device_source,
        "host_source": artifact.host_source, "fast_plan": artifact.fast_plan, "params": params,
        "target": artifact.target.to_json(),
        "smem_bytes": artifact.func.attrs.get("smem_bytes", 0), "trace": artifact.trace.to_dict(),
        "tma_descriptors": [d.to_json() for d in artifact.tma_descriptors.values()], "timings": timings,
        **({"sizes": {k: list(v) for k, v in artifact.func.attrs["dynamic_sizes"].items()}}
           if artifact.func.attrs.get("dynamic_sizes") else {}),
        **_cubin_fields(artifact.nvrtc),
    }


def compile(func, out_idx=None, target="auto", pass_configs=None, execution_backend="cupy",  # noqa: A001
            load_device: bool | None = None, verbose: bool = False) -> Kernel:
    """Lower, generate, compile to a cubin (NVRTC, no GPU needed) and load a kernel.

    Results, the cubin included, are cached in this process and on disk
    (``~/.cache/tileworkbench``), keyed by the kernel and where it is written, target, pass configs, ``out_idx``, package
    version, header contents and NVRTC's version and options; a disk hit runs no NVRTC, only the
    module load. Where NVRTC cannot be loaded (no CUDA on the machine) and ``load_device`` is
    False, the kernel carries its sources but no cubin. ``verbose`` prints where the kernel came
    from and how long each step took.
    """
    from ..backend import nvrtc

    if interpreted(target):
        return _compile_for_cpu(func, out_idx, pass_configs)
    start = time.perf_counter()
    tgt = Target.of(target)
    configs = PassContext.merged_configs(pass_configs)
    src = parse(func)
    if isinstance(src, ir.KernelSequence):  # several T.Kernel blocks: each compiled as a kernel of its own
        from .sequence import compile_sequence

        return compile_sequence(src, out_idx, lambda k: compile(k, None, tgt, configs, execution_backend,
                                                                load_device, verbose))
    out_idx = check_out_idx(out_idx, [(p.name, isinstance(p, ir.Buffer)) for p in src.params], src.name,
                            src.attrs.get("dynamic_sizes", {})) or None
    # Where the kernel is written is part of the key: its banner, messages and trace name that place
    # (a notebook cell by the number Jupyter shows), so a cell run again, or the same text in
    # another cell, must not be handed a record that names the first one.
    key = cache.cache_key(print_ir(src) + "\n# " + where(src.source_file, src.source_line), tgt, configs, out_idx)
    if load_device is None:
        load_device = _gpu_present()
    if load_device:  # the C launch path, built (once a machine) while this kernel compiles
        from ..backend import fastcall

        fastcall.prepare(cache.cache_dir())
    hit = cache.MEMORY.get(key) if cache.memory_enabled() else None
    if hit is not None:
        return hit
    record = cache.load(key)
    source = "disk"
    if record is not None and record.get("cubin") is not None and _decode_cubin(record["cubin"]) is None:
        record = None  # a damaged entry: compile again
    if record is None:
        # NVRTC runs inside lower() (overlapped with the analyses); its cubin is reused here.
        device_compile = load_device or nvrtc.nvrtc_version() is not None
        artifact = lower(src, target=tgt, pass_configs=configs, out_idx=out_idx,
                         enable_device_compile=device_compile)
        lowered_s = time.perf_counter() - start
        timings = {"lower_s": lowered_s - artifact.nvrtc_wait_s}
        if artifact.nvrtc is not None:
            timings.update(nvrtc_s=artifact.nvrtc.seconds, nvrtc_wait_s=artifact.nvrtc_wait_s)
        record = _record(artifact, out_idx, timings)
        source = "lowered"
        cache.store(key, record)
    kernel = Kernel(record, out_idx, load_device=load_device)
    kernel.timings["cache"] = source
    kernel.timings["compile_s"] = time.perf_counter() - start
    if verbose:
        print(f"tileworkbench: {kernel.name} for {tgt.arch}: {source} in {kernel.timings['compile_s']:.3f} s "
              f"({', '.join(f'{k} {v:.3f} s' for k, v in timings.items()) if source == 'lowered' else 'no NVRTC'})")
    if cache.memory_enabled():
        cache.MEMORY[key] = kernel
    return kernel


def interpreted(target) -> bool:
    """``target="cpu"``, or ``"auto"`` with ``TILEWORKBENCH_INTERPRET=1`` (a warning where a GPU is
    present: it is never chosen silently over one)."""
    if target == "cpu":
        return True
    if target == "auto" and os.environ.get("TILEWORKBENCH_INTERPRET") == "1":
        if _gpu_present():
            warnings.warn("TILEWORKBENCH_INTERPRET=1: running on the CPU interpreter although a GPU is present",
                          stacklevel=3)
        return True
    return False


def _compile_for_cpu(func, out_idx, pass_configs):
    from ..interpreter import CpuKernel
    from .lower import interpreted_arch, lower_tile_level

    src = parse(func)
    if isinstance(src, ir.KernelSequence):  # each kernel interpreted, one after another
        from ..interpreter import CpuSequence

        out_idx = check_out_idx(out_idx, [(p.name, isinstance(p, ir.Buffer)) for p in src.params], src.name) or []
        return CpuSequence(src, [_compile_for_cpu(k, None, pass_configs) for k in src.kernels], out_idx)
    out_idx = check_out_idx(out_idx, [(p.name, isinstance(p, ir.Buffer)) for p in src.params], src.name,
                            src.attrs.get("dynamic_sizes", {})) or []
    configs = PassContext.merged_configs(pass_configs)
    # The GPU compile it stands for (sm_90a; sm_100 for FP4 by TMA): its trace and CUDA.
    artifact = lower(src, target=interpreted_arch(src), pass_configs=configs, out_idx=out_idx)
    artifact.trace.kernel["interpreted"] = True  # results come from the CPU interpreter, not a GPU
    return CpuKernel(lower_tile_level(src, configs), out_idx, f"{src.name}_kernel", artifact)


def _gpu_present() -> bool:
    from ..target import detect_arch

    return detect_arch() is not None
