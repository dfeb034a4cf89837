"""The GPU side of a compiled kernel: module loading (the cubin ``backend/nvrtc.py`` made, loaded
with ``cuModuleLoadData`` through CuPy), argument checks, TMA tensor-map encoding
(``cuTensorMapEncodeTiled`` through cuda-bindings) and launch (``backend/launch.py``).

The generated host launcher (``codegen/host.py``) calls exactly these methods. A call is meant to
cost microseconds (issue 18), with every check kept: a torch tensor or CuPy array that is
exactly what the kernel expects (dtype, shape, strides, on the current device, aligned) passes
through a few attribute reads (``Runtime.tensor``'s first branch); anything else takes the full check, which
either accepts it (strides that differ only in dimensions of one element, other array types) or
names what is wrong. A tensor map is encoded once per tensor address and reused.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..codegen.block_order import kernel_block
from ..errors import KernelRuntimeError
from .launch import adopt_context, current_context
from .occupancy import Occupancy
from .timeline_buffers import TimelineBuffers, read_after
from .tensors import TensorView, view_of

_BYTE_DTYPES = ("int8", "uint8")
# The debug record (tw/sync.h, namespace tw::debug): FLAG, BLOCK_X, BLOCK_Y, BLOCK_Z, THREAD, BARRIER,
# SLOT, PARITY, SITE, LINE, WAITED_US, then spare words.
DEBUG_WORDS = 16


def _expected_framework_dtypes(dtype: dtypes.DType) -> tuple[str, ...]:
    if dtype.name == "int4x2":  # int4 values two a byte: bytes (TileLang's pack_int4 gives int8)
        return _BYTE_DTYPES
    if dtype.packed or dtype.name in ("float8_e4m3", "float8_e5m2"):
        extra = ("float8_e4m3fn",) if dtype.name == "float8_e4m3" else ("float8_e5m2",) if dtype.name == "float8_e5m2" else ()
        return _BYTE_DTYPES + extra + ("float4_e2m1fn_x2",)
    if dtype.name == "bfloat16":
        return ("bfloat16",)
    if dtype.name == "handle":
        return ("int64", "uint64")
    return (dtype.name,)


class Runtime(Occupancy, TimelineBuffers):
    """One per compiled kernel: holds the loaded module and a cache of encoded tensor maps."""

    def __init__(self, module, smem_bytes: int):
        self.module = module
        self.functions = {}
        self.tensormaps = {}
        self._last_maps: dict = {}  # tensor map name -> (address, fields, packed): the previous call's
        self._launchers: dict = {}  # (kernel, device) -> backend.launch.DriverLauncher
        self.smem_bytes = smem_bytes
        # The device a call runs on: the current one, which the caller (jit.kernel) reads once
        # per call (``begin_call``) for the checks and the launch.
        self.device = _current_device()
        self._resident_blocks: dict = {}  # (kernel, device) -> blocks resident at once (persistent grids)
        # Debug mode: the record, where each wait site is in the kernel (site -> line, from the
        # trace) and whether every launch is checked at once (False: check_deferred() checks later).
        self._debug = None
        self._last_debug = None
        self.site_lines: dict = {}
        self.block_order: dict | None = None  # codegen.block_order.describe's, for debug-mode messages
        self.source_file: str | None = None
        self.check_each_launch = True
        self.timelines: dict = {}  # tw.timeline: kernel -> (buffer, grid) of its last launch
        self.timeline_waves: dict = {}  # tw.timeline: kernel -> its blocks resident at once (timeline_wave)
        # The CUDA context the module was loaded in (0 where there is none to ask: a dry run)
        self.context = current_context() if self.device is not None else 0

    def begin_call(self):
        """Read the current device for the call about to be checked and launched (on a thread's
        first call, give it the kernel's context if it has none: ``launch.adopt_context``)."""
        if self.context:
            adopt_context(self.context)
        self.device = _GET_DEVICE()

    # ---- arguments --------------------------------------------------------------------------
    def tensor(self, name, value, shape, dtype, strides, align=1) -> int:
        """The device pointer of argument ``name`` after checking it against what the kernel
        expects; a ``KernelRuntimeError`` that says what is wrong otherwise."""
        # The common case first, in as few attribute reads as the checks need (a call of a small
        # kernel costs microseconds; scripts/experiments/launch_paths.py measures each read).
        if type(value).__module__ == "torch":
            expected = _TORCH_DTYPES.get(dtype)
            if expected is None:
                expected = _torch_dtype(dtype)
            if (value.dtype is expected and value.shape == shape and value.stride() == strides
                    and value.get_device() == self.device):  # -1 for a CPU tensor
                ptr = value.data_ptr()
                if not ptr % align:
                    return ptr
        else:
            ptr = _cupy_pointer(value, shape, dtype, strides, align, self.device)
            if ptr is not None:
                return ptr
        return self.checked_tensor(name, value, shape, dtype, strides, align).ptr

    def checked_tensor(self, name, value, shape, dtype, strides, align=1) -> TensorView:
        """Every check, one at a time, each with its own message (any array kind)."""
        view = view_of(name, value)
        dt = dtypes.as_dtype(dtype)
        if view.dtype not in _expected_framework_dtypes(dt):
            raise KernelRuntimeError(f"argument {name!r} has dtype {view.dtype}, the kernel expects {dt.name}"
                                     f"{dtypes.storage_note(dt)}")
        if dt.packed:  # FP4: two values a byte; the array's last dimension counts bytes
            shape = tuple(shape[:-1]) + (shape[-1] // 2,)
            strides = tuple(s // 2 for s in strides[:-1]) + (1,)
        if tuple(view.shape) != tuple(shape):
            raise KernelRuntimeError(f"argument {name!r} has shape {tuple(view.shape)}, the kernel expects {tuple(shape)}"
                                     f"{dtypes.storage_note(dt)}")
        nontrivial = [(s, d) for s, d, n in zip(view.strides, strides, view.shape) if n > 1]
        if any(s != d for s, d in nontrivial):
            raise KernelRuntimeError(f"argument {name!r} has strides {view.strides}, the kernel expects {tuple(strides)}"
                                     " (declare it with T.StridedTensor or pass a contiguous tensor)")
        if view.ptr % max(align, 1):
            raise KernelRuntimeError(f"argument {name!r} must be {align}-byte aligned for the vector and bulk copies "
                                     f"the kernel makes (its address is {view.ptr:#x})")
        current = _current_device()
        if view.device is not None and current is not None and view.device != current:
            raise KernelRuntimeError(f"argument {name!r} is on cuda:{view.device}, but the current device is "
                                     f"cuda:{current}: call the kernel under torch.cuda.device({view.device}) (or "
                                     f"cupy.cuda.Device({view.device})), or move the tensor")
        return view

    def scalar(self, name, value, dtype):
        dt = dtypes.as_dtype(dtype)
        if isinstance(value, (np.generic, np.ndarray)) and getattr(value, "ndim", 0) == 0:
            value = value.item()
        if not isinstance(value, (bool, int, float)):
            shown = f"{type(value).__name__} {value!r}"[:80] if isinstance(value, str) else type(value).__name__
            raise KernelRuntimeError(f"argument {name!r} is a {dt.name} scalar, not {shown}")
        if not dt.is_float and isinstance(value, float):
            raise KernelRuntimeError(f"argument {name!r} is a {dt.name} scalar; {value!r} is not an integer")
        problem = dtypes.constant_problem(value, dt)
        if problem:
            raise KernelRuntimeError(f"argument {name!r}: {problem}")
        return dtypes.numpy_dtype(dt).type(value)

    # ---- tensor maps ------------------------------------------------------------------------
    def encode_tiled(self, name, global_address, fields):
        """The tensor map ``name`` of the tensor at ``global_address``: ``fields`` are the other
        arguments of ``cuTensorMapEncodeTiled`` (a dict the launcher keeps, unless they depend on
        the call's scalars). The previous call's map is reused when nothing changed."""
        last = self._last_maps.get(name)
        if last is not None and last[0] == global_address and last[1] is fields:
            return last[2]
        packed = self._encode_cached(name, global_address=global_address, **fields)
        self._last_maps[name] = (global_address, fields, packed)
        return packed

    def _encode_cached(self, name, *, data_type, rank, global_address, global_dims, global_strides_bytes,
                       box_dims, element_strides, interleave, swizzle, l2_promotion, oob_fill):
        key = (name, global_address, tuple(global_dims), tuple(global_strides_bytes), tuple(box_dims), swizzle)
        cached = self.tensormaps.get(key)
        if cached is not None:
            return cached
        tensor = name.removesuffix("_desc")
        if global_address % 16:
            raise KernelRuntimeError(f"argument {tensor!r} starts at address {global_address:#x}, which is not a multiple "
                                     f"of 16 bytes; the kernel moves it with TMA ({name}), which needs 16-byte aligned "
                                     f"tensors: pass a tensor that starts on 16 bytes (a fresh allocation, or "
                                     f".clone() of a slice at an odd offset)")
        odd = next((int(s) for s in global_strides_bytes if int(s) % 16), None)
        if odd is not None:
            raise KernelRuntimeError(f"argument {tensor!r} has a stride of {odd} bytes (a size given at this call), "
                                     f"which is not a multiple of 16 bytes; the kernel moves it with TMA ({name}), "
                                     f"which needs 16-byte multiples: pass sizes whose rows are whole 16-byte units")
        packed = self._encode_tensor_map(name, data_type, rank, global_address, global_dims, global_strides_bytes,
                                         box_dims, element_strides, interleave, swizzle, l2_promotion, oob_fill)
        self.tensormaps[key] = packed
        return packed

    def _encode_tensor_map(self, name, data_type, rank, global_address, global_dims, global_strides_bytes,
                           box_dims, element_strides, interleave, swizzle, l2_promotion, oob_fill):
        """``cuTensorMapEncodeTiled``: the 128-byte map as a numpy ``V128`` scalar."""
        from cuda.bindings import driver

        _init_driver()
        err, tmap = driver.cuTensorMapEncodeTiled(
            driver.CUtensorMapDataType(data_type), rank, global_address,
            [driver.cuuint64_t(int(d)) for d in global_dims],
            [driver.cuuint64_t(int(s)) for s in global_strides_bytes],
            [driver.cuuint32_t(int(b)) for b in box_dims],
            [driver.cuuint32_t(int(e)) for e in element_strides],
            driver.CUtensorMapInterleave(interleave), driver.CUtensorMapSwizzle(swizzle),
            driver.CUtensorMapL2promotion(l2_promotion), driver.CUtensorMapFloatOOBfill(oob_fill))
        if int(err) != 0:
            raise KernelRuntimeError(f"the driver refused the TMA tensor map {name} ({err}: dims {global_dims}, "
                                     f"strides {global_strides_bytes} bytes, box {box_dims}, swizzle {swizzle}, address "
                                     f"{global_address:#x}); check that the tensor is on the current device")
        return np.array([int(x) for x in tmap.opaque], dtype=np.uint64).view("V128")[0]

    # ---- launch -----------------------------------------------------------------------------
    def function(self, kernel_name):
        fn = self.functions.get(kernel_name)
        if fn is None:
            fn = self.module.get_function(kernel_name)
            if self.smem_bytes > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = self.smem_bytes
            self.functions[kernel_name] = fn
        return fn

    def launch(self, kernel_name, grid, block, smem_bytes, args, stream: int = 0, cooperative: bool = False):
        """Launch on ``stream`` (a raw ``CUstream``; the caller's, ``jit.kernel`` decides which):
        ``args`` are device pointers (ints), scalars (NumPy) and tensor maps, in parameter order.
        ``cooperative``: a kernel with grid barriers (``T.sync_grid``), whose blocks must all be
        resident at once: ``cuLaunchCooperativeKernel``, which refuses a grid that cannot be."""
        launcher = self._launchers.get((kernel_name, self.device))
        if launcher is None:
            from .launch import DriverLauncher

            launcher = DriverLauncher(self.function(kernel_name).ptr, len(args), cooperative)
            self._launchers[(kernel_name, self.device)] = launcher
        launcher(kernel_name, grid, block, smem_bytes, args, stream)

    def grid_barrier_word(self, stream: int = 0):
        """The word a ``T.sync_grid`` kernel's barriers count arrivals in: allocated and zeroed for
        this launch on its stream (CuPy's pool hands memory freed on a stream only to that stream
        again, after what was enqueued before), so launches on several streams never share one."""
        import cupy

        if stream and cupy.cuda.runtime.streamIsCapturing(stream):
            raise KernelRuntimeError("a kernel with T.sync_grid cannot be captured in a CUDA graph here: each launch "
                                     "allocates the word its grid barriers count in")
        with cupy.cuda.ExternalStream(stream) if stream else cupy.cuda.Stream.null:
            return cupy.zeros(1, dtype=cupy.uint32)


    # ---- debug mode -------------------------------------------------------------------------
    def debug_record(self, stream: int = 0):
        """The device record the debug-mode waits report a timeout in (one, reused): zeroed before
        every launch (on the launch's stream), or only once while checks are deferred (the first
        timeout then sticks). Not inside a CUDA graph capture: the record is read on the host."""
        import cupy

        if stream and cupy.cuda.runtime.streamIsCapturing(stream):
            raise KernelRuntimeError("a debug-mode kernel (tw.debug_barrier_timeout) cannot be captured in a CUDA "
                                     "graph: it reads its timeout record back after every launch. Compile without "
                                     "debug mode for graphs")
        if self._debug is None:
            self._debug = cupy.zeros(DEBUG_WORDS, dtype=cupy.uint32)
        elif self.check_each_launch:  # enqueued before the launch on the same stream
            cupy.cuda.runtime.memsetAsync(self._debug.data.ptr, 0, self._debug.nbytes, stream)
        return self._debug

    def check_debug_record(self, kernel_name, record, barriers, timeout_s, stream: int = 0):
        """After a debug-mode launch: wait for the kernel and raise ``KernelRuntimeError`` (with a
        ``record`` dict) if one of its mbarrier waits timed out. With ``check_each_launch`` off
        (benchmarks) nothing waits here; :meth:`check_deferred` checks later."""
        self._last_debug = (kernel_name, record, barriers, timeout_s, stream)
        if self.check_each_launch:
            self._raise_if_timed_out(*self._last_debug)

    def check_deferred(self):
        """Check the debug record of the launches made while ``check_each_launch`` was off."""
        if self._last_debug is not None:
            self._raise_if_timed_out(*self._last_debug)

    def _raise_if_timed_out(self, kernel_name, record, barriers, timeout_s, stream=0):
        try:
            words = [int(w) for w in read_after(record, stream)]  # waits for the kernel
        except Exception as exc:  # the kernel itself failed (a CUDA error surfaces here)
            raise KernelRuntimeError(f"{kernel_name} failed: {exc}") from exc
        if not words[0]:
            return
        barrier = barriers[words[5]] if words[5] < len(barriers) else f"barrier #{words[5]}"
        line = self.site_lines.get(words[8]) or words[9] or None
        # The record holds the hardware's blockIdx; a kernel that reorders its blocks (raster panels,
        # the longest first) knows them by other indices, which the message gives (a persistent one
        # walks tiles: its block has none of its own).
        block_idx = tuple(words[1:4])
        block = kernel_block(self.block_order, block_idx) if self.block_order else block_idx
        info = {"kernel": kernel_name, "barrier": barrier, "slot": words[6], "parity": words[7],
                "block": block, "block_idx": block_idx, "thread": words[4], "file": self.source_file,
                "line": line, "waited_s": words[10] / 1e6, "timeout_s": timeout_s}
        where = f"{self.source_file or '<kernel>'}:{line}" if line else "an unknown kernel line"
        if block is None:
            which = f"the persistent block at blockIdx {block_idx}"
        elif block == block_idx:
            which = f"block {block}"
        else:
            which = f"block (bx, by, bz) = {block}, at blockIdx {block_idx}"
        err = KernelRuntimeError(
            f"{kernel_name}: the wait on {barrier}[{info['slot']}] for parity {info['parity']} at {where} did not "
            f"complete within {timeout_s:g} s (debug mode; {which}, thread {info['thread']}): the "
            "kernel would have hung. Its threads left cleanly; check that barrier's arrivals, expected bytes and "
            "parity (the compile-time barrier check, tw.barrier_check, finds most such bugs)")
        err.record = info
        raise err


def _no_device():
    return None


_GET_DEVICE = _no_device  # CuPy's getDevice once a GPU answered (Runtime.__init__ asks)


def _current_device():
    """The current CUDA device (CuPy's view of it, which torch's device context also sets), or
    None where there is none to ask (no CuPy, no GPU: the checks of a dry run)."""
    global _GET_DEVICE
    if _GET_DEVICE is _no_device:
        try:
            import cupy

            cupy.cuda.runtime.getDevice()
        except Exception:
            return None
        _GET_DEVICE = cupy.cuda.runtime.getDevice
    return _GET_DEVICE()


# Our dtype name -> the framework dtype object a tensor of it has exactly (no byte views, no
# packed FP4; False where there is none); filled per framework on first use.
_TORCH_DTYPES: dict = {}
_NUMPY_DTYPES: dict = {}


def _cupy_pointer(value, shape, dtype, strides, align, device):
    """The pointer of a CuPy array that is exactly what the kernel expects, on ``device`` (the
    call's, read once by ``begin_call``); None for anything else (the full check then decides)."""
    kind = type(value).__module__
    if not kind.startswith("cupy"):
        return None
    expected = _NUMPY_DTYPES.get(dtype)
    if expected is None:
        expected = _numpy_dtype(dtype)
    if expected is False or value.dtype != expected or value.shape != shape:
        return None
    itemsize = expected.itemsize
    if value.strides != tuple(s * itemsize for s in strides) or value.device.id != device:
        return None
    ptr = value.data.ptr
    return None if ptr % align else ptr


def _torch_dtype(dtype: str):
    import torch

    dt = dtypes.as_dtype(dtype)
    found = None if dt.packed else getattr(torch, dtypes.torch_dtype_name(dt), None)
    _TORCH_DTYPES[dtype] = found if found is not None else False
    return _TORCH_DTYPES[dtype]


def _numpy_dtype(dtype: str):
    dt = dtypes.as_dtype(dtype)
    exact = not dt.packed and dt.name not in ("bfloat16", "float8_e4m3", "float8_e5m2")
    _NUMPY_DTYPES[dtype] = dtypes.numpy_dtype(dt) if exact else False
    return _NUMPY_DTYPES[dtype]


_DRIVER_READY = False


def _init_driver():
    global _DRIVER_READY
    if not _DRIVER_READY:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if int(err) != 0:
            raise KernelRuntimeError(f"cuInit failed: {err}")
        _DRIVER_READY = True


class DeviceFunction:
    """One kernel of a :class:`DeviceModule`, launched like CuPy's ``RawKernel``:
    ``fn(grid, block, args, shared_mem=...)``. Attributes set here (the dynamic shared-memory
    limit) apply on every device the kernel runs on."""

    def __init__(self, module: DeviceModule, name: str):
        self.module = module
        self.name = name
        self._by_device: dict = {}
        self._max_dynamic_smem: int | None = None

    def _function(self):
        import cupy

        device = cupy.cuda.runtime.getDevice()
        fn = self._by_device.get(device)
        if fn is None:
            module = self.module.module_for(device)
            try:
                fn = module.get_function(self.name)
            except cupy.cuda.driver.CUDADriverError as exc:
                raise KernelRuntimeError(f"the loaded cubin has no kernel {self.name!r}: {exc}") from exc
            if self._max_dynamic_smem is not None:
                _set_max_dynamic_smem(fn, self._max_dynamic_smem)
            self._by_device[device] = fn
        return fn

    @property
    def ptr(self) -> int:
        return self._function().ptr

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        import cupy

        driver = cupy.cuda.driver
        return driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.ptr)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int):
        self._max_dynamic_smem = int(nbytes)
        for fn in self._by_device.values():
            _set_max_dynamic_smem(fn, self._max_dynamic_smem)
        self._function()  # the current device's function gets it as it loads

    def max_active_blocks(self, threads: int, smem_bytes: int) -> int:
        """Blocks of this kernel one multiprocessor holds at once (the driver's occupancy calculator)."""
        import cupy

        return cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.ptr, threads, smem_bytes)

    @property
    def num_regs(self) -> int:
        import cupy

        driver = cupy.cuda.driver
        return driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_NUM_REGS, self.ptr)

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self._function()(tuple(grid), tuple(block), args, shared_mem=shared_mem, stream=stream)


