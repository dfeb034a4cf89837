"""A ``@jit`` function in TileLang's current style -> IR.

Such a function is the kernel itself, not a builder that returns one::

    @tileworkbench.jit
    def matmul(A, B, block_M, block_N, block_K, dtype=T.float16):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), dtype)
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), dtype)
        with T.Kernel(...) as (bx, by):
            ...
        return C

Its parameters are of two kinds: those the caller gives a value (``block_M``, or a default) are
Python values while the kernel is built; the others are tensors, each declared by an annotation
in the body. ``T.const`` sizes take their values from ``values`` (``compile(M=1024, ...)``) or from
the first annotated tensor that names them (``tensors``: the shapes of the tensors a call
passes). ``T.empty`` declares an output; the kernel's parameters are its input tensors in the
order of the signature, then the outputs in the order of the ``return``, which the call returns.

:func:`is_eager` tells this style from a builder's; :func:`parse_eager` parses one.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

from .. import dtypes as _dt
from ..errors import CompileError, caller_location
from ..ir import nodes as ir
from .builder import ConstSymbol
from .parser import Parser, read_function
from .specs import OutputSpec, TensorSpec


@dataclass
class EagerFunction:
    """What :func:`parse_eager` makes: the PrimFunc and which of its parameters are outputs."""

    func: ir.PrimFunc
    out_idx: list[int]
    consts: dict  # T.const name -> the value it took


def is_eager(fn) -> bool:
    """``fn`` is written in the current style: its own body opens ``with T.Kernel`` (a builder's
    kernel is a function defined inside it)."""
    try:
        _, fdef, _, _, _ = read_function(fn)
    except CompileError:
        return False
    return any(isinstance(stmt, ast.With) for stmt in fdef.body)


def tensor_parameters(fn, values: dict, signature: inspect.Signature | None = None) -> list[str]:
    """The parameters of ``fn`` that ``values`` and the defaults leave without a value: its tensors
    (``signature``: ``fn``'s, where the caller keeps it)."""
    out = []
    for name, p in (signature or inspect.signature(fn)).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise CompileError(f"{fn.__name__}: a @jit kernel takes named parameters only, not *{name} or **{name}",
                               caller_location())
        if name not in values and p.default is inspect.Parameter.empty:
            out.append(name)
    return out


class EagerParser(Parser):
    def __init__(self, fn, source_lines, file, first_line, closure, values: dict, tensors: dict | None):
        super().__init__(fn, source_lines, file, first_line, closure)
        self.values = dict(values)
        self.tensors = tensors  # name -> (shape, dtype name) of the tensors a call passes, or None
        self.pending: dict = {}  # tensor parameter -> the line of its def (until its annotation declares it)
        self.symbols: dict = {}  # T.const name -> ConstSymbol
        self.annotated: dict = {}  # name -> the size the first annotation naming it gives (``sizes_from_annotations``)
        self.outputs: list = []  # T.empty buffers, in order
        self.returned: list | None = None

    def packs_two(self, annotation) -> bool:
        """Whether a tensor annotation's dtype holds two values a byte (``T.int4``, FP4), so that
        the last dimension of the array a call passes counts half its values. A dtype the body
        computes before the annotation cannot be known yet: taken as unpacked, and a packed one then
        fails the call's shape check (never a silent misreading)."""
        node = _annotated_dtype(annotation)
        if node is None:
            return False
        try:
            value = self.eval(node)
            return _dt.as_dtype(value).packed
        except Exception:  # noqa: BLE001 - a name the body binds later, or no dtype: not known to pack
            return False

    # ---- names -------------------------------------------------------------------------------
    def lookup(self, node, name):
        value = super().lookup(node, name)
        if isinstance(value, ConstSymbol) and value.value is not None:
            return value.value
        return value

    # ---- the function ------------------------------------------------------------------------
    def parse_function(self, fdef: ast.FunctionDef) -> ir.PrimFunc:
        if isinstance(fdef, ast.AsyncFunctionDef):
            raise self.error(fdef, "a kernel cannot be an `async def`")
        signature = inspect.signature(self.fn)
        tensor_names = tensor_parameters(self.fn, self.values)
        for name, p in signature.parameters.items():
            if name in tensor_names:
                self.pending[name] = p
            else:
                self.bind(name, self.values[name] if name in self.values else p.default)
        self.annotated = sizes_from_annotations(fdef, self.tensors or {}, self.packs_two)
        self.builder.push()
        self.visit_body(fdef.body)
        frame = list(self.builder.frames[-1])
        body = self.builder.pop()
        if self.builder.launch is None:
            raise self.error(fdef, "the kernel body must contain `with T.Kernel(...)`")
        if self.pending:
            name = next(iter(self.pending))
            raise self.error(fdef, f"parameter {name!r} is a tensor (the call gives it no value) but the body never "
                                   f"declares it: add `{name}: T.Tensor(shape, dtype)` before `with T.Kernel`")
        self.check_values(fdef)
        outputs = self.returned if self.returned is not None else list(self.outputs)
        order = list(inspect.signature(self.fn).parameters)
        inputs = sorted((p for p in self.params if p not in self.outputs), key=lambda b: order.index(b.name))
        sizes = self.dynamic_sizes(fdef, inputs, outputs)
        params = inputs + [var for var, _ in sizes] + outputs
        if len(self.kernels) > 1 or self.builder.workspaces:  # kernels one after another (fused MoE's two)
            if sizes:
                raise self.error(fdef, f"T.dynamic size {sizes[0][0].name} in a function with several T.Kernel "
                                       "blocks or T.alloc_global: not supported yet")
            self.params = params
            return self.kernel_sequence(fdef, frame), list(range(len(inputs), len(params)))
        func = ir.PrimFunc(fdef.name, params, body, self.builder.launch,
                           source_file=self.file, source_line=self.first_line + fdef.lineno - 1)
        if sizes:  # where a call finds each size: (parameter index of a tensor, its dimension, the divisor)
            func.attrs["dynamic_sizes"] = {var.name: (params.index(buf), dim, self.builder.size_multiple)
                                           for var, (buf, dim) in sizes}
        return func, list(range(len(inputs) + len(sizes), len(params)))

    def dynamic_sizes(self, fdef, inputs, outputs) -> list:
        """``(size, (input tensor, dimension))`` for each ``T.dynamic`` size, from the first input
        whose annotation has it as a whole dimension; an output's dimensions are such sizes or
        constants (a call allocates it)."""
        found = []
        for name, var, value in self.builder.dynamic_sizes:
            where = next(((b, i) for b in inputs for i, d in enumerate(b.shape) if d is value), None)
            if where is None:
                raise self.error(fdef, f"T.dynamic size {name} is no dimension of an input tensor's "
                                       f"annotation: a call could not tell its value")
            found.append((var, where))
        known = {value for _, _, value in self.builder.dynamic_sizes}
        for out in outputs:
            for i, d in enumerate(out.shape):
                if ir.const_int(d) is None and d not in known:
                    raise self.error(fdef, f"output {out.name}: dimension {i} is {ir.describe(d)}; an output's "
                                           f"dimensions are constants or T.dynamic sizes, which a call allocates")
        return found

    def check_values(self, fdef):
        """Every value the caller gave names a parameter or a T.const size."""
        params = inspect.signature(self.fn).parameters
        unknown = [k for k in self.values if k not in params and k not in self.symbols]
        if unknown:
            raise self.error(fdef, f"{fdef.name} has no parameter or T.const size named {unknown[0]!r}")

    # ---- statements ---------------------------------------------------------------------------
    def _assign(self, target, value, node):
        if isinstance(value, ConstSymbol):  # (a tuple of them comes here one by one)
            self.add_symbol(value, node)
        if isinstance(target, ast.Name) and any(value is v for _, _, v in self.builder.dynamic_sizes):
            self.bind(target.id, value)  # a T.dynamic size: the kernel's scalar parameter itself
            return
        if isinstance(value, OutputSpec):
            if not isinstance(target, ast.Name):
                raise self.error(target, "T.empty(...) is assigned to one name")
            buf = ir.Buffer(target.id, tuple(ir.as_expr(d) for d in value.shape), value.dtype, "global",
                            loc=self.loc(node))
            self.params.append(buf)
            self.outputs.append(buf)
            value = buf
        return super()._assign(target, value, node)

    def add_symbol(self, symbol: ConstSymbol, node):
        if self.symbols.get(symbol.name) is symbol:
            return  # the size bound to another name too (`KH, KW = K, K`)
        if symbol.name in self.symbols:
            raise self.error(node, f"T.const: the size {symbol.name} is declared twice")
        self.symbols[symbol.name] = symbol
        if symbol.name in self.values:
            given = self.values[symbol.name]
            if isinstance(given, bool) or not isinstance(given, int):
                raise self.error(node, f"{symbol.name}={given!r}: a T.const size is an integer")
            symbol.value = given
        elif symbol.name in self.annotated:  # known from the call's tensors before the body runs on
            symbol.value = self.annotated[symbol.name]

    def visit_AnnAssign(self, node):
        if node.value is None and isinstance(node.target, ast.Name) and node.target.id in self.pending:
            self.declare_tensor(node)
            return
        super().visit_AnnAssign(node)

    def declare_tensor(self, node):
        name = node.target.id
        spec = self.eval(node.annotation)
        if not isinstance(spec, TensorSpec):
            raise self.error(node.annotation, f"the tensor {name!r} is declared with T.Tensor(shape, dtype), not "
                                              f"{ir.describe(spec)}")
        given = None if self.tensors is None else self.tensors.get(name)
        shape = []
        for i, d in enumerate(spec.shape):
            if isinstance(d, ConstSymbol):
                if given is None:
                    raise self.error(node, f"{name}: dimension {i} is {d.name}, which has no value: pass "
                                           f"{d.name}=... to compile(), or call the kernel with tensors")
                if len(given[0]) != len(spec.shape):
                    raise self.error(node, f"{name} is declared with {len(spec.shape)} dimension(s) but the tensor "
                                           f"passed has shape {tuple(given[0])}")
                if d.value is not None and d.value != int(given[0][i]):  # `(K, K)`: one size twice
                    raise self.error(node, f"{name}: dimension {i} is {d.name}, which is {d.value}, but the tensor "
                                           f"passed has shape {tuple(given[0])}")
                d.value = int(given[0][i])
                d = d.value
            shape.append(ir.as_expr(d))
        strides = None if spec.strides is None else tuple(ir.as_expr(s) for s in spec.strides)
        buf = ir.Buffer(name, tuple(shape), spec.dtype, "global", strides=strides, loc=self.loc(node))
        del self.pending[name]
        self.params.append(buf)
        self.bind(name, buf)

    def visit_Return(self, node):
        if self.builder.in_kernel or not self.kernel_seen:
            raise self.error(node, "a @jit kernel returns its outputs after `with T.Kernel(...)`: `return C`")
        value = self.eval(node.value) if node.value is not None else ()
        values = list(value) if isinstance(value, (tuple, list)) else [value]
        for v in values:
            if not (isinstance(v, ir.Buffer) and v in self.outputs):
                raise self.error(node, f"a @jit kernel returns the tensors it made with T.empty, not {ir.describe(v)}")
        if len(set(map(id, values))) != len(values):
            raise self.error(node, "an output is returned twice")
        self.returned = values


def sizes_from_annotations(fdef: ast.FunctionDef, tensors: dict, packs_two=None) -> dict:
    """Name -> size, from the tensors a call passes, for each name that is a whole dimension of a
    tensor's annotation in the function's own body (``A: T.Tensor((M, K), dtype)``, or
    ``T.Tensor[(M, K), dtype]``, with A of shape
    (1024, 512): M 1024, K 512; the first annotation naming it wins), and for the names a plain
    assignment before made aliases of (``KH, KW = K, K``: K too). So a ``T.const`` size has its
    value where it is declared, and arithmetic on it before its annotation (``K // split_k``,
    TileLang's split-K; the convolution's output size from K) works on the number. An annotation
    may name its shape (``Q: T.Tensor(q_shape, dtype)``, ``q_shape`` a list of names assigned in
    the body: NSA decode's ``heads // groups`` before it). Where ``packs_two(annotation)`` says its
    dtype holds two values a byte (``T.int4``), the array's last dimension counts bytes: the size
    named there is twice it."""
    aliases: dict = {}  # alias -> the name it was assigned from
    shapes: dict = {}  # a name assigned a list or tuple (``q_shape = [batch, 1, heads, dim]``) -> its names
    found: dict = {}
    for stmt in fdef.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            targets, values = _names(stmt.targets[0]), _names(stmt.value)
            if targets is not None and values is not None and len(targets) == len(values):
                aliases.update((t, v) for t, v in zip(targets, values) if t is not None and v is not None)
            elif isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, (ast.List, ast.Tuple)):
                shapes[stmt.targets[0].id] = values
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in tensors:
            first = _annotated_shape(stmt.annotation)
            dims = shapes.get(first.id) if isinstance(first, ast.Name) and first.id in shapes else _names(first)
            shape = list(tensors[stmt.target.id][0])
            if dims is None or len(dims) != len(shape):
                continue
            if shape and packs_two is not None and packs_two(stmt.annotation):
                shape[-1] *= 2
            for name, size in zip(dims, shape):
                while name is not None and name not in found:
                    found[name] = int(size)
                    name = aliases.get(name)
    return found


