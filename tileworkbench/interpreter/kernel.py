"""A kernel the CPU interpreter runs: what ``compile(..., target="cpu")`` returns.

It holds the tile-level IR of the kernel compiled for sm_90a (after every tile pass: pipelining,
versioned buffers and barriers, warp specialisation are what runs), takes numpy arrays (or torch
CPU tensors), checks them against the signature, runs the blocks one after another
(``machine.Block``) and returns the outputs in the inputs' framework.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as _dt
from ..dtypes import as_dtype
from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from ..ir.records import size_arguments
from ..ir.visitor import collect
from .machine import AtGridBarrier, Block, Blocked, Runner
from .values import Unsupported, evaluate, pack_fp4, storage_dtype, unpack_fp4

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
        # Random draws depend on each thread's order of elements, which the tile level does not
        # know: such a kernel runs on the thread-level interpreter (the sm_90a compile's threads).
        self.draws = any(c.name == ir.RNG_INIT for c in collect(func.body, ir.Call))

    def get_kernel_source(self) -> str:
        """The CUDA the kernel is on the GPU (what the interpreter runs is its tile-level IR)."""
        if self.artifact is None:
            raise KernelRuntimeError(f"{self.name} was made for the CPU interpreter without its sm_90a compile")
        return self.artifact.device_source

    def __repr__(self) -> str:
        return f"<tileworkbench CPU-interpreted kernel {self.name}>"

    def timeline(self, block=None):
        """No timeline here: ``tw.timeline`` instruments the GPU code, which the interpreter does not run."""
        raise no_timeline(self.name)

    def __call__(self, *args):
        if self.draws:
            from .threads import ThreadKernel

            return ThreadKernel.of(self)(*args)
        call = bind(self.name, self.params, self.out_idx, self._with_sizes(args))
        scalars = {p: v for p, v in zip(self.params, call.full) if isinstance(p, ir.Var)}
        arrays = {p.name: a for p, a in zip(self.params, call.full) if isinstance(p, ir.Buffer)}
        blocks = self._blocks(scalars)
        if ir.syncs_grid(self.func.body):
            self._run_side_by_side(list(blocks), arrays, scalars)
            return call.result()
        for block in blocks:
            block.globals_ = arrays
            block.vars.update(scalars)
            for event in Runner(block).run(self.func.body):
                raise _deadlock(self.name, event, block)
        return call.result()

    def _run_side_by_side(self, blocks: list, arrays: dict, scalars: dict):
        """A kernel with grid barriers (``T.sync_grid``): every block runs up to the next barrier
        before any goes past it, as on the GPU (which launches it cooperatively, all blocks resident)."""
        running = []
        for block in blocks:
            block.globals_ = arrays
            block.vars.update(scalars)
            running.append((block, Runner(block).run(self.func.body)))
        while running:
            waiting, finished = [], []
            for block, steps in running:
                event = next(steps, _ENDED)
                if event is _ENDED:
                    finished.append(block)
                elif isinstance(event, AtGridBarrier):
                    waiting.append((block, steps, event))
                else:
                    raise _deadlock(self.name, event, block)
            if waiting and finished:
                block, _, event = waiting[0]
                raise KernelRuntimeError(
                    f"{self.name}: deadlock: block {finished[0].block_index} ended without reaching the grid barrier "
                    f"(T.sync_grid) at line {event.line} that block {block.block_index} waits at")
            running = [(block, steps) for block, steps, _ in waiting]

    # ---- arguments -----------------------------------------------------------------------------
    def _with_sizes(self, args):
        """The call's arguments with the ``T.dynamic`` sizes put in, read from the tensors (as
        ``jit``'s kernels put them in); outputs left out stay left out."""
        sizes = self.func.attrs.get("dynamic_sizes") or {}
        if not sizes:
            return args
        names = [p.name for p in self.params]
        params = [(p.name, len(p.shape) if isinstance(p, ir.Buffer) else None) for p in self.params]
        full, _ = size_arguments(self.name, params, {names.index(n): w for n, w in sizes.items()}, self.out_idx, args)
        return [a for i, a in enumerate(full) if not (a is None and i in self.out_idx)]

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
        # T.dynamic sizes declared outside the kernels: (size parameter, index of a tensor, dimension)
        first = seq.kernels[0]  # as parsed: its size variables are those the tensors' shapes name
        self.sizes = [(p, *first.attrs["dynamic_sizes"][p.name][:2]) for p in first.params
                      if isinstance(p, ir.Var) and p.name in first.attrs.get("dynamic_sizes", {})]

    def _sizes(self, args) -> dict:
        """The sizes, read from the tensors the call passes (``ir.records.size_arguments``, the sizes
        taken as parameters after the function's own)."""
        if not self.sizes:
            return {}
        params = [(p.name, len(p.shape) if isinstance(p, ir.Buffer) else None) for p in self.params]
        params += [(var.name, None) for var, _, _ in self.sizes]
        where = {len(self.params) + k: (index, dim, 1) for k, (_, index, dim) in enumerate(self.sizes)}
        _, values = size_arguments(self.name, params, where, self.out_idx, args)
        return {var: values[var.name] for var, _, _ in self.sizes}

    def timeline(self, part: int = 0, block=None):
        """No timeline here: ``tw.timeline`` instruments the GPU code, which the interpreter does not run."""
        raise no_timeline(self.name)

    def __call__(self, *args):
        call = bind(self.name, self.params, self.out_idx, args, self._sizes(args))
        scalars = {p: v for p, v in zip(self.params, call.full) if isinstance(p, ir.Var)}
        work = [_unwritten(w, scalars) for w in self.workspaces]
        passed = call.as_passed()  # once: each kernel's FP4 results stay in the packed bytes for the next
        for kernel in self.kernels:
            kernel(*passed, *work)
        return call.result()


