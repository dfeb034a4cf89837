"""Python AST of a ``@T.prim_func`` -> IR.

One ``ast.NodeVisitor`` walks the function body: :class:`Parser` holds the locations, the error
choke point, the names and the function; ``blocks.Blocks`` (``with``), ``statements.Statements`` and
``expressions.Expressions`` its visitors of statements and of expressions. Expressions are *evaluated*: names from the
closure and globals give Python values (sizes, dtypes, ``T``), kernel names give IR Vars and
Buffers, and operators on IR values build IR expressions, so ``A[by * block_M, k * block_K]``
becomes a tile origin with the sizes folded in. Calls of ``T.*`` functions emit statements
through the builder. Anything the visitor does not handle is a ``CompileError`` naming the
construct and the kernel line; internal failures are wrapped once, here, with that line.
"""

from __future__ import annotations

import __future__

import ast
import builtins
import contextlib
import inspect
import os
import sys
import textwrap
import threading

from .. import dtypes as _dt
from ..errors import DEBUG_ENV, TOO_DEEP, CompileError, InternalCompilerError, SourceLocation, caller_location
from ..ir import nodes as ir
from ..ir.visitor import collect
from . import builder as _b
from .comprehensions import Comprehensions
from .expressions import Expressions
from .specs import BufferSpec, TensorSpec
from .blocks import Blocks
from .branch_names import BranchOnly
from .breaks import Breaks
from .statements import Scope, Statements

# Python frames the compiler may use while it works: the front end, the passes and the printer
# recurse over expressions, a few frames a level, so a sum of a few hundred terms needs more than
# Python's default of 1000 (`deep_recursion`). Past this, the kernel is too deep to compile.
RECURSION_LIMIT = 8000

