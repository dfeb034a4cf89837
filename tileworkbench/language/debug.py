"""``T.print``: a value or a buffer printed from the kernel while it runs (``printf`` on the GPU,
Python's ``print`` on the CPU interpreters), as TileLang's debugging print."""

from __future__ import annotations

import math

from ..frontend import builder as _b
from ..frontend.builder import error
from ..ir import nodes as ir


def print(obj=None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0):  # noqa: A001 - TileLang's name
    """Print ``obj`` while the kernel runs.

    An expression: every thread that reaches the call prints its value (with its block and thread).
    A buffer: one thread, the first of warp ``warp_id`` of warpgroup ``warp_group_id``, prints every
    element (a fragment is first gathered in a shared tile; a thread's ``local`` buffer is printed
    by each thread). ``msg`` labels the lines; with no ``obj``, the message alone is printed by
    every thread that reaches it."""
    if not isinstance(msg, str):
        raise error(f"T.print: msg must be a string, got {_b.describe(msg)}")
    if obj is None:
        if not msg:
            raise error("T.print needs something to print: a value, a buffer or msg=")
        _emit(msg, None, ())
        return
    if isinstance(obj, ir.Buffer):
        _print_buffer(obj, msg, warp_group_id, warp_id)
        return
    value = _b.number(obj, "T.print: the value")
    _emit(msg or "value", value, ())


def _where() -> tuple:
    launch = _b.launch("T.print")
    return (*launch.block_vars, launch.thread_var)


def _emit(label: str, value, indices):
    _b.current().emit(ir.Evaluate(ir.print_call(label, _where(), value, indices)))


def _print_buffer(buf: ir.Buffer, msg: str, warp_group_id, warp_id):
    shape = buf.static_shape()
    if shape is None or buf.scope == "barrier":
        raise error(f"T.print: {buf.name} needs a shape known when the kernel is built")
    label = msg or buf.name
    source = buf
    if buf.scope == "fragment":  # each thread holds part of it: gathered in a shared tile first
        from .kernel import alloc_shared
        from .tile_ops import copy

        source = alloc_shared(shape, buf.dtype)
        source.name = f"{buf.name}_printed"
        copy(buf, source)
    launch = _b.launch("T.print")
    lane = (_b.constant_int(warp_group_id, "T.print: warp_group_id") * 128
            + _b.constant_int(warp_id, "T.print: warp_id") * 32)
    if not 0 <= lane < launch.threads:
        raise error(f"T.print: warp {warp_id} of warpgroup {warp_group_id} is thread {lane}, past the block's "
                    f"{launch.threads} threads")
    i = ir.Var("print_i")
    indices, rest = [], i
    for extent in reversed(shape):  # element i in row-major order
        indices.insert(0, rest % extent)
        rest = rest // extent
    label = label.replace("\0", "")
    element = ir.BufferLoad(source, tuple(indices), source.dtype)
    body = ir.For(i, ir.const(math.prod(shape)), ir.Evaluate(ir.print_call(label, _where(), element, indices)),
                  "serial")
    if buf.scope != "local":  # one thread prints a buffer all threads share
        body = ir.IfThenElse(ir.cmp("==", launch.thread_var, ir.const(lane)), body, None)
    _b.current().emit(body)
