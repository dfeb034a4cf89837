"""Python AST of a ``@T.prim_func`` -> IR.

One ``ast.NodeVisitor`` walks the function body. Expressions are *evaluated*: names from the
closure and globals give Python values (sizes, dtypes, ``T``), kernel names give IR Vars and
Buffers, and operators on IR values build IR expressions, so ``A[by * block_M, k * block_K]``
becomes a tile origin with the sizes folded in. Calls of ``T.*`` functions emit statements
through the builder. Anything the visitor does not handle is a ``CompileError`` naming the
construct and the kernel line; internal failures are wrapped once, here, with that line.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import operator
import os
import sys
import textwrap
import traceback

from .. import dtypes as _dt
from ..errors import DEBUG_ENV, TOO_DEEP, CompileError, InternalCompilerError, SourceLocation, caller_location
from ..ir import nodes as ir
from . import builder as _b
from .regions import subscript_buffer
from .specs import LoopSpec, TensorSpec, serial_loop

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.Pow: operator.pow,
}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_PY_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne}

# Python frames the compiler may use while it works: the front end, the passes and the printer
# recurse over expressions, a few frames a level, so a sum of a few hundred terms needs more than
# Python's default of 1000 (`deep_recursion`). Past this, the kernel is too deep to compile.
RECURSION_LIMIT = 8000

# Constructs Python has that kernels do not, with what to write instead.
_UNSUPPORTED = {
    "While": "`while` loops are not supported in kernels; use `for i in T.serial(n)`",
    "Break": "`break` is not supported: kernel loops run all their iterations (guard the body with an `if`)",
    "Continue": "`continue` is not supported: kernel loops run all their iterations (guard the body with an `if`)",
    "Return": "a kernel returns nothing: write its results into a tensor parameter",
    "Try": "`try` is not supported in kernels",
    "Raise": "`raise` is not supported in kernels",
    "Assert": "`assert` is not supported in kernels (check sizes in Python before defining the kernel)",
    "Lambda": "lambdas are not supported in kernels; define a Python helper outside the kernel",
    "ListComp": "list comprehensions are not supported in kernels; build lists in Python outside the kernel",
    "SetComp": "set comprehensions are not supported in kernels",
    "DictComp": "dict comprehensions are not supported in kernels",
    "GeneratorExp": "generator expressions are not supported in kernels",
    "FunctionDef": "functions cannot be defined inside a kernel; define the helper outside it (a Python helper "
                   "that calls T.* functions is run while the kernel is built)",
    "AsyncFunctionDef": "functions cannot be defined inside a kernel",
    "ClassDef": "classes cannot be defined inside a kernel",
    "Global": "`global` is not supported in kernels",
    "Nonlocal": "`nonlocal` is not supported in kernels",
    "Import": "imports are not supported inside kernels; import at the top of the module",
    "ImportFrom": "imports are not supported inside kernels; import at the top of the module",
    "Delete": "`del` is not supported in kernels",
    "Yield": "`yield` is not supported in kernels",
    "YieldFrom": "`yield` is not supported in kernels",
    "Await": "`await` is not supported in kernels",
    "AsyncFor": "`async for` is not supported in kernels",
    "AsyncWith": "`async with` is not supported in kernels",
    "NamedExpr": "the walrus operator `:=` is not supported in kernels; assign on a line of its own",
    "Starred": "`*` unpacking is only supported in call arguments",
    "JoinedStr": "f-strings are not supported in kernels",
    "Set": "set literals are not supported in kernels",
    "Match": "`match` is not supported in kernels",
    "TypeAlias": "`type` aliases are not supported in kernels",
}


@contextlib.contextmanager
def deep_recursion():
    """Raise Python's recursion limit to ``RECURSION_LIMIT`` while the compiler runs (never lowers it)."""
    previous = sys.getrecursionlimit()
    if previous < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        yield
    finally:
        if previous < RECURSION_LIMIT:
            sys.setrecursionlimit(previous)


def _raised_in_package(exc: BaseException) -> bool:
    """``exc`` came from tileworkbench's own code, not from a user's helper or a Python builtin
    the kernel called (its traceback starts at the front end's call; a builtin adds no frame)."""
    frames = traceback.extract_tb(exc.__traceback__)[1:]
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(package + os.sep)