def _annotated_shape(annotation):
    """The shape's node of ``T.Tensor(shape, dtype)`` or ``T.Tensor[shape, dtype]`` (TileLang's
    pool-MQA: ``T.Tensor[[seq_len * heads, index_dim], fp8_dtype]``), else None."""
    if isinstance(annotation, ast.Call) and annotation.args:
        return annotation.args[0]
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple) and annotation.slice.elts:
        return annotation.slice.elts[0]
    return None


def _annotated_dtype(annotation):
    """The dtype's node of ``T.Tensor(shape, dtype)`` or ``T.Tensor[shape, dtype]``, else None."""
    if isinstance(annotation, ast.Call):
        if len(annotation.args) > 1:
            return annotation.args[1]
        return next((k.value for k in annotation.keywords if k.arg == "dtype"), None)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple) and \
            len(annotation.slice.elts) > 1:
        return annotation.slice.elts[1]
    return None


def _names(node) -> list | None:
    """The names of a tuple (or list) of names, or of one name; None for anything else (an
    element that is no name is None in the list)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [e.id if isinstance(e, ast.Name) else None for e in node.elts]
    return None


def parse_eager(fn, values: dict | None = None, tensors: dict | None = None,
                size_multiple: int = 1) -> EagerFunction:
    """Parse ``fn`` (module doc) with ``values`` for its non-tensor parameters and T.const sizes
    and, at a call, ``tensors``: parameter name -> (shape, dtype name) of the tensor passed.
    ``size_multiple``: compile for ``T.dynamic`` sizes that are multiples of it (each size is then
    a parameter times it, so the passes can prove rows aligned)."""
    source, fdef, file, first_line, closure = read_function(fn)
    parser = EagerParser(fn, source.splitlines(), file, first_line, closure, values or {}, tensors)
    parser.builder.size_multiple = size_multiple
    func, out_idx = parser.run(fdef)
    func.attrs["source_lines"] = source.splitlines()
    return EagerFunction(func, out_idx, {n: s.value for n, s in parser.symbols.items()})
