"""CUDA of the program's own: ``T.import_source(code)`` brings device functions into the kernel's
source, ``T.call_extern(dtype, name, *args)`` calls one (TileLang's spellings). The arguments are
values: a pointer into a buffer (``T.access_ptr``) is refused, because the compiler places
barriers and checks races from what it sees read and written, and it cannot see into the function.
A function is taken to be a pure function of its arguments (it may be computed once for equal
arguments); the CPU interpreters do not run it."""

from __future__ import annotations

import re

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..frontend.builder import error
from ..ir import nodes as ir
from .thread_copies import AccessPointer
from .types import _dtype

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$")
_VOID = ("handle", "void", None)


def import_source(code):
    """Put ``code`` (CUDA device functions, a Python string) before the kernel, once."""
    if not isinstance(code, str) or not code.strip():
        raise error(f"T.import_source takes the CUDA source as a non-empty string, not {_b.describe(code)}")
    launch = _b.launch("T.import_source")
    if code not in launch.extern_sources:
        launch.extern_sources = (*launch.extern_sources, code)


def call_extern(dtype, name, *args):
    """``name(args...)``: a device function of an imported source (or CUDA's own) returning
    ``dtype``; with ``"handle"`` (void) it is a statement."""
    _b.launch("T.call_extern")
    if not isinstance(name, str) or not _NAME.match(name) or name.startswith(("tw::", "tw_")):
        raise error(f"T.call_extern: the function's name is a C++ identifier (tw:: and tw_ are the compiler's), "
                    f"not {name!r}")
    values = []
    for n, arg in enumerate(args):
        if isinstance(arg, AccessPointer) or (isinstance(arg, ir.Expr) and arg.dtype.kind == "handle"):
            raise error(f"T.call_extern({name!r}): argument {n + 1} is a pointer; only values are passed here, "
                        "since the compiler cannot see what the function reads or writes through one (its "
                        "barriers and race checks would miss it): load the elements and pass them")
        values.append(_b.number(arg, f"T.call_extern({name!r}): argument {n + 1}"))
    if dtype in _VOID:
        _b.current().emit(ir.Evaluate(ir.Call(name, tuple(values), _dt.handle)))
        return None
    return ir.Call(name, tuple(values), _dtype(dtype, "T.call_extern"))