def _is_ir(value) -> bool:
    return isinstance(value, ir.Expr)


class _Scope:
    def __init__(self, names: dict, parent: "_Scope | None"):
        self.names, self.parent = names, parent

    def lookup(self, name):
        scope = self
        while scope is not None:
            if name in scope.names:
                return True, scope.names[name]
            scope = scope.parent
        return False, None


class Parser(ast.NodeVisitor):
    def __init__(self, fn, source_lines, file, first_line, closure):
        self.fn = fn
        self.lines = source_lines
        self.file = file
        self.first_line = first_line
        self.globals = dict(fn.__globals__)
        self.globals.update(closure)
        self.scope = _Scope({}, None)
        self.builder = _b.Builder()
        self.params: list = []
        self.kernel_seen = False
        self.mutable_vars: set = set()

    # ---- locations and errors ----------------------------------------------------------------
    def loc(self, node) -> SourceLocation:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return SourceLocation(self.file, self.first_line + line - 1, getattr(node, "col_offset", 0), text)

    def error(self, node, message) -> CompileError:
        return CompileError(message, self.loc(node))

    def visit(self, node):
        previous = self.builder.loc
        if isinstance(node, (ast.stmt, ast.expr)):
            self.builder.loc = self.loc(node)
        try:
            return super().visit(node)
        except CompileError as err:
            raise err.with_location(self.loc(node)) from err.__cause__
        except RecursionError:
            raise self.error(node, TOO_DEEP) from None
        except Exception as exc:  # an internal failure: pin it to the user's line once
            if os.environ.get(DEBUG_ENV):
                raise
            raise InternalCompilerError(f"the front end failed with {type(exc).__name__}: {exc}",
                                        self.loc(node)) from exc
        finally:
            if isinstance(node, ast.stmt):
                self.builder.loc = previous

    def generic_visit(self, node):
        name = type(node).__name__
        raise self.error(node, _UNSUPPORTED.get(name, f"unsupported construct in a kernel: {name}"))

    # ---- names ---------------------------------------------------------------------------------
    def bind(self, name, value):
        self.scope.names[name] = value

    def lookup(self, node, name):
        found, value = self.scope.lookup(name)
        if found:
            return value
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"unknown name {name!r}")

    # ---- function --------------------------------------------------------------------------------
    def check_signature(self, fdef):
        if isinstance(fdef, ast.AsyncFunctionDef):
            raise self.error(fdef, "a kernel cannot be an `async def`")
        args = fdef.args
        if args.vararg is not None or args.kwarg is not None:
            extra = args.vararg or args.kwarg
            raise self.error(extra, f"a kernel takes named parameters only, not *{extra.arg} or **{extra.arg}: "
                                    "each tensor needs a T.Tensor(...) annotation of its own")
        if args.kwonlyargs:
            raise self.error(args.kwonlyargs[0], "a kernel takes no keyword-only parameters")
        if args.defaults:
            raise self.error(args.defaults[0], "kernel parameters take no default values (the caller passes "
                                               "every tensor)")

    def parse_function(self, fdef: ast.FunctionDef) -> ir.PrimFunc:
        self.check_signature(fdef)
        annotations = getattr(self.fn, "__annotations__", {})
        for arg in fdef.args.posonlyargs + fdef.args.args:
            if arg.annotation is None:
                raise self.error(arg, f"parameter {arg.arg!r} needs a T.Tensor(...) annotation")
            self.builder.loc = self.loc(arg)
            # Python already evaluated the annotation in the defining scope; prefer its value, but
            # under `from __future__ import annotations` it is the text: evaluate it here.
            spec = annotations.get(arg.arg)
            if arg.arg not in annotations or isinstance(spec, str):
                spec = self.eval(arg.annotation)
            if isinstance(spec, TensorSpec):
                shape = tuple(ir.as_expr(s) for s in spec.shape)
                strides = None if spec.strides is None else tuple(ir.as_expr(s) for s in spec.strides)
                value = ir.Buffer(arg.arg, shape, spec.dtype, "global", strides=strides, loc=self.loc(arg))
            elif isinstance(spec, _dt.DType):
                value = ir.Var(arg.arg, spec)
            else:
                raise self.error(arg, f"parameter {arg.arg!r}: annotation must be T.Tensor, "
                                      f"T.StridedTensor or a dtype, not {ir.describe(spec)}")
            self.params.append(value)
            self.bind(arg.arg, value)
        self.builder.push()
        self.visit_body(fdef.body)
        body = self.builder.pop()
        if self.builder.launch is None:
            raise self.error(fdef, "the kernel body must contain `with T.Kernel(...)`")
        return ir.PrimFunc(fdef.name, self.params, body, self.builder.launch,
                           source_file=self.file, source_line=self.first_line + fdef.lineno - 1)

    def visit_body(self, stmts):
        for stmt in stmts:
            self.visit(stmt)

    # ---- statements ------------------------------------------------------------------------------
    def visit_With(self, node):
        if len(node.items) != 1:
            raise self.error(node, "only `with T.Kernel(...) as ...:` is supported")
        item = node.items[0]
        # Look at what is called before calling it: `with open(...)` must not run.
        if not isinstance(item.context_expr, ast.Call) or \
                not getattr(self.eval(item.context_expr.func), "opens_kernel_scope", False):
            raise self.error(node, "only `with T.Kernel(...) as ...:` is supported")
        spec = self.eval(item.context_expr)
        if self.kernel_seen:
            raise self.error(node, "a kernel has exactly one `with T.Kernel(...)` block")
        self.kernel_seen = True
        names = self._target_names(item.optional_vars) if item.optional_vars is not None else []
        if len(names) > len(spec.grid):
            raise self.error(node, f"T.Kernel has {len(spec.grid)} grid dimension(s) but "
                                   f"{len(names)} names are bound")
        block_vars = tuple(ir.Var(names[i] if i < len(names) else f"b{'xyz'[i]}") for i in range(len(spec.grid)))
        for v in block_vars:
            self.bind(v.name, v)
        self.builder.launch = ir.Launch(spec.grid, spec.threads, block_vars, ir.Var("tx"))
        self.builder.in_kernel = True
        try:
            self.visit_body(node.body)
        finally:
            self.builder.in_kernel = False

    def _target_names(self, target) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
            return [e.id for e in target.elts]
        raise self.error(target, "loop and kernel targets must be names or tuples of names")

    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or comment string
        value = self.eval(node.value)
        if _is_ir(value):
            raise self.error(node, "this expression has no effect (did you mean to store it?)")

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            self._store(target, self.eval(node.value))
            return
        value = self.eval(node.value)
        self._assign(target, value, node)

    def visit_AnnAssign(self, node):
        if node.value is None:
            raise self.error(node, "a declaration needs a value")
        value = self.eval(node.value)
        dtype = self.eval(node.annotation)
        if not isinstance(dtype, _dt.DType):
            raise self.error(node.annotation, f"a variable's annotation must be a dtype such as T.int32, "
                                              f"not {ir.describe(dtype)}")
        value = ir.cast(_b.number(value, f"the value of {ast.unparse(node.target)}"), dtype)
        self._assign(node.target, value, node)

    def _assign(self, target, value, node):
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise self.error(node, "cannot unpack this value into the names on the left")
            for t, v in zip(target.elts, value):
                self._assign(t, v, node)
            return
        if not isinstance(target, ast.Name):
            raise self.error(target, "unsupported assignment target")
        name = target.id
        if isinstance(value, ir.Buffer):
            if value.name in ("buf", "mbar", "tensor"):
                value.name = self.builder.fresh_name(name)
            self.bind(name, value)
        elif _is_ir(value):
            found, old = self.scope.lookup(name)
            if found and isinstance(old, ir.Var) and old in self.mutable_vars:
                self.builder.emit(ir.Assign(old, ir.cast(value, old.dtype)))
                return
            var = ir.Var(self.builder.fresh_name(name), value.dtype)
            self.mutable_vars.add(var)
            self.builder.emit(ir.LetStmt(var, value))
            self.bind(name, var)
        else:
            self._refuse_python_counter(name, value, target)
            self.bind(name, value)

    def _refuse_python_counter(self, name, value, target):
        """A name holding a Python number from outside a kernel loop, re-assigned inside it: the
        loop body is built once, so the name would not change from one iteration to the next
        (``x = 0`` ... ``for i in T.serial(n): x = x + 1``). Say so instead of building it."""
        if not self.builder.loop_vars or name in self.scope.names or not isinstance(value, (int, float)):
            return
        found, old = self.scope.lookup(name)
        if found and isinstance(old, (int, float)) and not isinstance(old, bool):
            kind = "T.int32" if isinstance(old, int) else "T.float32"
            raise self.error(target, f"'{name}' holds the Python value {old!r}, fixed while the kernel is built: "
                                     f"assigning it inside a kernel loop would not change it from one iteration "
                                     f"to the next. Make it a kernel variable before the loop, e.g. "
                                     f"{name} = {kind}({old!r})")

    def visit_AugAssign(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"unsupported operator {type(node.op).__name__}")
        current = self.eval(node.target)
        value = self.arith(node, op, current, self.eval(node.value))
        if isinstance(node.target, ast.Subscript):
            self._store(node.target, value)
        else:
            self._assign(node.target, value, node)

    def _store(self, target: ast.Subscript, value):
        buf = self.eval(target.value)
        if not isinstance(buf, ir.Buffer):
            raise self.error(target, f"only kernel buffers can be assigned to by index, not {ir.describe(buf)}")
        if buf.scope == "barrier":
            raise self.error(target, f"{buf.name} is a barrier: it is set up by the compiler and changed only by "
                                     "T.barrier_arrive, T.barrier_wait and TMA copies")
        key = self.eval(target.slice)
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != buf.ndim:
            raise self.error(target, f"{buf.name} has {buf.ndim} dimension(s), indexed with {len(key)}")
        if any(isinstance(k, slice) for k in key):
            raise self.error(target, "assigning to a slice is not supported; use T.fill or T.copy")
        element = subscript_buffer(buf, key)  # the indices' checks, as for a load
        value = ir.cast(_b.stored_value(value, buf, f"the value stored in {buf.name}"), buf.dtype)
        self.builder.emit(ir.BufferStore(buf, element.indices, value))

    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, "for-else is not supported in kernels")
        spec = self._loop_spec(node.iter)
        names = self._target_names(node.target)
        if len(names) != len(spec.extents):
            raise self.error(node, f"this loop has {len(spec.extents)} dimension(s) but "
                                   f"{len(names)} loop variable(s)")
        loop_vars = [ir.Var(self.builder.fresh_name(n)) for n in names]
        outer = self.scope
        self.scope = _Scope({n: v for n, v in zip(names, loop_vars)}, outer)
        self.builder.push()
        self.builder.loop_vars.extend(loop_vars)
        try:
            self.visit_body(node.body)
        finally:
            del self.builder.loop_vars[-len(loop_vars):]
            self.scope = outer
        body = self.builder.pop()
        for var, start, extent in reversed(list(zip(loop_vars, spec.starts, spec.extents))):
            body = ir.For(var, extent, body, spec.kind, start, dict(spec.annotations), loc=self.loc(node))
        self.builder.emit(body)

    def _loop_spec(self, it) -> LoopSpec:
        if isinstance(it, ast.Call):
            fn = self.eval(it.func)
            if fn is range:
                args = [self.eval(a) for a in it.args]
                if len(args) == 3 and args[2] != 1:
                    raise self.error(it, "range() with a step is not supported; use T.serial")
                return serial_loop(args[:2])
        value = self.eval(it)
        if not isinstance(value, LoopSpec):
            raise self.error(it, "kernel loops iterate over T.serial, T.Parallel, T.Pipelined, "
                                 "T.unroll or range(...)")
        return value

    def visit_If(self, node):
        cond = self.eval(node.test)
        if isinstance(cond, (ir.Buffer, ir.Region, ir.BarrierRef, _b.Point)):
            raise self.error(node.test, f"{ir.describe(cond)} is not a condition; compare its elements instead")
        if not _is_ir(cond):  # decided while parsing: keep only the branch taken
            self.visit_body(node.body if cond else node.orelse)
            return
        if not self.builder.in_kernel:
            raise self.error(node, "an `if` on a kernel value must be inside `with T.Kernel(...)`")
        self.builder.push()
        self.visit_body(node.body)
        then_body = self.builder.pop()
        else_body = None
        if node.orelse:
            self.builder.push()
            self.visit_body(node.orelse)
            else_body = self.builder.pop()
        self.builder.emit(ir.IfThenElse(cond, then_body, else_body))

    # ---- expressions -----------------------------------------------------------------------------
    def eval(self, node):
        return self.visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, int) and not isinstance(node.value, bool) and not -(2**63) <= node.value < 2**64:
            raise self.error(node, f"the integer literal {node.value} does not fit in 64 bits")
        return node.value

    def visit_Name(self, node):
        return self.lookup(node, node.id)

    def visit_Attribute(self, node):
        base = self.eval(node.value)
        try:
            return getattr(base, node.attr)
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
        base = self.eval(node.value)
        key = self.eval(node.slice)
        if isinstance(base, ir.Buffer):
            return subscript_buffer(base, key)
        if _is_ir(key) or isinstance(key, tuple) and any(_is_ir(k) for k in key):
            raise self.error(node, f"{ir.describe(base)} is indexed while the kernel is built, so its index must "
                                   "be a Python value, not a kernel value")
        try:
            return base[key]
        except (IndexError, KeyError, TypeError) as exc:
            raise self.error(node, f"cannot index {ir.describe(base)} with {ir.describe(key)}: {exc}") from None

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
        if not callable(fn) or isinstance(fn, (ir.Buffer, ir.Expr)):
            raise self.error(node, f"{ast.unparse(node.func)} is not callable")
        if fn is print:
            raise self.error(node, "print() would run while the kernel is built, not when it runs; printing "
                                   "from a kernel is not supported")
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
        op = _BINOPS.get(type(node.op))
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
            if _is_ir(v) and v.dtype.is_float or isinstance(v, float):
                raise self.error(node, f"`~` takes an integer, not {ir.describe(v)}")
            return ir.binop("^", v, -1) if _is_ir(v) else ~v
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


