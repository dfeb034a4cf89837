"""What the DSL's calls hand the front end: the records behind ``T.Tensor`` annotations, a
``@jit`` function's outputs (``T.empty``), ``with T.Kernel(...)`` and kernel loops, and the rules for loop bounds that ``T.serial`` and the
front end's ``range`` share. ``tileworkbench.language`` makes them; the parser reads them."""

from __future__ import annotations

import math

from dataclasses import dataclass, field

from ..dtypes import DType
from ..ir import nodes as ir
from .builder import INT32_MAX, error, integer


@dataclass
class TensorSpec:
    """The annotation ``T.Tensor(shape, dtype)`` / ``T.StridedTensor(shape, strides, dtype)``."""

    shape: tuple
    dtype: DType
    strides: tuple | None = None


@dataclass(frozen=True)
class BufferSpec:
    """The annotation ``T.SharedBuffer(shape, dtype)`` / ``T.FragmentBuffer`` / ``T.LocalBuffer`` on a
    ``@T.macro``'s parameter: the call must pass a buffer of that scope, type and shape."""

    scope: str
    shape: tuple
    dtype: DType


@dataclass(frozen=True)
class MacroSpec:
    """``@T.macro`` on a function: calling it inside a kernel inlines its body there, parsed as
    kernel code (``T.Parallel`` loops and all) with its parameters bound to the call's values."""

    fn: object

    def __call__(self, *args, **kwargs):
        raise error(f"the T.macro {getattr(self.fn, '__name__', '?')} can only be called inside a kernel")


@dataclass
class OutputSpec:
    """``T.empty(shape, dtype)`` in a ``@jit`` function: a tensor the kernel writes and the call
    returns (the launcher allocates it)."""

    shape: tuple
    dtype: DType


@dataclass
class KernelSpec:
    """``T.Kernel(*grid, threads=...)``: what ``with`` opens the kernel's body with."""

    grid: tuple
    threads: int
    thread_dims: tuple = ()  # threads=(x, y, z) as written (the block is launched as x*y*z threads)


def opens_kernel_scope(fn):
    """Marks the DSL function whose call a kernel's ``with`` statement must be (``T.Kernel``): the
    front end looks at what is called before calling it, so ``with open(...)`` never runs."""
    fn.opens_kernel_scope = True
    return fn


@dataclass(frozen=True)
class WarpGroups:
    """``T.ws(g, ...)``: the warpgroups (128 threads each) that run a ``with`` block's body."""

    groups: tuple

    def thread_range(self, threads: int) -> tuple[int, int]:
        """(first thread, thread count) of the groups in a block of ``threads``; ValueError (the
        reason) where they are not consecutive or not in the block."""
        groups = sorted(set(self.groups))
        if groups != list(range(groups[0], groups[-1] + 1)):
            raise ValueError(f"warpgroups {', '.join(map(str, self.groups))} are not consecutive")
        first, count = 128 * groups[0], 128 * len(groups)
        if threads % 128 or first + count > threads:
            raise ValueError(f"the block's {threads} threads have warpgroups 0..{threads // 128 - 1} "
                             f"of 128 threads" if threads >= 128 and threads % 128 == 0 else
                             f"the block's {threads} threads are not whole warpgroups of 128")
        return first, count


def opens_thread_scope(fn):
    """Marks ``T.ws``, whose call a ``with`` statement inside a kernel may be."""
    fn.opens_thread_scope = True
    return fn


@dataclass(frozen=True)
class PersistentTiles:
    """``T.Persistent(domain, wave_size, index, group_size)``: a block's walk over the tiles of
    ``domain``, one wave of ``wave_size`` blocks at a time, as TileLang numbers them: tiles in
    groups of ``group_size`` along the last dimension (L2 reuse), ``index`` the block's place in a
    wave."""

    domain: tuple
    wave_size: ir.Expr
    index: ir.Expr
    group: int

    def grouped(self) -> list:
        """The walk's dimensions, slowest first: groups of the last, the others, within a group."""
        last = self.domain[-1]
        return [ir.as_expr((last + self.group - 1) // self.group), *self.domain[:-1], ir.as_expr(self.group)]

    def places(self) -> int:
        """The walk's places, the domain's tiles and those padding its last group."""
        return math.prod(ir.const_int(d) for d in self.grouped())

    def waves(self) -> int:
        return -(-self.places() // ir.const_int(self.wave_size))


@dataclass
class LoopSpec:
    """``T.serial`` / ``T.Parallel`` / ``T.Pipelined`` / ``T.unroll``: a kernel loop for ``for``."""

    kind: str
    extents: tuple
    starts: tuple
    annotations: dict = field(default_factory=dict)
    stages: int | None = None  # T.Pipelined's num_stages
    persistent: PersistentTiles | None = None  # T.Persistent's tile walk

    def __iter__(self):
        # A Python helper the kernel calls runs as Python: its `for` cannot become a kernel loop.
        raise error(f"a T.{self.kind} loop is only understood in the kernel's own body, not in a Python helper "
                    "it calls (helpers may call T.copy, T.fill, ... but not loop); write the loop in the kernel")


def loop_extent(extent: ir.Expr, what: str) -> ir.Expr:
    """A trip count the generated ``int`` loop counter can run through."""
    n = ir.const_int(extent)
    if n is not None and n < 0:
        raise error(f"{what} is {n}: a loop cannot run a negative number of times")
    if n is not None and n > INT32_MAX:
        raise error(f"{what} is {n}, more than a loop's 32-bit counter takes (2^31 - 1); split the loop")
    return extent


def range_args(args, fn: str) -> tuple[tuple, tuple]:
    """(starts, extents) of ``fn(extent)`` or ``fn(start, stop)``, checked."""
    if len(args) == 1:
        return (ir.const(0),), (loop_extent(integer(args[0], f"{fn}: the extent"), f"{fn}: the extent"),)
    if len(args) == 2:
        start, stop = integer(args[0], f"{fn}: the start"), integer(args[1], f"{fn}: the stop")
        for bound, name in ((start, "start"), (stop, "stop")):
            n = ir.const_int(bound)
            if n is not None and not -INT32_MAX - 1 <= n <= INT32_MAX:
                raise error(f"{fn}: the {name} {n} does not fit the loop's 32-bit counter")
        return (start,), (loop_extent(stop - start, f"{fn}: the trip count"),)
    raise error(f"{fn} takes (extent) or (start, stop)")


def serial_loop(args, annotations=None) -> LoopSpec:
    """``T.serial(*args)``, which a kernel's ``range(...)`` is too."""
    starts, extents = range_args(args, "T.serial")
    return LoopSpec("serial", extents, starts, dict(annotations or {}))
