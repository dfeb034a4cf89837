"""The IR's values: expressions, and the buffers, regions and barrier slots they refer to.

Expressions overload the arithmetic operators (``+ - * // % /`` and friends), so index
expressions in the front end and in passes read like the Python the user wrote. Comparisons
(``== != < <= > >=``) build the IR comparison too, as TVM's expressions do, so a plain Python helper
a kernel calls (``T.if_then_else(q_blk == k_blk, 1, 0)``) means what it says; as a Python truth
value (the compiler's own ``x in items``, tuple equality, dictionary keys) ``==`` and ``!=`` still
mean identity, and an ordering has none (:meth:`Expr.__bool__`). :func:`binop` folds constants and
refuses what no kernel may compute (bitwise operators on floats, division by a constant zero,
shifts past a value's width, pointer arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import dtypes
from ..dtypes import DType
from ..errors import CompileError, SourceLocation  # noqa: F401 (re-exported)

# --------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------


class Expr:
    """Base of all expression nodes."""

    dtype: DType

    def __add__(self, other):
        return binop("+", self, other)

    def __radd__(self, other):
        return binop("+", other, self)

    def __sub__(self, other):
        return binop("-", self, other)

    def __rsub__(self, other):
        return binop("-", other, self)

    def __mul__(self, other):
        return binop("*", self, other)

    def __rmul__(self, other):
        return binop("*", other, self)

    def __floordiv__(self, other):
        return binop("//", self, other)

    def __rfloordiv__(self, other):
        return binop("//", other, self)

    def __mod__(self, other):
        return binop("%", self, other)

    def __rmod__(self, other):
        return binop("%", other, self)

    def __truediv__(self, other):
        return binop("/", self, other)

    def __rtruediv__(self, other):
        return binop("/", other, self)

    def __and__(self, other):
        return binop("&", self, other)

    def __or__(self, other):
        return binop("|", self, other)

    def __xor__(self, other):
        return binop("^", self, other)

    def __lshift__(self, other):
        return binop("<<", self, other)

    def __rshift__(self, other):
        return binop(">>", self, other)

    def __rand__(self, other):
        return binop("&", other, self)

    def __ror__(self, other):
        return binop("|", other, self)

    def __rxor__(self, other):
        return binop("^", other, self)

    def __rlshift__(self, other):
        return binop("<<", other, self)

    def __rrshift__(self, other):
        return binop(">>", other, self)

    def __neg__(self):
        return binop("-", Const(0, self.dtype), self)

    def __invert__(self):
        if self.dtype.is_float:
            raise CompileError(f"`~` takes an integer, not {describe(self)}")
        return binop("^", self, -1)

    # Comparisons build IR (TVM's PrimExpr does the same, and TileLang's helpers rely on it); the
    # hash stays the object's, so nodes keep working as dictionary keys and set members.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return _python_comparison("==", self, other)

    def __ne__(self, other):
        return _python_comparison("!=", self, other)

    def __lt__(self, other):
        return _python_comparison("<", self, other)

    def __le__(self, other):
        return _python_comparison("<=", self, other)

    def __gt__(self, other):
        return _python_comparison(">", self, other)

    def __ge__(self, other):
        return _python_comparison(">=", self, other)

    def __bool__(self):
        identity = getattr(self, "_python_identity", None)
        if identity is not None:  # `a == b` / `a != b` written in Python: identity, as object equality
            return identity
        raise CompileError(
            f"the kernel value {self} has no Python truth value while the kernel is built (it is known only "
            "when the kernel runs); test it with an `if` statement or T.if_then_else inside the kernel"
        )

    def __str__(self) -> str:
        from .printer import expr_text

        return expr_text(self)


@dataclass(eq=False, repr=False)
class Var(Expr):
    name: str
    dtype: DType = dtypes.int32

    def __repr__(self) -> str:
        return f"Var({self.name})"


@dataclass(frozen=True, repr=False)
class Const(Expr):
    value: Any
    dtype: DType = dtypes.int32

    def __repr__(self) -> str:
        return f"Const({self.value})"


@dataclass(frozen=True, eq=False, repr=False)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType = dtypes.int32


@dataclass(frozen=True, eq=False, repr=False)
class Not(Expr):
    a: Expr
    dtype: DType = dtypes.boolean


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """A math function (``exp``, ``max`` ...) or an intrinsic of our CUDA headers."""

    name: str
    args: tuple
    dtype: DType = dtypes.int32


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    value: Expr
    dtype: DType = dtypes.float32


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType = dtypes.int32


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(Expr):
    """``buffer[indices]``; ``flat``: ``indices`` is one element offset in storage order (panels,
    strides and versions resolved), as the codegen phase leaves every access."""

    buffer: "Buffer"
    indices: tuple
    dtype: DType = dtypes.float32
    flat: bool = False


@dataclass(frozen=True, eq=False, repr=False)
class Raw(Expr):
    """A verbatim C++ expression (only created by lowering passes, never by the user)."""

    text: str
    dtype: DType = dtypes.int32


COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
LOGICAL = ("and", "or")


def const(value, dtype: DType | None = None) -> Const:
    if dtype is None:
        if isinstance(value, bool):
            dtype = dtypes.boolean
        elif isinstance(value, int):
            if not -(2**63) <= value < 2**64:
                raise CompileError(f"the integer {value} does not fit in 64 bits")
            dtype = (dtypes.int32 if -(2**31) <= value < 2**31 else dtypes.int64 if value < 2**63
                     else dtypes.uint64)
        elif isinstance(value, float):
            dtype = dtypes.float32
        else:
            raise CompileError(f"{describe(value)} cannot be used as a number in a kernel")
    return Const(value, dtype)


def as_expr(value) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float)):
        return const(value)
    if isinstance(value, dtypes.TypedValue):  # T.float32(x)
        if isinstance(value.value, (bool, int, float)):
            v = value.value
            return Const(float(v) if value.dtype.is_float else int(v), value.dtype)
        return cast(as_expr(value.value), value.dtype)
    try:  # numpy scalars
        import numpy as np

        if isinstance(value, np.generic) and (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
            return const(value.item())
    except ImportError:  # pragma: no cover
        pass
    raise CompileError(f"{describe(value)} cannot be used as a number in a kernel")


def describe(value) -> str:
    """A value as an error message names it (never an object's address)."""
    if isinstance(value, DType):  # a str too (dtypes.DType)
        return f"the dtype {value.name}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if value is None:
        return "None"
    if isinstance(value, bool):
        return f"the bool {value}"
    if isinstance(value, (int, float)):
        return f"the {type(value).__name__} {value!r}"
    if isinstance(value, Buffer):
        kind = "barrier" if value.scope == "barrier" else f"{value.scope} buffer"
        return f"the {kind} {value.name}"
    if isinstance(value, Region):
        return f"a slice of {value.buffer.name}"
    if isinstance(value, BarrierRef):
        return f"the barrier slot {value.buffer.name}[{value.index}]"
    if isinstance(value, Expr):
        return f"a {value.dtype.name} kernel value ({value})"
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    name = getattr(value, "__name__", None)
    return f"the {type(value).__name__} {name}" if isinstance(name, str) else f"a {type(value).__name__}"


def result_dtype(op: str, a: DType, b: DType) -> DType:
    if op in COMPARISONS or op in LOGICAL:
        return dtypes.boolean
    if op == "/" and not (a.is_float or b.is_float):
        return dtypes.float32
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.kind == "bool" and b.kind == "bool":
        return dtypes.int32 if op not in ("&", "|", "^") else dtypes.boolean
    wide = a if a.bits >= b.bits else b
    return wide if wide.bits >= 32 else dtypes.int32


_FOLD = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "//": lambda x, y: x // y,
    "%": lambda x, y: x % y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
    "==": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    "min": min,
    "max": max,
}


