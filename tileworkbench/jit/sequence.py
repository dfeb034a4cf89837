"""A compiled ``ir.KernelSequence``: several kernels that one call runs one after another.

``compile`` hands a ``@T.prim_func`` with several ``with T.Kernel(...)`` blocks (or with
``T.alloc_global`` workspaces) here: each block is compiled as a kernel of its own (cached as any
kernel is), taking the function's parameters and then the workspaces. A call binds the
function's arguments as a ``Kernel`` does (``out_idx`` outputs allocated in the framework of the
inputs), allocates the workspaces the same way, and launches the kernels in order on one stream
(the caller's, as a ``Kernel`` chooses it), so each sees what the previous one wrote.
"""

from __future__ import annotations

import concurrent.futures
import threading

from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from .lower import check_out_idx, device_compile_started


class KernelSequence:
    """Call it like a ``Kernel``; ``kernels`` are the compiled parts, in launch order."""

    def __init__(self, seq: ir.KernelSequence, kernels: list, out_idx):
        self.name = seq.name
        self.kernels = kernels
        n = len(seq.params)
        self.params = kernels[0].params[:n]  # the function's own, as a Kernel lists them
        # then its T.dynamic sizes (each kernel reads them from the tensors), then the workspaces
        self.workspaces = [p for p in kernels[0].params[n:] if p["kind"] == "tensor"]
        self.out_idx = check_out_idx(out_idx, [(p["name"], p["kind"] == "tensor") for p in self.params], self.name)
        self.target = kernels[0].target
        self.timings = {"compile_s": sum(k.timings.get("compile_s", 0.0) for k in kernels)}

    @property
    def trace(self):
        """The first kernel's trace (each part has its own: ``kernels[i].trace``)."""
        return self.kernels[0].trace

    def get_kernel_source(self) -> str:
        return "\n".join(f"// ==== kernel {i + 1} of {len(self.kernels)}: {k.name} ====\n{k.get_kernel_source()}"
                         for i, k in enumerate(self.kernels))

    def get_host_source(self) -> str:
        return "\n".join(k.get_host_source() for k in self.kernels)

    def __call__(self, *args, stream=None, **keywords):
        from ..backend.launch import stream_handle
        from .kernel import _allocate, bind_arguments

        if keywords:
            raise KernelRuntimeError(f"{self.name} takes its arguments by position, not by keyword "
                                     f"({', '.join(keywords)})")
        full, outputs = bind_arguments(self.name, self.params, self.out_idx, args)
        like = next((a for a in full if hasattr(a, "shape")), None)
        work = [_allocate(p, like) for p in self.workspaces]
        handle = stream_handle(stream, full)  # one stream for all: each kernel sees what the last wrote
        for kernel in self.kernels:
            kernel(*full, *work, stream=handle)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def timeline(self, block=None, part: int = 0):
        """The measured timeline of kernel ``part`` in the last call (``Kernel.timeline``): each part
        compiled with ``tw.timeline`` records its own."""
        if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < len(self.kernels):
            raise KernelRuntimeError(f"{self.name} runs {len(self.kernels)} kernel(s) ("
                                     f"{', '.join(k.name for k in self.kernels)}): part is 0 to {len(self.kernels) - 1}, "
                                     f"not {part!r}")
        return self.kernels[part].timeline(block)

    def get_profiler(self, tensor_supply_type=None):
        from .profiler import Profiler

        return Profiler(self, tensor_supply_type)


def compile_sequence(seq: ir.KernelSequence, out_idx, compile_one) -> KernelSequence:
    """Each of ``seq``'s kernels through ``compile_one(prim_func)`` (``jit.kernel.compile`` with the
    caller's target and pass configs), then the sequence."""
    check_out_idx(out_idx, [(p.name, isinstance(p, ir.Buffer)) for p in seq.params], seq.name)
    return KernelSequence(seq, compile_in_turns(seq.kernels, compile_one), out_idx)


def compile_in_turns(items: list, compile_one) -> list:
    """``[compile_one(x) for x in items]``, one thread each: NVRTC releases the GIL, so one kernel's
    device compile runs while the next is lowered (flash decoding's two on the 2-core CPU machine:
    1.01 s one after the other, 0.66-0.79 s in threads). The lowerings take turns, in order: a
    thread starts once the one before has started its NVRTC (``lower.device_compile_started``) or
    finished, so no kernel's NVRTC waits on Python work of the others sharing the interpreter
    (attention backward's three, all lowered at once: 0.50 s; in turns 0.47, the CPU machine)."""
    turns = [threading.Event() for _ in items]

    def take_turn(i: int, item):
        if i:
            turns[i - 1].wait()
        device_compile_started.hook = turns[i].set
        try:
            return compile_one(item)
        finally:
            device_compile_started.hook = None
            turns[i].set()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(len(items), 1)) as pool:
        return list(pool.map(take_turn, range(len(items)), items))