def _closure_vars(fn) -> dict:
    names = fn.__code__.co_freevars
    cells = fn.__closure__ or ()
    out = {}
    for name, cell in zip(names, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell: the name is assigned later in the enclosing scope
            pass
    return out


def _kernel_function(fn):
    """``fn`` if it can be a kernel (a function written with ``def``), else a CompileError at the
    user's line saying what it is."""
    if inspect.isclass(fn):
        raise CompileError(f"the class {fn.__name__} is not a kernel; pass a function written in the DSL "
                           "(decorated with @T.prim_func)", caller_location())
    if not inspect.isfunction(fn):
        raise CompileError(f"expected a kernel (a @T.prim_func, or a function written in the DSL), not "
                           f"{ir.describe(fn)}", caller_location())
    if fn.__name__ == "<lambda>":
        raise CompileError("a lambda cannot be a kernel; write it as a `def` decorated with @T.prim_func",
                           caller_location())
    return fn


def _refuse_builder(fn, fdef):
    """A builder (a function that defines a kernel inside and returns it) passed where its kernel
    belongs: say so at the user's line rather than complain about its parameters."""
    inner = [n for n in ast.walk(fdef) if n is not fdef and isinstance(n, ast.FunctionDef)
             and any("prim_func" in ast.unparse(d) for d in n.decorator_list)]
    if inner:
        raise CompileError(f"{fn.__name__} is a builder: it defines the kernel {inner[0].name} and returns it. "
                           f"Call it and pass what it returns: {fn.__name__}(...)", caller_location())


def parse(fn) -> ir.PrimFunc:
    """Parse a Python function written in the tile DSL into a PrimFunc."""
    if isinstance(fn, ir.PrimFunc):
        return fn
    fn = _kernel_function(fn)
    try:
        lines, first_line = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise CompileError(f"cannot read the source of {fn.__name__!r}: {exc}", caller_location()) from None
    source = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:  # a def whose source lines inspect cannot cut out alone
        raise CompileError(f"cannot parse the source of {fn.__name__!r}: {exc.msg}", caller_location()) from None
    fdef = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == fn.__name__), None)
    if fdef is None:
        raise CompileError(f"cannot find the definition of {fn.__name__!r} in its source", caller_location())
    _refuse_builder(fn, fdef)
    fdef.decorator_list = []
    parser = Parser(fn, source.splitlines(), file, first_line, _closure_vars(fn))
    previous = getattr(_b._state, "builder", None)
    _b.install(parser.builder)
    try:
        with deep_recursion():
            func = parser.parse_function(fdef)
    finally:
        _b.install(previous)
    func.attrs["source_lines"] = source.splitlines()
    return func
