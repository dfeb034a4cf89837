"""How many registers a kernel's fragments take a thread, against what a thread can have: passes
that trade registers for speed (``isolate_starved_wgmmas``, ``prefetch_gather_indices``) ask
whether the kernel is already short of them."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import collect

MAX_THREAD_REGISTERS = 255  # what ptxas gives a thread at most, whatever the launch bounds


def thread_register_limit(threads: int) -> int:
    """The registers a thread of a block of ``threads`` can have: the register file's share (65536
    of them on sm_90), at most 255."""
    return min(MAX_THREAD_REGISTERS, 65536 // threads)


def fragment_registers(func: ir.PrimFunc) -> int:
    """The 32-bit registers one thread needs to hold every fragment (spread over the block's
    threads) and every thread-local array the kernel allocates, all at once."""
    threads = func.launch.threads
    total = 0
    for alloc in collect(func.body, ir.Allocate):
        buf = alloc.buffer
        if buf.scope == "fragment":
            total += -(-buf.dtype.bytes_for(buf.numel) // (4 * threads))
        elif buf.scope == "local":
            total += -(-buf.dtype.bytes_for(buf.numel) // 4)
    return total


def short_of_registers(func: ir.PrimFunc) -> bool:
    """Whether the kernel's fragments and thread arrays need more registers a thread than it has."""
    return fragment_registers(func) > thread_register_limit(func.launch.threads)
