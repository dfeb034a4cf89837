"""The thread-level interpreter: a kernel's final lowered IR run on the CPU, thread by thread.

Where ``CpuKernel`` runs the IR after the tile-level passes, ``ThreadKernel`` runs what the GPU
runs: the IR after every pass of the pipeline (``Artifact.func``), or with ``stage="codegen"``
after the codegen phase too (flat offsets, C division, loop forms), so the passes that assign
elements to threads (fragment layouts, partitioned and vectorised loops, lowered tile operations,
reductions through warp shuffles and shared memory, guards of partial tiles, block barriers) are
checked too. Blocks run one after another (``thread_block.ThreadBlock``: the threads of a block in
lockstep), on the block indices the generated code computes from the hardware's
(``codegen.block_order``); memory, bounds and races are ``thread_memory``'s.

It runs kernels of plain loads and stores, vector copies, ``cp.async``, shuffles, atomics and TMA
stores; tensor cores, TMA loads, mbarriers, warp specialisation and persistent kernels are
``Unsupported`` (named). ``ThreadKernel`` binds arguments as ``CpuKernel`` does (its ``bind`` and
``T.dynamic`` sizes); ``run_at_thread_level`` lowers and runs a program in one call.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np

from ..codegen import block_order
from ..errors import KernelRuntimeError
from ..frontend import parse
from ..frontend.parser import deep_recursion
from ..ir import nodes as ir
from ..passes.manager import LowerContext, run_pipeline
from ..passes.pipeline import codegen_pass_list, pass_list
from ..target import PassContext, Target
from ..trace import Trace
from .kernel import CpuKernel, bind
from .thread_block import ThreadBlock
from .thread_calls import refusal
from .thread_memory import BlockMemory
from .values import Unsupported, evaluate

STAGES = ("lowered", "codegen")


def lower_for_threads(program, pass_configs=None, stage: str = "lowered") -> ir.PrimFunc:
    """``program`` (a ``@T.prim_func``, a parsed PrimFunc) compiled for sm_90a through every pass
    of the pipeline (``stage="codegen"``: and the codegen phase's), as ``tileworkbench.lower``
    compiles it (without the code generators and the analyses)."""
    src = parse(program)
    if isinstance(src, ir.KernelSequence):
        raise Unsupported(f"{src.name} runs {len(src.kernels)} kernels one after another: run each at the thread "
                          "level (`.kernels[i]`)")
    configs = PassContext.merged_configs(pass_configs)
    ctx = LowerContext(Target.of("sm_90a"), configs)
    with deep_recursion():
        func = run_pipeline(copy.deepcopy(src), pass_list(configs), ctx, Trace(kernel={"name": src.name}))
    return _codegen_phase(func, configs, stage)


def _codegen_phase(func: ir.PrimFunc, configs: dict, stage: str) -> ir.PrimFunc:
    if stage not in STAGES:
        raise ValueError(f"stage is one of {STAGES}, not {stage!r}")
    if stage == "lowered":
        return func
    ctx = LowerContext(Target.of("sm_90a"), configs)
    with deep_recursion():
        return run_pipeline(func, codegen_pass_list(configs), ctx, Trace(kernel={"name": func.name}))


class ThreadKernel(CpuKernel):
    """A kernel's final lowered IR, callable like ``CpuKernel`` (numpy arrays: all parameters, or
    the inputs with the ``out_idx`` outputs allocated and returned)."""

    def __init__(self, func: ir.PrimFunc, out_idx, name: str, artifact=None):
        super().__init__(func, out_idx, name, artifact)
        self._refuse(func)

    @classmethod
    def of(cls, program, out_idx=None, pass_configs=None, stage: str = "lowered") -> "ThreadKernel":
        """The thread-level kernel of ``program``: a ``CpuKernel`` (what ``compile(target="cpu")``
        returns: its sm_90a compile), an ``Artifact`` of ``tileworkbench.lower``, what
        ``frontend.eager.parse_eager`` returns (a ``@jit`` kernel's PrimFunc and outputs), or a
        ``@T.prim_func`` / PrimFunc (lowered here with ``pass_configs``)."""
        if isinstance(program, CpuKernel):
            if program.artifact is None:
                raise KernelRuntimeError(f"{program.name} was made without its sm_90a compile")
            out_idx = program.out_idx if out_idx is None else out_idx
            program = program.artifact
        if hasattr(program, "source_func") and hasattr(program, "func"):  # an Artifact
            func = _codegen_phase(program.func, program.pass_configs, stage)
            return cls(func, out_idx or [], program.kernel_name, program)
        if hasattr(program, "func") and hasattr(program, "out_idx"):  # parse_eager's EagerFunction
            out_idx = program.out_idx if out_idx is None else out_idx
            program = program.func
        func = lower_for_threads(program, pass_configs, stage)
        n = len(func.params)
        return cls(func, [i % n for i in (out_idx or [])], f"{func.name}_kernel")

    def __repr__(self) -> str:
        return f"<tileworkbench thread-level CPU-interpreted kernel {self.name}>"

    def _refuse(self, func: ir.PrimFunc):
        why = refusal(func)
        if why is not None:
            raise Unsupported(f"{self.name}: {why}")
        launch = func.launch
        if launch.persistent_tiles:
            raise Unsupported(f"{self.name} is a persistent kernel: the thread-level interpreter does not run it")

    def __call__(self, *args):
        call = bind(self.name, self.params, self.out_idx, self._with_sizes(args))
        scalars = {p: v for p, v in zip(self.params, call.full) if isinstance(p, ir.Var)}
        arrays = {p.name: a for p, a in zip(self.params, call.full) if isinstance(p, ir.Buffer)}
        threads = self.func.launch.total_threads
        where = _Where()
        memory = BlockMemory(self.func, arrays, threads, where)
        with np.errstate(all="ignore"):  # lanes a condition leaves out compute whatever they compute
            for number, (index, hw) in enumerate(self._thread_blocks(scalars)):
                memory.new_block(number)
                block = ThreadBlock(self.func, memory, index, hw)
                block.vars.update(scalars)
                for var, v in zip(self.func.launch.block_vars, index):
                    block.vars[var] = v
                where.block = block
                block.run(self.func.body)
        return call.result()

    def _thread_blocks(self, scalars):
        """(kernel block index, hardware texts) of each block, in the hardware's order (x fastest);
        the kernel's indices as the generated code computes them, checked to be one per block."""
        launch = self.func.launch
        env = _Env(scalars)
        grid = [int(evaluate(g, env)) for g in launch.grid]
        order = block_order.describe(launch)
        seen = set()
        for hw_index in itertools.product(*[range(n) for n in reversed(grid)]):
            hw_index = tuple(reversed(hw_index))
            index = block_order.kernel_block(order, (tuple(hw_index) + (0, 0))[:3])[:len(grid)]
            if index in seen or any(not 0 <= i < n for i, n in zip(index, grid)):
                raise KernelRuntimeError(f"{self.name}: hardware block {hw_index} runs kernel block {index}, which "
                                         f"{'another block runs too' if index in seen else 'is outside the grid'} "
                                         f"(grid {grid})")
            seen.add(index)
            hw = {f"(int)blockIdx.{a}": v for a, v in zip("xyz", hw_index)}
            hw.update({f"(int)gridDim.{a}": n for a, n in zip("xyz", grid)})
            yield tuple(int(i) for i in index), hw


class _Where:
    """Where the run is, for messages: the block running."""

    block = None

    @property
    def line(self):
        return self.block.line if self.block is not None else None

    def describe(self) -> str:
        return self.block.describe() if self.block is not None else ""


class _Env:
    """What ``values.evaluate`` needs to compute the grid from the scalar arguments."""

    def __init__(self, scalars):
        self.vars, self.hw, self.mask = dict(scalars), {}, None


def run_at_thread_level(program, *arrays, out_idx=None, pass_configs=None, stage: str = "lowered"):
    """Lower ``program`` (anything ``ThreadKernel.of`` takes) and run it at the thread level on
    numpy ``arrays`` (all parameters, or the inputs): the outputs, as ``CpuKernel`` returns them."""
    return ThreadKernel.of(program, out_idx=out_idx, pass_configs=pass_configs, stage=stage)(*arrays)


__all__ = ["ThreadKernel", "lower_for_threads", "run_at_thread_level"]
