"""The statement builder the ``T.*`` functions append to while the front end walks a kernel, and
the argument checks they all use.

The front end pushes a frame for every block (kernel body, loop body, if branch); ``emit``
appends a statement to the innermost frame, stamped with the source location of the line the
front end is visiting. ``T.*`` functions therefore stay thin: check arguments (``number``,
``integer``, ``constant_int``, ``stored_value``: each error names the function, the argument and
the value), build a node, emit it.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from ..dtypes import TypedValue, constant_problem
from ..errors import CompileError, SourceLocation, caller_location
from ..ir import nodes as ir

_state = threading.local()


class Builder:
    def __init__(self):
        self.frames: list[list[ir.Stmt]] = []
        self.loc: SourceLocation | None = None
        self.launch: ir.Launch | None = None
        self.names: dict[str, int] = {}
        self.loop_vars: list[ir.Var] = []  # innermost last
        self.loop_frames: list = []  # breaks.LoopFrame of the kernel loops being built, innermost last
        self.pipelined_depth = 0
        self.in_kernel = False  # inside the body of `with T.Kernel(...)`
        self.kernel_depth = 0  # len(frames) where the kernel's own statements go (its top level)
        self.thread_scope: tuple[int, int] | None = None  # (first thread, count) inside `with T.ws(...)`
        self.workspaces: list[ir.Buffer] = []  # T.alloc_global buffers, before the kernels
        self.var_buffers: set = set()  # T.alloc_var buffers: `x = value` stores into them
        # kernel names bound by `name = value` (ir.LetStmt): var -> value; those assigned again since;
        # those a slice's extent was worked out through (var -> where), which may not be assigned again
        self.let_values: dict = {}
        self.reassigned: set = set()
        self.sized_by: dict = {}
        self.decides_threads: dict = {}  # var -> where an `if var < C:` made the threads' scope
        # global tensors given a layout by T.annotate_layout: buffer -> regions.LaidOut
        self.global_layouts: dict = {}
        # T.reshape / T.view of fragments: view buffer -> fragment_views.FragmentView
        self.fragment_views: dict = {}
        # T.dynamic sizes, (name, parameter, value): a call takes the parameter from a tensor's shape;
        # compiled for sizes that are multiples of ``size_multiple``, the value is parameter * it
        self.dynamic_sizes: list = []
        self.size_multiple = 1

    def emit(self, stmt: ir.Stmt) -> ir.Stmt:
        if not self.frames or not self.in_kernel:
            raise CompileError("kernel statements (allocations, tile operations, stores, kernel variables) must "
                               "be inside `with T.Kernel(...)`; only Python values (sizes, dtypes) may be "
                               "computed before or after it", self.loc)
        if getattr(stmt, "loc", None) is None and hasattr(stmt, "loc"):
            stmt.loc = self.loc
        self.frames[-1].append(stmt)
        return stmt

    def push(self):
        self.frames.append([])

    def pop(self) -> ir.Stmt:
        return ir.seq(self.frames.pop())

    def fresh_name(self, base: str) -> str:
        n = self.names.get(base, 0)
        self.names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"


# T.dynamic sizes declared outside any kernel (in a builder, before its @T.prim_func: TileLang's
# varlen kernels); the classic front end makes each a scalar parameter of the kernels whose
# tensor annotations name it (``Parser.outer_sizes``).
OUTER_SIZES: "weakref.WeakSet[ir.Var]" = weakref.WeakSet()


def active() -> Builder | None:
    """The builder of the kernel being parsed, None outside one."""
    return getattr(_state, "builder", None)


def current() -> Builder:
    b = getattr(_state, "builder", None)
    if b is None:
        raise CompileError("T.* functions that build a kernel can only be used inside a @T.prim_func kernel",
                           caller_location())
    return b


def launch(what: str) -> ir.Launch:
    """The kernel's launch (grid, threads), or an error saying ``what`` needs ``with T.Kernel``."""
    b = current()
    if b.launch is None or not b.in_kernel:
        raise error(f"{what} is only known inside `with T.Kernel(...)`")
    return b.launch


def install(builder: Builder | None):
    _state.builder = builder