# Constructs Python has that kernels do not, with what to write instead.
_UNSUPPORTED = {
    "Continue": "`continue` is not supported: kernel loops run all their iterations (guard the body with an `if`)",
    "Return": "a kernel returns nothing: write its results into a tensor parameter",
    "Try": "`try` is not supported in kernels",
    "Raise": "`raise` is not supported in kernels",
    "Lambda": "lambdas are not supported in kernels; define a Python helper outside the kernel",
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


_RECURSION = {"depth": 0, "previous": None}
_RECURSION_LOCK = threading.Lock()


@contextlib.contextmanager
def deep_recursion():
    """Raise Python's recursion limit to ``RECURSION_LIMIT`` while the compiler runs (never lowers
    it), and put it back when the last compile running ends: the kernels of a sequence compile in
    threads at once, and the first to finish must not lower the limit under the others."""
    with _RECURSION_LOCK:
        if _RECURSION["depth"] == 0:
            _RECURSION["previous"] = sys.getrecursionlimit()
            if _RECURSION["previous"] < RECURSION_LIMIT:
                sys.setrecursionlimit(RECURSION_LIMIT)
        _RECURSION["depth"] += 1
    try:
        yield
    finally:
        with _RECURSION_LOCK:
            _RECURSION["depth"] -= 1
            if _RECURSION["depth"] == 0 and _RECURSION["previous"] < RECURSION_LIMIT:
                sys.setrecursionlimit(_RECURSION["previous"])


def outer_sizes(params: list, error) -> list:
    """``(size, (tensor parameter index, dimension))`` for each ``T.dynamic`` size declared
    outside the kernel (``_b.OUTER_SIZES``) that the tensor parameters' shapes name, from the first
    tensor having it as a whole dimension; such a size becomes a scalar parameter after the others,
    so the caller's tensors (and ``out_idx``, counted from either end) keep their places. A size
    named only inside a larger expression is ``error(why)``: a call could not tell its value."""
    found: dict = {}
    for index, p in enumerate(params):
        for dim, d in enumerate(getattr(p, "shape", ())):
            if d in _b.OUTER_SIZES and d not in found:
                found[d] = (index, dim)
    for p in params:
        for d in getattr(p, "shape", ()):
            for v in collect(ir.as_expr(d), ir.Var):
                if v in _b.OUTER_SIZES and v not in found:
                    raise error(f"T.dynamic size {v.name} is no whole dimension of a tensor parameter "
                                f"({p.name} has {ir.describe(d)}): a call could not tell its value")
    return list(found.items())


def _size_attrs(sizes: list) -> dict:
    """``func.attrs["dynamic_sizes"]`` of ``outer_sizes``: where a call finds each (parameter index of
    a tensor, its dimension, the divisor: 1)."""
    return {var.name: (where[0], where[1], 1) for var, where in sizes}


class Parser(Blocks, Breaks, Statements, Comprehensions, Expressions, ast.NodeVisitor):
    """One ``ast.NodeVisitor`` over the kernel: its statements (``statements.Statements``) and
    expressions (``expressions.Expressions``); here the locations, the error choke point, names
    and the function itself."""

    def __init__(self, fn, source_lines, file, first_line, closure):
        self.fn = fn
        self.lines = source_lines
        self.file = file
        self.first_line = first_line
        self.globals = dict(fn.__globals__)
        self.globals.update(closure)
        self.scope = Scope({}, None)
        self.builder = _b.Builder()
        self.params: list = []
        self.kernel_seen = False
        self.kernel_names: set = set()  # names bound inside a T.Kernel block that has ended
        self.kernels: list = []  # (launch, first statement, end, the with node) per T.Kernel block
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
        if isinstance(value, BranchOnly):
            raise self.error(node, value.message())
        if found:
            return value
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        if name in self.kernel_names:
            raise self.error(node, f"{name} is a name of the kernel block above; kernel statements and values must "
                                   "be inside `with T.Kernel(...)`")
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
        args = fdef.args.posonlyargs + fdef.args.args
        for arg in args:
            if arg.annotation is None:
                raise self.error(arg, f"parameter {arg.arg!r} needs a T.Tensor(...) annotation")
        # Scalar parameters first: a tensor's shape may name one (`A: T.Tensor((n, 64), ...)` under
        # `from __future__ import annotations`, where the annotation is text evaluated here).
        scalars = {arg.arg: ir.Var(arg.arg, spec) for arg in args
                   if isinstance(spec := self.scalar_annotation(arg, annotations), _dt.DType)}
        for name, var in scalars.items():
            self.bind(name, var)
        for arg in args:
            self.builder.loc = self.loc(arg)
            # Python already evaluated the annotation in the defining scope; prefer its value, but
            # under `from __future__ import annotations` it is the text: evaluate it here.
            spec = annotations.get(arg.arg)
            if arg.arg not in annotations or isinstance(spec, str):
                spec = self.eval(arg.annotation)
            if arg.arg in scalars:
                value = scalars[arg.arg]
            elif isinstance(spec, TensorSpec):
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
        sizes = outer_sizes(self.params, lambda why: self.error(fdef, why))
        self.builder.push()
        self.visit_body(fdef.body)
        frame = list(self.builder.frames[-1])
        body = self.builder.pop()
        if self.builder.launch is None:
            raise self.error(fdef, "the kernel body must contain `with T.Kernel(...)`")
        if len(self.kernels) > 1 or self.builder.workspaces:
            return self.kernel_sequence(fdef, frame, sizes)
        params = self.params + [var for var, _ in sizes]
        func = ir.PrimFunc(fdef.name, params, body, self.builder.launch,
                           source_file=self.file, source_line=self.first_line + fdef.lineno - 1)
        if sizes:
            func.attrs["dynamic_sizes"] = _size_attrs(sizes)
        return func

    def scalar_annotation(self, arg, annotations):
        """The dtype a parameter is annotated with, else None (a tensor, or not known yet)."""
        spec = annotations.get(arg.arg)
        if isinstance(spec, str) and isinstance(arg.annotation, (ast.Attribute, ast.Name, ast.Constant)):
            try:
                spec = self.eval(arg.annotation)
            except CompileError:
                return None
        return spec if isinstance(spec, _dt.DType) else None

    def kernel_sequence(self, fdef, frame, sizes=()) -> ir.KernelSequence:
        """One PrimFunc per T.Kernel block, each taking the function's parameters, its ``T.dynamic``
        sizes declared outside (``outer_sizes``: each kernel takes them from the tensors, as one
        kernel does) and then the T.alloc_global workspaces."""
        workspaces = list(self.builder.workspaces)  # of constant shapes (T.alloc_global checks)
        size_vars = [var for var, _ in sizes]
        kernels = []
        for i, (launch, start, end, node, depth) in enumerate(self.kernels):
            if depth != 1:
                raise self.error(node, "each `with T.Kernel(...)` of a function with several kernels (or with "
                                       "T.alloc_global) stands at the function's top level")
            kernel = ir.PrimFunc(f"{fdef.name}_{i}", self.params + size_vars + workspaces, ir.seq(frame[start:end]),
                                 launch, source_file=self.file, source_line=self.loc(node).line)
            if sizes:
                kernel.attrs["dynamic_sizes"] = _size_attrs(sizes)
            kernels.append(kernel)
        return ir.KernelSequence(fdef.name, list(self.params), workspaces, kernels, source_file=self.file,
                                 source_line=self.first_line + fdef.lineno - 1)

    def visit_body(self, stmts):
        for stmt in stmts:
            self.visit(stmt)

    def expand_macro(self, node, macro, args, kwargs):
        """A ``@T.macro`` call: the macro's body, parsed as kernel code where the call stands, in a
        scope of its own (its parameters bound to the call's values, its module's and closure's
        names), errors pointing at the macro's lines. A macro returns nothing."""
        fn = macro.fn
        source, fdef, file, first_line, closure = read_function(fn)
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, f"wrong arguments to the T.macro {fn.__name__}: {exc}") from None
        bound.apply_defaults()
        self._check_buffer_arguments(node, fn, bound.arguments)
        returns = [n for n in ast.walk(fdef) if isinstance(n, ast.Return) and n.value is not None]
        if returns:
            raise self.error(node, f"the T.macro {fn.__name__} returns a value (line {first_line + returns[0].lineno - 1}); "
                                   "a macro only emits statements: write its results into buffers it is given")
        saved = (self.lines, self.file, self.first_line, self.globals, self.scope)
        self.lines, self.file, self.first_line = source.splitlines(), file, first_line
        self.globals = {**fn.__globals__, **closure}
        self.scope = Scope(dict(bound.arguments), None)
        try:
            self.visit_body(fdef.body)
        finally:
            self.lines, self.file, self.first_line, self.globals, self.scope = saved
        return None

    def _check_buffer_arguments(self, node, fn, arguments: dict):
        """Each parameter annotated ``T.SharedBuffer(shape, dtype)`` (``FragmentBuffer``,
        ``LocalBuffer``) gets a buffer of that scope, type and (where both are known) shape."""
        for name, spec in getattr(fn, "__annotations__", {}).items():
            if not isinstance(spec, BufferSpec) or name not in arguments:
                continue
            value, what = arguments[name], f"the T.macro {fn.__name__}'s parameter {name}"
            if not isinstance(value, ir.Buffer):
                raise self.error(node, f"{what} takes a {spec.scope} buffer, not {ir.describe(value)}")
            if value.scope != spec.scope or value.dtype != spec.dtype:
                raise self.error(node, f"{what} takes a {spec.scope} buffer of {spec.dtype.name}; {value.name} is a "
                                       f"{value.scope} buffer of {value.dtype.name}")
            got, want = value.static_shape(), tuple(ir.const_int(d) for d in spec.shape)
            if got is not None and None not in want and tuple(got) != want:
                raise self.error(node, f"{what} takes a buffer of shape {want}; {value.name} is {tuple(got)}")

    def run(self, fdef):
        """``parse_function(fdef)`` with this parser's builder installed for the T.* functions."""
        fdef.decorator_list = []
        previous = getattr(_b._state, "builder", None)
        _b.install(self.builder)
        try:
            with deep_recursion():
                return self.parse_function(fdef)
        finally:
            _b.install(previous)


