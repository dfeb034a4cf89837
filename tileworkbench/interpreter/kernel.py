"""A kernel the CPU interpreter runs: what ``compile(..., target="cpu")`` returns.

It holds the tile-level IR of the kernel compiled for sm_90a (after every tile pass: pipelining,
versioned buffers and barriers, warp specialisation are what runs), takes numpy arrays (or torch
CPU tensors), checks them against the signature, runs the blocks one after another
(``machine.Block``) and returns the outputs in the inputs' framework.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..dtypes import as_dtype
from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from .machine import Block, Blocked, Runner
from .values import Unsupported, evaluate, storage_dtype

# A persistent kernel's blocks walk the tiles; on the CPU a few blocks walk them all.
PERSISTENT_BLOCKS = 4


class CpuKernel:
    """Call with numpy arrays (or torch CPU tensors): all parameters, or the inputs only (the
    ``out_idx`` outputs are then allocated and returned)."""

    interpreted = True  # results come from the CPU interpreter (the workbench labels them so)

    def __init__(self, func: ir.PrimFunc, out_idx, name: str, artifact=None):
        self.func, self.out_idx, self.name = func, list(out_idx or []), name
        self.params = func.params
        self.artifact = artifact  # the sm_90a compile it stands for (``jit.lower``'s Artifact), if any
        self.trace = artifact.trace if artifact is not None else None

    def get_kernel_source(self) -> str:
        """The CUDA the kernel is on the GPU (what the interpreter runs is its tile-level IR)."""
        if self.artifact is None:
            raise KernelRuntimeError(f"{self.name} was made for the CPU interpreter without its sm_90a compile")
        return self.artifact.device_source

    def __repr__(self) -> str:
        return f"<tileworkbench CPU-interpreted kernel {self.name}>"

    def __call__(self, *args):
        full, outputs, torch_like = bind(self.name, self.params, self.out_idx, self._with_sizes(args))
        scalars = {p: v for p, v in zip(self.params, full) if isinstance(p, ir.Var)}
        arrays = {p.name: a for p, a in zip(self.params, full) if isinstance(p, ir.Buffer)}
        for block in self._blocks(scalars):
            block.globals_ = arrays
            block.vars.update(scalars)
            for event in Runner(block).run(self.func.body):
                raise _deadlock(self.name, event, block)
        return returned(outputs, torch_like)

    # ---- arguments -----------------------------------------------------------------------------
    def _with_sizes(self, args):
        """The call's arguments with the ``T.dynamic`` sizes put in, read from the tensors."""
        sizes = self.func.attrs.get("dynamic_sizes") or {}
        if not sizes:
            return args
        args, at = list(args), {i: (name, where) for i, p in enumerate(self.params) for name, where in sizes.items()
                                if p.name == name}
        for i in sorted(at):
            name, where = at[i]
            tensor, dim, multiple = (tuple(where) + (1,))[:3]
            if tensor >= len(args) or not hasattr(args[tensor], "shape"):
                raise KernelRuntimeError(f"{self.name}: the size {name} comes from argument {self.params[tensor].name}, "
                                         "a tensor")
            args.insert(i, int(args[tensor].shape[dim]) // multiple)
        return args

    def _blocks(self, scalars):
        launch = self.func.launch
        threads = np.arange(launch.total_threads)

        def block(hw: dict, index: tuple):
            b = Block(self.func, {}, index, hw=hw, active=threads)
            b.vars[launch.thread_var] = threads
            for var, v in zip(launch.block_vars, index):
                b.vars[var] = v
            return b

        if launch.persistent_tiles:
            count = min(PERSISTENT_BLOCKS, launch.persistent_tiles)
            for x in range(count):
                yield block({ir.HW_BLOCK.text: x, ir.HW_BLOCKS.text: count}, (x,))
            return
        env = Block(self.func, {}, (), vars=dict(scalars))
        grid = [int(evaluate(g, env)) for g in launch.grid]
        for index in itertools.product(*[range(n) for n in reversed(grid)]):
            index = tuple(reversed(index))  # x fastest, as the hardware numbers blocks
            hw = {f"(int)blockIdx.{a}": v for a, v in zip("xyz", index)}
            hw.update({f"(int)gridDim.{a}": n for a, n in zip("xyz", grid)})
            yield block(hw, index)


class CpuSequence:
    """Several kernels one call runs one after another (``T.alloc_global`` workspaces between
    them, as ``jit.sequence.KernelSequence`` on the GPU), each interpreted."""

    interpreted = True

    def __init__(self, seq: ir.KernelSequence, kernels: list, out_idx):
        self.name, self.kernels, self.out_idx = seq.name, kernels, list(out_idx)
        self.params, self.workspaces = seq.params, seq.workspaces
        self.trace = kernels[0].trace

    def __call__(self, *args):
        full, outputs, torch_like = bind(self.name, self.params, self.out_idx, args)
        scalars = {p: v for p, v in zip(self.params, full) if isinstance(p, ir.Var)}
        work = [_unwritten(w, scalars) for w in self.workspaces]
        for kernel in self.kernels:
            kernel(*full, *work)
        return returned(outputs, torch_like)


def bind(name: str, params, out_idx, args) -> tuple[list, list, bool]:
    """(every argument as numpy, the outputs, whether the inputs were torch tensors) of a call that
    passes all ``params`` or the inputs only (the ``out_idx`` outputs then allocated, unwritten)."""
    n_in = len(params) - len(out_idx)
    if len(args) not in (len(params), n_in):
        raise KernelRuntimeError(f"{name} takes {n_in} inputs or all {len(params)} arguments; got {len(args)}")
    torch_like = any(type(a).__module__.startswith("torch") for a in args)
    # the scalars first: the tensors' shapes may name them
    scalars = {p: v for p, v in zip(params, args) if isinstance(p, ir.Var)}
    given = iter(args)
    full, outputs = [], []
    for i, p in enumerate(params):
        if len(args) == n_in and i in out_idx:
            full.append(_unwritten(p, scalars))
        elif isinstance(p, ir.Buffer):
            arr, shape = _as_array(p, next(given), name), _shape(p, scalars)
            if tuple(arr.shape) != tuple(shape):
                raise KernelRuntimeError(f"{name}: argument {p.name} should have shape {tuple(shape)}, "
                                         f"got {tuple(arr.shape)}")
            full.append(arr)
        else:
            full.append(next(given))
        if i in out_idx:
            outputs.append(full[-1])
    return full, outputs, torch_like


def _unwritten(p: ir.Buffer, scalars: dict) -> np.ndarray:
    """A fresh array for an output or workspace: NaN (floats) where the kernel writes nothing."""
    return np.full(_shape(p, scalars), np.nan if p.dtype.is_float else 0, dtype=storage_dtype(p.dtype))


def returned(outputs: list, torch_like: bool):
    """A call's result: None, the output, or a tuple of them, in the inputs' framework."""
    outs = [_as_framework(o, torch_like) for o in outputs]
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)