BITWISE = ("&", "|", "^", "<<", ">>")
_OP_WORDS = {"&": "&", "|": "|", "^": "^", "<<": "<<", ">>": ">>", "//": "//", "%": "%", "/": "/"}


def _check_operands(op: str, a: Expr, b: Expr):
    """What no kernel may compute, whoever builds it: bitwise operations on floats, a division or
    modulo by a constant zero, a shift by a constant outside the value's width."""
    if op in BITWISE and (a.dtype.is_float or b.dtype.is_float):
        which = a if a.dtype.is_float else b
        raise CompileError(f"`{op}` takes integers, but {which} is {which.dtype.name}")
    if op in ("//", "%", "/") and isinstance(b, Const) and not isinstance(b.value, bool) and b.value == 0:
        raise CompileError(f"division by zero: `{a} {op} 0`")
    if op in ("<<", ">>") and isinstance(b, Const) and isinstance(b.value, int):
        width = max(a.dtype.bits, 32)
        if not 0 <= b.value < width:
            raise CompileError(f"shift by {b.value}: a {width}-bit value shifts by 0 to {width - 1} bits")


def binop(op: str, a, b) -> Expr:
    """Build ``a op b``, folding constants and the trivial identities (x+0, x*1, x*0)."""
    a, b = as_expr(a), as_expr(b)
    if a.dtype.kind == "handle" or b.dtype.kind == "handle":
        raise CompileError(f"a pointer cannot take part in `{op}`; T.make_tensor turns it into a tensor")
    _check_operands(op, a, b)
    dtype = result_dtype(op, a.dtype, b.dtype)
    if isinstance(a, Const) and isinstance(b, Const) and op in _FOLD and not dtype.is_float:
        if not (op in ("//", "%") and b.value == 0):
            return Const(_FOLD[op](a.value, b.value), dtype)
    if isinstance(b, Const) and not dtype.is_float and op in ("+", "-") and b.value == 0:
        return a
    if isinstance(a, Const) and not dtype.is_float and op == "+" and a.value == 0:
        return b
    if op == "*" and not dtype.is_float:
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const) and x.value == 1:
                return y
            if isinstance(x, Const) and x.value == 0:
                return Const(0, dtype)
    if op in ("//",) and isinstance(b, Const) and b.value == 1:
        return a
    if op == "%" and isinstance(b, Const) and b.value == 1:
        return Const(0, dtype)
    return BinOp(op, a, b, dtype)