def _set_max_dynamic_smem(fn, nbytes: int):
    import cupy

    driver = cupy.cuda.driver
    driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)


class DeviceModule:
    """A cubin loaded with ``cuModuleLoadData`` (``cupy.cuda.function.Module.load``): on the current
    device at once, on another device when a kernel first runs there."""

    def __init__(self, cubin: bytes, arch: str | None = None):
        self.cubin = bytes(cubin)
        self.arch = arch
        self._modules: dict = {}
        import cupy

        self.module_for(cupy.cuda.runtime.getDevice())

    def module_for(self, device: int):
        module = self._modules.get(device)
        if module is None:
            import cupy
            from cupy.cuda import function

            module = function.Module()
            try:
                module.load(self.cubin)
            except cupy.cuda.driver.CUDADriverError as exc:
                built = f"built for {self.arch}" if self.arch else "built by NVRTC"
                raise KernelRuntimeError(f"CUDA could not load the kernel's cubin ({built}) on device {device}: "
                                         f"{exc}") from exc
            self._modules[device] = module
        return module

    def get_function(self, name: str) -> DeviceFunction:
        return DeviceFunction(self, name)


def load_module(cubin: bytes, arch: str | None = None) -> DeviceModule:
    """Load a cubin (from ``backend.nvrtc.compile_check``, or the compile record) on the GPU. No
    NVRTC runs here; ``arch`` only names the target in error messages."""
    return DeviceModule(cubin, arch)