def _shape(p: ir.Buffer, scalars: dict):
    env = Block(None, {}, (), vars=dict(scalars))
    return [int(evaluate(d, env)) for d in p.shape]


def _as_array(p: ir.Buffer, value, name: str) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        if value.device.type != "cpu":
            raise KernelRuntimeError(f"{name}: argument {p.name} is on {value.device}; the CPU interpreter takes CPU "
                                     "tensors (or numpy arrays)")
        import torch

        t = value.detach()
        ours = {torch.bfloat16: "bfloat16", torch.float8_e4m3fn: "float8_e4m3", torch.float8_e5m2: "float8_e5m2"}
        if t.dtype in ours:  # numpy has no such type: its bits, as ml_dtypes' (then checked like any)
            raw = t.view(torch.uint8 if t.element_size() == 1 else torch.int16).numpy()
            value = raw.view(storage_dtype(as_dtype(ours[t.dtype])))
        else:
            value = t.numpy()
    arr = np.asarray(value)
    want = storage_dtype(p.dtype)
    if arr.dtype != want:
        raise KernelRuntimeError(f"{name}: argument {p.name} should be {p.dtype.name} ({want}), got {arr.dtype}")
    return arr


def _as_framework(arr: np.ndarray, torch_like: bool):
    if not torch_like:
        return arr
    import torch

    if arr.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        raw = torch.from_numpy(arr.view(np.int16 if arr.itemsize == 2 else np.uint8).copy())
        return raw.view({"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn,
                         "float8_e5m2": torch.float8_e5m2}[arr.dtype.name])
    return torch.from_numpy(arr)


def _deadlock(name: str, event, block: Block) -> KernelRuntimeError:
    if not isinstance(event, Blocked):
        return KernelRuntimeError(f"internal: the interpreter stopped at {event!r}")
    loops = ", ".join(f"{n}={v}" for n, v in event.loops) or "outside any loop"
    line = f" at line {event.line}" if event.line else ""
    return KernelRuntimeError(
        f"{name}: deadlock in block {block.block_index}: the wait on {event.barrier}[{event.slot}] for parity "
        f"{event.parity}{line} ({loops}) can never complete: every thread that could arrive on it is waiting "
        f"(the CPU interpreter runs `T.ws` scopes in program order and the sides of a warp-specialised "
        f"block side by side)")


__all__ = ["CpuKernel", "CpuSequence", "Unsupported"]
