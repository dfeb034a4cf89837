"""A kernel: its ``Launch`` (grid, threads, and what passes add: rasterisation, the producer
warpgroup, persistent tiles) and the ``PrimFunc`` that holds parameters, body and attributes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .expr import Var
from .stmt import Stmt

# --------------------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------------------


@dataclass(eq=False, repr=False)
class Launch:
    grid: tuple  # block counts, x first
    threads: int
    block_vars: tuple  # Vars bound to blockIdx.x/y/z
    thread_var: Var
    # Block rasterisation for L2 reuse: blocks run in panels of this many block rows
    # (0: hardware order). ``raster_request`` is what T.use_swizzle asked for (None: not asked).
    raster_panel: int = 0
    raster_request: int | None = None
    # Blocks numbered so that bx runs from the last in the hardware's dispatch order (across the
    # whole grid: bx from its slowest-varying part where there are blocks along y or z), so the
    # blocks whose loops run longest start first (``rasterize_blocks``).
    heaviest_first: bool = False
    # With ``heaviest_first`` on a grid with blocks along y or z: the (y, z) index pairs whose
    # blocks take their turn together, the longest first, before the next pairs' (0: all of them).
    heaviest_first_panel: int = 0
    # Warp specialisation adds a producer warpgroup after the ``threads`` the kernel was written
    # for; layouts and thread loops still use ``threads``, the hardware launches ``total_threads``.
    producer_threads: int = 0
    # A persistent kernel (``warp_specialize``) walks this many tiles of ``grid`` in a loop of its
    # own; the hardware launches min(tiles, multiprocessors) blocks along x (0: one block per tile).
    persistent_tiles: int = 0
    # ``T.Kernel(threads=(x, y, z))`` as written: the front end recovers each index from the one
    # the block is launched with (x fastest); every pass sees ``threads`` = x*y*z.
    thread_dims: tuple = ()
    # The register hand-over of a warp-specialised kernel (``setmaxnreg``: the producer warpgroup
    # gives registers back, the consumers take them): off by ``T.disable_warp_group_reg_alloc()``,
    # its counts from ``T.annotate_producer_reg_dealloc`` / ``T.annotate_consumer_reg_alloc``
    # (None: the compiler's).
    register_handover: bool = True
    producer_registers: int | None = None
    consumer_registers: int | None = None
    # CUDA source the kernel brings with ``T.import_source`` (the device functions its
    # ``T.call_extern`` calls name), in order, each once: placed before the kernel.
    extern_sources: tuple = ()

    @property
    def total_threads(self) -> int:
        return self.threads + self.producer_threads


@dataclass(eq=False, repr=False)
class PrimFunc:
    name: str
    params: list  # Buffers (scope "global") and scalar Vars
    body: Stmt
    launch: Launch
    attrs: dict = field(default_factory=dict)
    source_file: str = "<unknown>"
    source_line: int = 0

    def with_body(self, body: Stmt) -> "PrimFunc":
        return dataclasses.replace(self, body=body, attrs=dict(self.attrs))

    def __str__(self) -> str:
        from .printer import print_ir

        return print_ir(self)


@dataclass(eq=False, repr=False)
class KernelSequence:
    """A ``@T.prim_func`` with several ``with T.Kernel(...)`` blocks, or with ``T.alloc_global``
    workspaces: the kernels run one after another on one stream, each a ``PrimFunc`` of its own
    whose parameters are the function's (``params``) followed by the workspaces, device memory
    each call allocates (flash decoding's partial outputs and log-sum-exps, say)."""

    name: str
    params: list
    workspaces: list  # Buffers (scope "global")
    kernels: list  # PrimFuncs, in launch order
    source_file: str = "<unknown>"
    source_line: int = 0
    attrs: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return "\n".join(str(k) for k in self.kernels)
