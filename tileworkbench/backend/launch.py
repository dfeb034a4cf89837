"""The launch itself: a kernel's arguments packed into one host buffer it keeps, handed to the
driver's ``cuLaunchKernel`` (cuda-bindings) on the caller's stream.

``cuLaunchKernel`` copies the parameters when it is called, so one buffer per kernel serves every
call: a pointer is one 64-bit word written in place, a TMA tensor map (128 bytes) is written only
when the launcher hands a different one (the runtime's cache returns the same object for an
unchanged tensor), and nothing is allocated per call. What it costs per call, and what the parts
of a call cost, is measured by ``scripts/experiments/launch_paths.py``.

Streams (``stream_handle``): an explicit ``stream=`` (an int handle, a ``torch.cuda.Stream``, a
``cupy.cuda.Stream``, or anything with ``cuda_stream`` or ``ptr``); else the current stream of
the framework the arguments come from: torch's for torch tensors, CuPy's otherwise. So a launch
inside ``torch.cuda.stream(s)`` or a ``torch.cuda.graph`` capture goes where torch's own kernels
of that moment go.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..errors import KernelRuntimeError

SLOT_WORDS = 16  # 128 bytes per parameter: a tensor map (64-byte aligned) fits, a pointer uses one word


class ParamBuffer:
    """The parameters of one kernel: slot ``i`` holds parameter ``i``; ``address`` is the
    ``void**`` array ``cuLaunchKernel`` reads (slot addresses).

    ``pack(args)`` writes a call's parameters: Python ints are device pointers (one word each,
    written every call), anything else (a NumPy scalar, a ``V128`` tensor map) is written only
    when it is another object than the slot holds. Which slot is which is fixed by the kernel's
    signature, so the first call writes a packer for it: straight-line stores, no loop, no type
    tests per call (a loop over five parameters cost 0.7 us, its straight-line form 0.2 us)."""

    def __init__(self, count: int):
        self._storage = (ctypes.c_uint64 * ((count + 1) * SLOT_WORDS))()
        start = ctypes.addressof(self._storage)
        base = -(-start // 128) * 128
        self._first_word = (base - start) // 8
        self._base = base
        self._slot_pointers = (ctypes.c_void_p * max(count, 1))(*[base + 128 * i for i in range(count)])
        self.address = ctypes.addressof(self._slot_pointers)
        self.count = count
        self._held = [None] * count  # the object each non-pointer slot holds, by identity
        self.pack = self._first_pack

    def _first_pack(self, args) -> None:
        if len(args) != self.count:
            raise KernelRuntimeError(f"the launcher passed {len(args)} parameters; the kernel takes {self.count}")
        lines = ["def pack(args):", f"    ({', '.join(f'a{i}' for i in range(self.count))}{',' if self.count == 1 else ''}) = args"]
        for i, value in enumerate(args):
            if type(value) is int:
                lines.append(f"    words[{self._first_word + i * SLOT_WORDS}] = a{i}")
            else:
                lines.append(f"    if a{i} is not held[{i}]:\n        write({i}, a{i})")
        namespace = {"words": self._storage, "held": self._held, "write": self._write}
        exec("\n".join(lines) if self.count else "def pack(args):\n    pass", namespace)
        self.pack = namespace["pack"]
        self.pack(args)

    def _write(self, i: int, value) -> None:
        raw = np.asarray(value).tobytes()
        if len(raw) > SLOT_WORDS * 8:
            raise KernelRuntimeError(f"kernel parameter {i} is {len(raw)} bytes, more than a slot holds")
        ctypes.memmove(self._base + 128 * i, raw, len(raw))
        self._held[i] = value


def stream_handle(stream, args) -> int:
    """The raw ``CUstream`` a launch goes on (see the module docstring)."""
    if stream is not None:
        return explicit_stream(stream)
    for value in args:
        if type(value).__module__ == "torch":
            device = value.get_device()
            if device >= 0:  # a CPU tensor: the launcher's check says so, after this
                return torch_current_stream(device)
    return cupy_current_stream()


_TORCH_STREAM = None


def torch_current_stream(device: int) -> int:
    """torch's current stream on ``device`` (what ``torch.cuda.current_stream(device)`` names, for
    a tenth of a microsecond instead of microseconds)."""
    global _TORCH_STREAM
    if _TORCH_STREAM is None:
        import torch

        _TORCH_STREAM = torch._C._cuda_getCurrentRawStream
    return _TORCH_STREAM(device)


_CUPY_STREAM = None


def cupy_current_stream() -> int:
    """CuPy's current stream, or 0 (the legacy default stream) where CuPy cannot say: no CuPy or
    no GPU (a dry run's checks)."""
    global _CUPY_STREAM
    if _CUPY_STREAM is None:
        try:
            import cupy

            cupy.cuda.get_current_stream()
        except Exception:
            return 0
        _CUPY_STREAM = cupy.cuda.get_current_stream
    return _CUPY_STREAM().ptr


def explicit_stream(stream) -> int:
    if isinstance(stream, bool):
        raise KernelRuntimeError(f"stream= must be a CUDA stream or its handle, not {stream!r}")
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda.core
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise KernelRuntimeError(f"stream= must be a CUDA stream (torch.cuda.Stream, cupy.cuda.Stream) or its int "
                             f"handle, not {type(stream).__name__}")


class DriverLauncher:
    """``cuLaunchKernel`` of one function with a ``ParamBuffer``; handles wrapped once.
    ``cooperative``: ``cuLaunchCooperativeKernel`` (a kernel with grid barriers)."""

    def __init__(self, function_ptr: int, count: int, cooperative: bool = False):
        from cuda.bindings import driver

        self.cooperative = cooperative
        if cooperative:
            cooperative_launch = driver.cuLaunchCooperativeKernel
            self._launch = lambda f, gx, gy, gz, bx, by, bz, smem, stream, params, extra: cooperative_launch(
                f, gx, gy, gz, bx, by, bz, smem, stream, params)
        else:
            self._launch = driver.cuLaunchKernel
        self._success = driver.CUresult.CUDA_SUCCESS
        self._handle = driver.CUfunction(function_ptr)
        self._stream_type = driver.CUstream
        self._streams: dict = {}
        self._last_stream, self._last_handle = None, None
        self._lock = threading.Lock()
        self.params = ParamBuffer(count)

    def __call__(self, kernel_name: str, grid, block, smem_bytes: int, args, stream: int) -> None:
        # One call at a time: the driver call lets the GIL go, and another thread's pack into the
        # same buffer must not land between this pack and the driver's read of it.
        with self._lock:
            self.params.pack(args)
            if stream != self._last_stream:  # a CUstream wrapper per handle, made once
                handle = self._streams.get(stream)
                if handle is None:
                    if len(self._streams) > 64:  # streams come and go: keep the table small
                        self._streams.clear()
                    handle = self._streams[stream] = self._stream_type(stream)
                self._last_stream, self._last_handle = stream, handle
            (err,) = self._launch(self._handle, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem_bytes,
                                  self._last_handle, self.params.address, 0)
        if err is not self._success:
            why = ""
            if err.name == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE":
                why = ("; it has grid barriers (T.sync_grid), so all its blocks must be resident at once, and this "
                       "device cannot hold that many of them: launch fewer blocks (a persistent loop over the "
                       "work, one block per SM)")
            raise KernelRuntimeError(f"launching {kernel_name} failed: {err.name} (grid {tuple(grid)}, block "
                                     f"{tuple(block)}, {smem_bytes} bytes of shared memory){why}")


_THREAD = threading.local()  # has_context: this thread has a current CUDA context (checked once)


def current_context() -> int:
    """The calling thread's current CUDA context (``CUcontext`` as an int; 0: none, or no driver
    to ask)."""
    try:
        from cuda.bindings import driver

        err, context = driver.cuCtxGetCurrent()
    except Exception:  # no libcuda here (the CPU tests' stand-in runtimes)
        return 0
    return int(context) if int(err) == 0 and context is not None else 0


def adopt_context(context: int) -> None:
    """Before a thread's first call: a thread that has run no CUDA yet has no current context, and
    the driver would refuse the call's tensor-map encoding and launch; it gets ``context`` (where
    the kernel was loaded: its device's primary context, as the CUDA runtime gives a thread on its
    first call there). A thread with a context keeps it. Checked once a thread."""
    if getattr(_THREAD, "has_context", False):
        return
    if context and not current_context():
        from cuda.bindings import driver

        driver.cuCtxSetCurrent(driver.CUcontext(context))
    _THREAD.has_context = True
