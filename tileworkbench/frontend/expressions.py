"""The front end's expressions: they are *evaluated*. Python values (sizes, dtypes, ``T``) stay
Python values, kernel names give IR ``Var``s and ``Buffer``s, operators on IR values build IR
expressions, and calls of ``T.*`` functions run (emitting statements through the builder).

:class:`Expressions` is the part of the parser (``parser.Parser``) that visits expressions.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import os
import traceback

from .. import dtypes as _dt
from ..errors import CompileError, NoDeviceError
from ..ir import nodes as ir
from . import builder as _b
from .regions import subscript_buffer
from .specs import MacroSpec

BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.Pow: operator.pow,
}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_PY_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}


def _is_ir(value) -> bool:
    return isinstance(value, ir.Expr)


def _raised_in_package(exc: BaseException) -> bool:
    """``exc`` came from tileworkbench's own code, not from a user's helper or a Python builtin
    the kernel called (its traceback starts at the front end's call; a builtin adds no frame)."""
    if isinstance(exc, NoDeviceError):  # raised for the user on purpose (no device to ask)
        return False
    frames = traceback.extract_tb(exc.__traceback__)[1:]
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(package + os.sep)


class Expressions:
    """Needs the parser's ``lookup``, ``error``, ``visit`` and ``builder``."""

    def eval(self, node):
        return self.visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, int) and not isinstance(node.value, bool) and not -(2**63) <= node.value < 2**64:
            raise self.error(node, f"the integer literal {node.value} does not fit in 64 bits")
        return node.value

    def visit_Name(self, node):
        value = self.lookup(node, node.id)
        if isinstance(value, ir.Buffer) and value in self.builder.var_buffers:
            # TileLang's kernel variable reads as its value (`while x != 1`, `x + 1`); `x[0]` still
            # indexes it (``indexed``)
            return ir.BufferLoad(value, (ir.const(0),), value.dtype)
        return value

    def indexed(self, node):
        """What ``node[...]`` indexes: a kernel variable's buffer itself, not its value."""
        if isinstance(node, ast.Name):
            return self.lookup(node, node.id)
        return self.eval(node)

    def visit_Attribute(self, node):
        base = self.eval(node.value)
        if node.attr == "astype" and isinstance(base, ir.Expr):  # TileLang's x.astype(dtype): a cast
            return lambda dtype: ir.cast(base, _dt.as_dtype(dtype))
        if node.attr == "data" and isinstance(base, ir.Buffer) and base.scope == "global" and base.data is None:
            return _b.TensorData(base)  # a kernel parameter's memory, for T.Tensor(shape, dtype, t.data)
        try:
            return getattr(base, node.attr)
        except CompileError:  # T.<a TileLang name we lack>: its own words say why (an AttributeError too)
            raise
        except AttributeError:
            owner = getattr(base, "__name__", type(base).__name__)
            raise self.error(node, f"{owner} has no attribute {node.attr!r}") from None

    def visit_Tuple(self, node):
        return tuple(self.eval(e) for e in node.elts)

    def visit_List(self, node):
        return [self.eval(e) for e in node.elts]

    def visit_Dict(self, node):
        if any(k is None for k in node.keys):
            raise self.error(node, "dict unpacking (**) is not supported in kernels")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}

    def visit_Slice(self, node):
        def part(p):
            return None if p is None else self.eval(p)

        return slice(part(node.lower), part(node.upper), part(node.step))

    def visit_Subscript(self, node):
        base = self.indexed(node.value)
        key = self.eval(node.slice)
        if isinstance(base, ir.Buffer):
            return subscript_buffer(base, key)
        kernel_key = _is_ir(key) or isinstance(key, tuple) and any(_is_ir(k) for k in key)
        if kernel_key and not getattr(base, "takes_kernel_sizes", False):  # T.Tensor[(M, N), dtype] does
            raise self.error(node, f"{ir.describe(base)} is indexed while the kernel is built, so its index must "
                                   "be a Python value, not a kernel value")
        try:
            return base[key]
        except (IndexError, KeyError, TypeError) as exc:
            raise self.error(node, f"cannot index {ir.describe(base)} with {ir.describe(key)}: {exc}") from None

    @staticmethod
    def kernel_extremum(name: str, args: list):
        """Python's ``max``/``min`` over values one of which the kernel knows only when it runs
        (``max(0, seq_len - kv_stride + 1)`` with ``seq_len`` a ``T.dynamic`` size, as TileLang's
        sparse MLA sizes its grid): ``T.max``/``T.min`` of them, as TileLang reads it. None when
        every value is known now (Python's own answer then)."""
        values = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
        if len(values) < 2 or not any(isinstance(v, ir.Expr) for v in values):
            return None
        out = _b.number(values[0], f"{name}(): an argument")
        for v in values[1:]:
            out = ir.binop(name, out, _b.number(v, f"{name}(): an argument"))
        return out

    def visit_Call(self, node):
        fn = self.eval(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.eval(a.value))
            else:
                args.append(self.eval(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                kwargs.update(self.eval(k.value))
            else:
                kwargs[k.arg] = self.eval(k.value)
        if isinstance(fn, MacroSpec):
            return self.expand_macro(node, fn, args, kwargs)
        if not callable(fn) or isinstance(fn, (ir.Buffer, ir.Expr)):
            raise self.error(node, f"{ast.unparse(node.func)} is not callable")
        if fn is print:
            # Python's print runs while the kernel is built, once, as in TileLang (its builder runs
            # the function's Python: DeepSeek's NSA backward prints its sizes so). A kernel value is
            # known only when the kernel runs: T.print prints it, on the GPU.
            if any(isinstance(a, (ir.Expr, ir.Buffer)) for a in (*args, *kwargs.values())):
                raise self.error(node, "print() would run while the kernel is built, not when it runs, and a kernel "
                                       "value has no value then; T.print prints it from the GPU")
            print(*args, **kwargs)
            return None
        if fn in (builtins.max, builtins.min) and not kwargs:
            folded = self.kernel_extremum(fn.__name__, args)
            if folded is not None:
                return folded
        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, f"wrong arguments to {ast.unparse(node.func)}: {exc}") from None
        except ValueError:
            pass  # builtins without a signature
        try:
            result = fn(*args, **kwargs)
            # T.float32(x) in a kernel is a kernel value of that type (a constant or a cast)
            return ir.as_expr(result) if isinstance(result, _dt.TypedValue) else result
        except CompileError:
            raise
        except RecursionError:
            raise
        except Exception as exc:
            if _raised_in_package(exc):
                raise
            # The user's own helper (or a Python builtin on the wrong values) failed while the
            # kernel was built: the user's error, at this call.
            raise self.error(node, f"{ast.unparse(node.func)}(...) raised {type(exc).__name__}: {exc}") from exc

    def visit_BinOp(self, node):
        a, b = self.eval(node.left), self.eval(node.right)
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"unsupported operator {type(node.op).__name__}")
        return self.arith(node, op, a, b)

    def arith(self, node, op, a, b):
        """``a op b``: Python's own arithmetic between Python values, an IR expression otherwise."""
        symbol = ast.unparse(ast.BinOp(ast.Constant(1), node.op, ast.Constant(1)))[2:-2]
        for v in (a, b):
            if isinstance(v, (ir.Buffer, ir.Region, ir.BarrierRef, _b.Point)):
                raise self.error(node, f"{_b.describe(v)} cannot be used as a number in a kernel"
                                       + (f" (index it: {v.name}[i])" if isinstance(v, ir.Buffer) else ""))
        if _is_ir(a) or _is_ir(b):
            if op is operator.pow:
                raise self.error(node, "** is only supported between Python numbers")
            for v in (a, b):
                if not _is_ir(v):
                    _b.number(v, f"the other operand of `{symbol}`")
            return op(a, b)
        for v in (a, b):  # a T.const size no tensor annotation or compile() value has given a number yet
            if isinstance(v, _b.ConstSymbol) and v.value is None:
                raise self.error(node, _b.unknown_size(v, f"`{ast.unparse(node)}`").message)
        try:
            return op(a, b)
        except ZeroDivisionError:
            raise self.error(node, f"division by zero: `{ast.unparse(node)}`") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise self.error(node, f"cannot compute `{ast.unparse(node)}` with {ir.describe(a)} and "
                                   f"{ir.describe(b)}: {exc}") from None

    def visit_UnaryOp(self, node):
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return ir.Not(v) if _is_ir(v) else not v
        if isinstance(node.op, (ast.USub, ast.UAdd)) and not _is_ir(v):
            _b.number(v, f"the operand of `{ast.unparse(node)[0]}`")
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            if isinstance(v, float):
                raise self.error(node, f"`~` takes an integer, not {ir.describe(v)}")
            return ~v  # a kernel value's is ir.Expr.__invert__
        raise self.error(node, "unsupported unary operator")

    def visit_Compare(self, node):
        left = self.eval(node.left)
        result = None
        for op_node, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node)
            op = _CMPOPS.get(type(op_node))
            if op is None:
                if _is_ir(left) or _is_ir(right):
                    raise self.error(node, f"unsupported comparison {type(op_node).__name__}")
                part = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
                        ast.NotIn: lambda a, b: a not in b}[type(op_node)](left, right)
            elif _is_ir(left) or _is_ir(right):
                part = ir.cmp(op, left, right)
            else:
                part = _PY_CMP[op](left, right)
            result = part if result is None else self._and(result, part)
            left = right
        return result

    def _and(self, a, b):
        if not _is_ir(a) and not _is_ir(b):
            return a and b
        if not _is_ir(a):
            return b if a else False
        if not _is_ir(b):
            return a if b else False
        return ir.binop("and", a, b)

    def visit_BoolOp(self, node):
        values = [self.eval(v) for v in node.values]
        is_and = isinstance(node.op, ast.And)
        out = values[0]
        for v in values[1:]:
            if not _is_ir(out) and not _is_ir(v):
                out = (out and v) if is_and else (out or v)
            elif is_and:
                out = self._and(out, v)
            else:
                out = ir.binop("or", ir.as_expr(out), ir.as_expr(v))
        return out

    def visit_IfExp(self, node):
        cond = self.eval(node.test)
        if not _is_ir(cond):
            return self.eval(node.body) if cond else self.eval(node.orelse)
        return _b.select(cond, self.eval(node.body), self.eval(node.orelse))