def cmp(op: str, a, b) -> Expr:
    assert op in COMPARISONS
    return binop(op, a, b)


def _python_comparison(op: str, a, b):
    """``a op b`` written in Python with a kernel value on one side: the IR comparison, or
    ``NotImplemented`` where the other side is no number (a string, a buffer, None: Python then
    compares identities, as before comparisons built IR). An ``==`` or ``!=`` node remembers
    whether its sides are one object, its truth value where Python asks for one (``x in items``)."""
    if not isinstance(b, (Expr, bool, int, float, dtypes.TypedValue)):
        return NotImplemented
    try:
        node = cmp(op, a, b)
    except CompileError:  # a pointer, or operands no comparison takes
        return NotImplemented
    if op in ("==", "!=") and isinstance(node, BinOp):
        object.__setattr__(node, "_python_identity", (a is b) == (op == "=="))
    return node


def logical_and(*conds) -> Expr | None:
    """Conjunction of the non-None conditions (None when there are none)."""
    out = None
    for c in conds:
        if c is None:
            continue
        out = c if out is None else binop("and", out, c)
    return out


def conjuncts(cond: Expr) -> list:
    """The conditions an ``and`` chain joins (``[cond]`` for any other condition)."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def within(indices, shape) -> Expr | None:
    """``i < n`` for each index and the extent of its dimension: the indices inside a buffer of
    ``shape`` (at its upper ends; an index is never negative); None for no indices."""
    return logical_and(*[cmp("<", i, n) for i, n in zip(indices, shape)])


def zero(dtype: DType) -> Expr:
    """0 of ``dtype`` (what an element outside a tensor reads as)."""
    return cast(const(0.0 if dtype.is_float else 0), dtype)


def cast(value, dtype: DType) -> Expr:
    value = as_expr(value)
    if value.dtype == dtype:
        return value
    if isinstance(value, Const) and not dtype.is_float and not value.dtype.is_float:
        return Const(value.value, dtype)
    if isinstance(value, Const) and dtype.is_float and dtype.name in ("float32", "float64"):
        return Const(float(value.value), dtype)
    return Cast(value, dtype)


def const_int(value) -> int | None:
    """The Python int of a constant expression, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, Const) and isinstance(value.value, int):
        return value.value
    return None


# --------------------------------------------------------------------------------------------
# Buffers and regions
# --------------------------------------------------------------------------------------------

SCOPES = ("global", "shared", "fragment", "local", "barrier")