@dataclass
class Call:
    """One call's arguments as the interpreter holds them (``full``: numpy, FP4 unpacked to a
    value an element) and how its results go back: ``packed`` are the FP4 tensors as the caller
    passed them (bytes), written back from ``full`` after the run."""

    full: list
    outputs: list  # indices into full
    torch_like: bool
    packed: dict = field(default_factory=dict)  # index -> the caller's bytes

    handed_on: bool = False  # the packed bytes went to the kernels of a sequence: they hold the results

    def as_passed(self) -> list:
        """The arguments as a caller passes them (FP4 packed again): for the kernels of a sequence."""
        self._write_back()
        self.handed_on = True
        return [self.packed.get(i, a) for i, a in enumerate(self.full)]

    def result(self):
        """None, the output, or a tuple of them, in the inputs' framework."""
        if not self.handed_on:
            self._write_back()
        outs = [_as_framework(self.packed.get(i, self.full[i]), self.torch_like) for i in self.outputs]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _write_back(self):
        for i, raw in self.packed.items():
            raw.view(np.uint8)[...] = pack_fp4(self.full[i])


def bind(name: str, params, out_idx, args, sizes: dict | None = None) -> Call:
    """A call that passes all ``params`` or the inputs only (the ``out_idx`` outputs then
    allocated, unwritten), its arguments checked against the signature; ``sizes``: values of
    ``T.dynamic`` sizes the tensors' shapes name, which are no parameter here."""
    n_in = len(params) - len(out_idx)
    if len(args) not in (len(params), n_in):
        raise KernelRuntimeError(f"{name} takes {n_in} inputs or all {len(params)} arguments; got {len(args)}")
    torch_like = any(type(a).__module__.startswith("torch") for a in args)
    # the scalars first: the tensors' shapes may name them (outputs left out take no argument)
    passed = [p for i, p in enumerate(params) if not (len(args) == n_in and i in out_idx)]
    scalars = {**(sizes or {}), **{p: v for p, v in zip(passed, args) if isinstance(p, ir.Var)}}
    given = iter(args)
    call = Call([], [i for i in range(len(params)) if i in out_idx], torch_like)
    for i, p in enumerate(params):
        if len(args) == n_in and i in out_idx:
            call.full.append(_unwritten(p, scalars))
            if p.dtype.packed:
                call.packed[i] = pack_fp4(call.full[-1])
        elif isinstance(p, ir.Buffer):
            arr, shape = _as_array(p, next(given), name), _shape(p, scalars)
            if p.dtype.packed:  # FP4: the caller's array holds bytes, the last dimension halved
                shape = shape[:-1] + [shape[-1] // 2]
            if tuple(arr.shape) != tuple(shape):
                raise KernelRuntimeError(f"{name}: argument {p.name} should have shape {tuple(shape)}"
                                         f"{_dt.storage_note(p.dtype)}, got {tuple(arr.shape)}")
            if p.dtype.packed:
                call.packed[i] = arr
                arr = unpack_fp4(arr)
            else:
                _check_strides(name, p, arr, scalars)
            call.full.append(arr)
        else:
            call.full.append(next(given))
    return call


def _check_strides(name: str, p: ir.Buffer, arr: np.ndarray, scalars: dict):
    """The GPU's rule: an array's strides are the declared ones (row-major, or ``T.StridedTensor``'s)
    in every dimension of more than one element, so what runs here also runs there."""
    want = _evaluated(p.effective_strides(), scalars)
    have = [s // arr.itemsize for s in arr.strides]
    if any(h != w for h, w, n in zip(have, want, arr.shape) if n > 1):
        raise KernelRuntimeError(f"{name}: argument {p.name} has strides {tuple(have)} (elements), the kernel expects "
                                 f"{tuple(want)} (declare it with T.StridedTensor or pass a contiguous array)")


def _unwritten(p: ir.Buffer, scalars: dict) -> np.ndarray:
    """A fresh array for an output or workspace: NaN (floats that have one) where the kernel
    writes nothing."""
    fill = np.nan if p.dtype.is_float and not p.dtype.packed else 0
    return np.full(_shape(p, scalars), fill, dtype=storage_dtype(p.dtype))


def _shape(p: ir.Buffer, scalars: dict):
    return _evaluated(p.shape, scalars)


def _evaluated(exprs, scalars: dict) -> list:
    """Integer expressions of the signature (shapes, strides) at the call's scalar arguments."""
    env = Block(None, {}, (), vars=dict(scalars))
    return [int(evaluate(e, env)) for e in exprs]


def _as_array(p: ir.Buffer, value, name: str) -> np.ndarray:
    if type(value).__module__.startswith("torch"):
        if value.device.type != "cpu":
            raise KernelRuntimeError(f"{name}: argument {p.name} is on {value.device}; the CPU interpreter takes CPU "
                                     "tensors (or numpy arrays)")
        import torch

        t = value.detach()
        ours = {torch.bfloat16: "bfloat16", torch.float8_e4m3fn: "float8_e4m3", torch.float8_e5m2: "float8_e5m2"}
        if str(t.dtype) == "torch.float4_e2m1fn_x2":  # two FP4 values a byte
            value = t.view(torch.uint8).numpy()
        elif t.dtype in ours:  # numpy has no such type: its bits, as ml_dtypes' (then checked like any)
            raw = t.view(torch.uint8 if t.element_size() == 1 else torch.int16).numpy()
            value = raw.view(storage_dtype(as_dtype(ours[t.dtype])))
        else:
            value = t.numpy()
    arr = np.asarray(value)
    if p.dtype.packed:
        if arr.dtype not in (np.uint8, np.int8):
            raise KernelRuntimeError(f"{name}: argument {p.name} should be {p.dtype.name}, two values a byte (uint8 or "
                                     f"int8), got {arr.dtype}")
        return arr
    want = storage_dtype(p.dtype)
    if p.dtype.name == "int4x2" and arr.dtype == np.uint8:  # bytes either way (the GPU path takes both too)
        arr = arr.view(np.int8)
    if arr.dtype != want:
        raise KernelRuntimeError(f"{name}: argument {p.name} should be {p.dtype.name} ({want}){_dt.storage_note(p.dtype)}, "
                                 f"got {arr.dtype}")
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


_ENDED = object()  # what a block's statements give when they have all run


def no_timeline(name: str) -> KernelRuntimeError:
    return KernelRuntimeError(f"{name} runs on the CPU interpreter, which records no timeline: tw.timeline "
                              "instruments the kernel's GPU code; compile it for the GPU (target \"cuda\") to "
                              "record one")


def _deadlock(name: str, event, block: Block) -> KernelRuntimeError:
    if not isinstance(event, Blocked):
        return KernelRuntimeError(f"internal: the interpreter stopped at {event!r}")
    loops = ", ".join(f"{n}={v}" for n, v in event.loops) or "outside any loop"
    line = f" at line {event.line}" if event.line else ""
    return KernelRuntimeError(
        f"{name}: deadlock in block {block.block_index}: the wait on {event.barrier}[{event.slot}] for parity "
        f"{event.parity}{line} ({loops}) can never complete: every thread that could arrive on it is waiting "
        f"(the CPU interpreter runs the sides of a warp-specialised block, and `T.ws` scopes of different threads "
        f"that follow one another, side by side)")


__all__ = ["CpuKernel", "CpuSequence", "Unsupported"]
