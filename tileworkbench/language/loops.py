"""Kernel loops: ``T.serial``, ``T.Parallel`` (one iteration per element, spread over the
threads), ``T.Pipelined`` (software-pipelined) and ``T.unroll``."""

from __future__ import annotations

import builtins as _builtins

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.specs import LoopSpec, PersistentTiles, loop_extent, range_args, serial_loop
from ..ir import nodes as ir

_py_bool = _builtins.bool


def Parallel(*extents, coalesced_width=None, loop_layout=None, annotations=None, prefer_async=False):  # noqa: N802
    """``T.Parallel(*extents)``: every iteration independent, spread over the block's threads.
    ``coalesced_width``, ``annotations`` and ``prefer_async`` (TileLang's request for cp.async
    in a loop that copies global to shared memory, newer than 0.1.15) are hints, taken and not
    needed: the compiler chooses how threads take iterations and how a copy moves, which changes no
    value (a loop TileLang would leave in flight, without its commit and wait, is complete here when
    it ends: the stronger order); a ``loop_layout`` would be a ``T.Fragment``, which tileworkbench
    does not have."""
    if loop_layout is not None:
        raise error("T.Parallel: loop_layout (a T.Fragment) is not supported: the compiler chooses which thread "
                    "takes which iteration itself")
    if annotations is not None and not isinstance(annotations, dict):
        raise error(f"T.Parallel: annotations must be a dict, not {_b.describe(annotations)}")
    if not extents:
        raise error("T.Parallel needs at least one extent")
    checked = tuple(loop_extent(_b.integer(e, f"T.Parallel: extent {i}"), f"T.Parallel: extent {i}")
                    for i, e in enumerate(extents))
    return LoopSpec("parallel", checked, tuple(ir.const(0) for _ in extents))


def parallel(start, stop=None, *, annotations=None):
    """TIR's parallel loop, ``for i in T.parallel(n)`` (TileLang's block mean pooling): a
    one-dimensional ``T.Parallel(n)``; from a start other than 0 it is refused (write
    ``T.Parallel(stop - start)`` and add the start)."""
    if stop is None:
        return Parallel(start, annotations=annotations)
    if ir.const_int(_b.integer(start, "T.parallel: start")) != 0:
        raise error(f"T.parallel({_b.describe(start)}, {_b.describe(stop)}): a parallel loop from a start other "
                    "than 0 is not supported; loop over T.Parallel(stop - start) and add the start")
    return Parallel(stop, annotations=annotations)


def Persistent(domain, wave_size, index, group_size=8):  # noqa: N802
    """``for bx, by in T.Persistent([m_blocks, n_blocks], sm_num, block_id)``: this block's tiles of
    the domain, wave after wave (``frontend.specs.PersistentTiles``)."""
    dims = tuple(_b.constant_int(d, f"T.Persistent: domain dimension {i}", low=1) for i, d in enumerate(domain))
    if not dims:
        raise error("T.Persistent needs a domain of at least one dimension")
    waves = _b.integer(wave_size, "T.Persistent: wave_size")
    index = _b.integer(index, "T.Persistent: index")
    group = _builtins.max(1, _builtins.min(_b.constant_int(group_size, "T.Persistent: group_size", low=1), dims[-1]))
    if ir.const_int(waves) is None:
        raise error("T.Persistent: wave_size must be known when the kernel is compiled (the number of SMs)")
    tiles = PersistentTiles(dims, waves, index, group)
    return LoopSpec("persistent", (ir.const(tiles.waves()),), (ir.const(0),), persistent=tiles)


def serial(*args, annotations=None):
    return serial_loop(args, annotations)


Serial = serial  # TileLang spells it both ways


def vectorized(*args):
    """A short per-thread loop whose iterations touch neighbouring elements: unrolled, and a copy
    between a thread's array and a tensor moved in 16-byte accesses where alignment allows
    (``passes/vectorize_loops.py``; the annotation is its ``VECTORIZED``)."""
    starts, extents = range_args(args, "T.vectorized")
    if ir.const_int(extents[0]) is None:
        raise error("T.vectorized: the extent must be a constant")
    return LoopSpec("unrolled", extents, starts, annotations={"vectorized": True})


def unroll(*args, explicit=False, unroll_factor=None):
    starts, extents = range_args(args, "T.unroll")
    return LoopSpec("unrolled", extents, starts)


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None,  # noqa: N802
              annotations=None):
    """``T.Pipelined(extent)`` or ``(start, stop)``, positional or by name as TileLang 0.1.15 spells
    them (``start=``, ``stop=``). ``annotations`` are hints, taken and not needed."""
    if annotations is not None and not isinstance(annotations, dict):
        raise error(f"T.Pipelined: annotations must be a dict, not {_b.describe(annotations)}")
    starts, extents = range_args((start,) if stop is None else (start, stop), "T.Pipelined")
    if isinstance(num_stages, _py_bool) or ir.const_int(num_stages) is None or ir.const_int(num_stages) < 0:
        raise error(f"T.Pipelined: num_stages must be a non-negative constant, got {_b.describe(num_stages)}")
    if order is not None or stage is not None or group is not None:
        raise error("T.Pipelined: explicit order/stage/group are not supported; use num_stages")
    return LoopSpec("pipelined", extents, starts, stages=ir.const_int(num_stages))