def postponed_annotation_names(fn) -> set:
    """Under ``from __future__ import annotations`` a parameter's annotation is text, evaluated here
    later, and a name only it reads is no closure variable of ``fn``: the builder's local that sizes
    a tensor (``rows = 128 * blocks`` ... ``A: T.Tensor((rows, 64), dtype)``) would be unknown. The
    names those texts read, where ``fn`` was compiled so (else none)."""
    if not fn.__code__.co_flags & __future__.annotations.compiler_flag:
        return set()
    names = set()
    for text in getattr(fn, "__annotations__", {}).values():
        if isinstance(text, str):
            try:
                names |= {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
            except SyntaxError:  # the annotation's own error is the parser's to report
                pass
    return names


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


def read_function(fn):
    """(dedented source, its ``def``, file, first line, closure values) of a kernel function, or a
    CompileError at the user's line saying why it cannot be read."""
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
    return source, fdef, file, first_line, _closure_vars(fn)


def parse(fn, enclosing: dict | None = None) -> ir.PrimFunc:
    """Parse a Python function written in the tile DSL into a PrimFunc. ``enclosing``: the locals of
    the function that defines ``fn`` as they stand where it is defined (``T.prim_func`` passes them),
    read for names only annotations use (``postponed_annotation_names``)."""
    if isinstance(fn, (ir.PrimFunc, ir.KernelSequence)):
        return fn
    source, fdef, file, first_line, closure = read_function(fn)
    _refuse_builder(fn, fdef)
    if enclosing:
        closure = {**{k: v for k, v in enclosing.items() if k in postponed_annotation_names(fn)}, **closure}
    parser = Parser(fn, source.splitlines(), file, first_line, closure)
    func = parser.run(fdef)
    func.attrs["source_lines"] = source.splitlines()
    for kernel in getattr(func, "kernels", ()):
        kernel.attrs["source_lines"] = source.splitlines()
    return func