def error(message: str, kind: type = CompileError) -> CompileError:
    """A CompileError (or ``kind``, a subclass) at the kernel line being built (outside a kernel:
    the user's calling line, e.g. an annotation Python evaluates when it runs the ``def``)."""
    b = getattr(_state, "builder", None)
    return kind(message, b.loc if b and b.loc else caller_location())


@dataclass(eq=False)
class ConstSymbol:
    """A size a ``@jit`` function names with ``T.const("M")``: fixed when the kernel is built, from
    ``compile(M=...)`` or from the tensor whose annotation first names it (``A: T.Tensor((M, K))``
    with ``A`` a tensor of shape (1024, 512) makes M 1024). Until then it has no value."""

    name: str
    dtype: object
    value: int | None = None

    def __repr__(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"


def unknown_size(symbol: ConstSymbol, what: str) -> CompileError:
    return error(f"{what}: {symbol.name} has no value yet. A size from T.const takes the value of the first tensor "
                 f"annotation that names it (A: T.Tensor(({symbol.name}, ...), ...)), or pass "
                 f"{symbol.name}=... to compile()")


# ---- argument checks: every T.* function says what is wrong with which argument ----------------

INT32_MAX = 2**31 - 1


def describe(value) -> str:
    """A value as a message names it (never an object's address)."""
    if isinstance(value, Point):
        return f"an element of {value.buffer.name}"
    if isinstance(value, ConstSymbol):
        return f"the size {value!r}"
    return ir.describe(value)


def number(value, what: str) -> ir.Expr:
    """``value`` as a numeric kernel value (a Python number or an IR expression)."""
    if isinstance(value, ConstSymbol):
        if value.value is None:
            raise unknown_size(value, what)
        value = value.value
    if isinstance(value, ir.Expr):
        if value.dtype.kind == "handle":
            raise error(f"{what} must be a number, not {describe(value)}")
        return value
    if isinstance(value, (bool, int, float, TypedValue)) or _is_numpy_number(value):
        return ir.as_expr(value)
    raise error(f"{what} must be a number, not {describe(value)}")


def integer(value, what: str) -> ir.Expr:
    """``value`` as an integer kernel value: a Python int or an integer IR expression."""
    e = number(value, what)
    if isinstance(value, bool) or e.dtype.is_float or e.dtype.kind == "bool":
        raise error(f"{what} must be an integer, not {describe(value)}")
    return e


def constant_int(value, what: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int known while the kernel is built, within ``[low, high]``."""
    n = ir.const_int(integer(value, what))
    if n is None:
        raise error(f"{what} must be a constant integer, not {describe(value)}")
    if low is not None and n < low or high is not None and n > high:
        bounds = (f"between {low} and {high}" if low is not None and high is not None
                  else f"at least {low}" if low is not None else f"at most {high}")
        raise error(f"{what} must be {bounds}, got {n}")
    return n


def stored_value(value, buffer: ir.Buffer, what: str) -> ir.Expr:
    """A number to store in ``buffer``; a constant must be representable in its dtype."""
    e = number(value, what)
    if isinstance(e, ir.Const) and not isinstance(e.value, bool):
        problem = constant_problem(e.value, buffer.dtype)
        if problem:
            raise error(f"{what}: {problem}")
    return e


def _is_numpy_number(value) -> bool:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return False
    return isinstance(value, np.generic) and (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_)


@dataclass(frozen=True, eq=False)
class TensorData:
    """``t.data`` of a global tensor: its memory, for ``T.Tensor(shape, dtype, t.data)`` to view."""

    buffer: ir.Buffer


@dataclass(frozen=True)
class Point:
    """``A[i, j]`` used where a region is expected: a tile origin, extents from the other side."""

    buffer: ir.Buffer
    indices: tuple


def select(cond, a, b) -> ir.Select:
    """``cond ? a : b`` (``T.if_then_else``, and a conditional expression on a kernel value), the two
    values in one type."""
    cond = number(cond, "T.if_then_else: the condition")
    a, b = number(a, "T.if_then_else: the first value"), number(b, "T.if_then_else: the second value")
    dtype = ir.result_dtype("+", a.dtype, b.dtype)
    return ir.Select(cond, ir.cast(a, dtype), ir.cast(b, dtype), dtype)
