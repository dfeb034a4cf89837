"""What a ``@jit`` function written in TileLang's current style declares in its body: its sizes
(``M, N = T.const("M, N")``) and its outputs (``C = T.empty((M, N), dtype)``, returned at the
end). Its tensor parameters are annotated in the body too (``A: T.Tensor((M, K), dtype)``); the
front end (``frontend/eager.py``) reads all three."""

from __future__ import annotations

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..frontend.builder import ConstSymbol, error
from ..frontend.specs import OutputSpec
from ..ir import nodes as ir
from .types import _dtype, _tensor_dims


def _names(names, what: str) -> list[str]:
    if not isinstance(names, str):
        raise error(f"{what} takes the sizes' names as one string, e.g. {what}(\"M, N, K\"), not "
                    f"{_b.describe(names)}")
    found = [n for n in names.replace(",", " ").split() if n]
    if not found or not all(n.isidentifier() for n in found):
        raise error(f"{what}({names!r}): give one or more names, separated by commas")
    if len(set(found)) != len(found):
        raise error(f"{what}({names!r}): a name appears twice")
    return found


def const(names, dtype=_dt.int32):
    """Sizes fixed when the kernel is built: one ``ConstSymbol`` per name (a tuple for several),
    set from ``compile(M=...)`` or from the first tensor annotation that names it."""
    dt = _dtype(dtype, "T.const")
    if dt.is_float:
        raise error(f"T.const: sizes are integers, not {dt.name}")
    symbols = tuple(ConstSymbol(n, dt) for n in _names(names, "T.const"))
    return symbols[0] if len(symbols) == 1 else symbols


def dynamic(names, dtype=_dt.int32):
    """Sizes known only when the kernel runs: one compiled kernel serves every value. Each name is
    a scalar parameter of the kernel (an ``int32`` Var; a tuple for several), which a call takes
    from the first tensor whose annotation names it (``A: T.Tensor((M, K))``); the kernel's code
    keeps partial tiles inside the tensors at every size. Declared outside any kernel (in a
    builder, before its ``@T.prim_func``), each is a parameter after the tensors of every kernel
    whose tensor annotations name it (``frontend.parser.Parser.outer_sizes``)."""
    dt = _dtype(dtype, "T.dynamic")
    if dt.is_float:
        raise error(f"T.dynamic: sizes are integers, not {dt.name}")
    builder = _b.active()
    if builder is None:  # in a builder, before its @T.prim_func: a size its kernels' tensors name
        outer = tuple(ir.Var(n, dt) for n in _names(names, "T.dynamic"))
        _b.OUTER_SIZES.update(outer)
        return outer[0] if len(outer) == 1 else outer
    found = []
    multiple = builder.size_multiple
    for n in _names(names, "T.dynamic"):
        if builder.in_kernel:
            raise error(f"T.dynamic({names!r}) inside the kernel: declare sizes before `with T.Kernel(...)`")
        if any(name == n for name, _, _ in builder.dynamic_sizes):
            raise error(f"T.dynamic: the size {n} is declared twice")
        var = ir.Var(n if multiple == 1 else f"{n}_div{multiple}", dt)
        value = var if multiple == 1 else ir.BinOp("*", var, ir.const(multiple), dt)
        builder.dynamic_sizes.append((n, var, value))
        found.append(value)
    return found[0] if len(found) == 1 else tuple(found)


symbolic = dynamic  # TileLang's older name


def empty(shape, dtype=_dt.float32) -> OutputSpec:
    """A tensor the kernel writes and the call returns: ``C = T.empty((M, N), T.float16)``."""
    dt = _dtype(dtype, "T.empty")
    dims = _tensor_dims(shape, "T.empty", dt)
    for i, d in enumerate(dims):
        if isinstance(d, ConstSymbol):
            raise _b.unknown_size(d, f"T.empty: dimension {i}")
    return OutputSpec(dims, dt)