@dataclass(eq=False, repr=False)
class Buffer:
    """A named array in one memory scope.

    ``strides`` are in elements (None: row-major contiguous). ``data`` is the pointer expression
    of a tensor made inside the kernel with ``T.make_tensor``. ``attrs`` collects what passes
    learn: ``versions`` (pipeline copies), ``swizzle``, ``layout`` (fragments), ``offset``
    (shared memory), ``barrier_counts``.
    """

    name: str
    shape: tuple
    dtype: DType
    scope: str
    strides: tuple | None = None
    data: Expr | None = None
    attrs: dict = field(default_factory=dict)
    loc: SourceLocation | None = None

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.scope})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def packed_in_memory(self) -> bool:
        """Two values a byte here: a packed FP4 tensor or shared tile (a fragment or local array holds
        one FP4 code a byte), whose single elements no thread writes (half a byte: a race)."""
        return self.dtype.packed and self.scope in ("global", "shared")

    def static_shape(self) -> tuple[int, ...] | None:
        dims = tuple(const_int(s) for s in self.shape)
        return None if any(d is None for d in dims) else dims

    @property
    def numel(self) -> int:
        n = 1
        for d in self.static_shape() or ():
            n *= d
        return n

    def row_major_strides(self) -> tuple:
        strides, acc = [], as_expr(1)
        for dim in reversed(self.shape):
            strides.append(acc)
            acc = acc * dim
        return tuple(reversed(strides))

    def effective_strides(self) -> tuple:
        if self.strides is not None:
            return tuple(as_expr(s) for s in self.strides)
        return self.row_major_strides()

    def versioned(self, stages: int) -> "Buffer":
        """This shared tile with a leading dimension of ``stages`` pipeline versions."""
        return Buffer(self.name, (const(stages),) + tuple(self.shape), self.dtype, self.scope,
                      attrs={**self.attrs, "versions": stages}, loc=self.loc)


@dataclass(frozen=True, eq=False, repr=False)
class Region:
    """A rectangular part of a buffer: per-dimension start and extent."""

    buffer: Buffer
    starts: tuple
    extents: tuple

    def static_extents(self) -> tuple[int, ...] | None:
        dims = tuple(const_int(e) for e in self.extents)
        return None if any(d is None for d in dims) else dims

    @property
    def numel(self) -> int:
        n = 1
        for e in self.static_extents() or ():
            n *= e
        return n

    @staticmethod
    def full(buffer: Buffer) -> "Region":
        return Region(buffer, tuple(const(0) for _ in buffer.shape), tuple(buffer.shape))

    def column_block(self) -> tuple[int, int] | None:
        """(first, count) of the columns this region takes where it is whole along every other
        dimension and its last dimension's bounds are constants (``Q_shared[:, :512]``); else None."""
        buf = self.buffer
        for d in range(buf.ndim - 1):
            if const_int(self.starts[d]) != 0 or const_int(self.extents[d]) != const_int(buf.shape[d]):
                return None
        first, count = const_int(self.starts[-1]), const_int(self.extents[-1])
        return None if first is None or count is None else (first, count)

    def non_unit_dims(self) -> list[int]:
        """The dimensions whose extent is not the constant 1, in order."""
        return [d for d, e in enumerate(self.extents) if const_int(e) != 1]

    def paired_dims(self, other: "Region") -> dict:
        """Dimension of this region -> the dimension of ``other`` its elements run along: the two
        regions' non-unit dimensions, paired in order (a copy or tile atomic between a ``(1, n)``
        slice and an ``(n,)`` tile moves element ``j`` to element ``j``)."""
        return dict(zip(self.non_unit_dims(), other.non_unit_dims()))

    @property
    def is_full(self) -> bool:
        """The region covers its whole buffer (constant starts 0, extents the buffer's shape)."""
        return all(const_int(s) == 0 and const_int(e) is not None and const_int(e) == const_int(d)
                   for s, e, d in zip(self.starts, self.extents, self.buffer.shape))

    def in_version(self, versioned: Buffer, slot: Expr) -> "Region":
        """The same region in pipeline version ``slot`` of ``versioned`` (``Buffer.versioned``)."""
        return Region(versioned, (slot,) + tuple(self.starts), (const(1),) + tuple(self.extents))


@dataclass(frozen=True, eq=False, repr=False)
class BarrierRef:
    """One slot of a barrier array: ``mbar[i]``."""

    buffer: Buffer
    index: Expr


