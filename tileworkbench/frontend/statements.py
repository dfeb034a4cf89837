"""The front end's statements: assignments and stores, loops, ifs (``with`` blocks: ``blocks``).

:class:`Statements` is the part of the parser (``parser.Parser``) that visits statements; each
visitor emits IR through the builder and raises a ``CompileError`` at the line for what kernels do
not take.
"""

from __future__ import annotations

import ast

from .. import dtypes as _dt
from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.records import PersistentWalk
from ..ir.visitor import collect, uses_var
from . import builder as _b
from .branch_names import BranchNames
from .breaks import LoopFrame, with_breaks
from .regions import subscript_buffer
from .expressions import BINOPS
from .specs import LoopSpec, serial_loop
from .thread_splits import emit_thread_branches, thread_branches

# What a name may hold that is no kernel value (not a condition, not a number).
_NOT_VALUES = (ir.Buffer, ir.Region, ir.BarrierRef, _b.Point)


def _is_ir(value) -> bool:
    return isinstance(value, ir.Expr)


class Scope:
    def __init__(self, names: dict, parent: "Scope | None"):
        self.names, self.parent = names, parent

    def lookup(self, name):
        scope = self
        while scope is not None:
            if name in scope.names:
                return True, scope.names[name]
            scope = scope.parent
        return False, None


class Statements:
    """Needs the parser's ``builder``, ``scope``, ``mutable_vars``, ``eval``, ``visit_body``,
    ``error``, ``loc`` and ``bind``."""

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
        value = self.eval(node.value)  # once: a value that emits statements (T.warp_reduce_sum) emits them once
        for target in node.targets:  # `a = b = value`: each, left to right, as Python assigns them
            if isinstance(target, ast.Subscript):
                self._store(target, value)
            else:
                self._assign(target, value, node)

    def visit_AnnAssign(self, node):
        if node.value is None:
            raise self.error(node, "a declaration needs a value")
        value = self.eval(node.value)
        dtype = self.eval(node.annotation)
        if isinstance(dtype, type) and not _is_ir(value):
            self._assign(node.target, value, node)  # `dtype: str = BF16`: a Python value, its type a hint
            return
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
        found, old = self.scope.lookup(name)
        if found and isinstance(old, ir.Buffer) and old in self.builder.var_buffers and not isinstance(value, ir.Buffer):
            # TileLang's kernel variable: `x = T.alloc_var(T.int32)` then `x = 0` assigns it
            self.builder.emit(ir.BufferStore(old, (ir.const(0),), ir.cast(
                _b.stored_value(value, old, f"the value assigned to {name}"), old.dtype)))
            return
        if isinstance(value, ir.Buffer):
            view = self.builder.fragment_views.get(value)
            if value.name in ("buf", "mbar", "tensor") or view is not None and value.name == f"{view.base.name}_view":
                value.name = self.builder.fresh_name(name)
            self.bind(name, value)
        elif _is_ir(value) or (found and isinstance(old, ir.Var) and old in self.mutable_vars
                               and isinstance(value, (int, float))):
            # a kernel variable stays one: `x = T.int32(-1)` ... `x = 5` assigns it (a Python number
            # bound to the name instead was used by all code after it, whichever branch ran)
            value = value if _is_ir(value) else ir.const(value)
            found, old = self.scope.lookup(name)
            if found and isinstance(old, ir.Var) and old in self.mutable_vars:
                if (why := _kept(self.builder, name, old)) is not None:
                    raise self.error(node, f"{name} is assigned again, but {why}; give the new value another name")
                self.builder.reassigned.add(old)
                self.builder.emit(ir.Assign(old, ir.cast(value, old.dtype)))
                return
            var = ir.Var(self.builder.fresh_name(name), value.dtype)
            self.mutable_vars.add(var)
            self.builder.emit(ir.LetStmt(var, value))
            self.builder.let_values[var] = value
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
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"unsupported operator {type(node.op).__name__}")
        current = self.eval(node.target)
        value = self.arith(node, op, current, self.eval(node.value))
        if isinstance(node.target, ast.Subscript):
            self._store(node.target, value)
        else:
            self._assign(node.target, value, node)

    def _store(self, target: ast.Subscript, value):
        buf = self.indexed(target.value)
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
        element = subscript_buffer(buf, key)  # the indices' checks, as for a load; a laid-out tensor's place
        value = ir.cast(_b.stored_value(value, buf, f"the value stored in {buf.name}"), buf.dtype)
        self.builder.emit(ir.BufferStore(element.buffer, element.indices, value))

    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, "for-else is not supported in kernels")
        spec = self._loop_spec(node.iter)
        names = self._target_names(node.target)
        if spec.persistent is not None:
            return _persistent_loop(self, node, spec.persistent, names)
        if len(names) != len(spec.extents):
            raise self.error(node, f"this loop has {len(spec.extents)} dimension(s) but "
                                   f"{len(names)} loop variable(s)")
        loop_vars = [ir.Var(self.builder.fresh_name(n)) for n in names]
        outer = self.scope
        self.scope = Scope({n: v for n, v in zip(names, loop_vars)}, outer)
        self.builder.push()
        self.builder.loop_vars.extend(loop_vars)
        self.builder.loop_frames.append(LoopFrame(spec.kind))
        try:
            self.visit_body(node.body)
        finally:
            del self.builder.loop_vars[-len(loop_vars):]
            self.scope = outer
            frame = self.builder.loop_frames.pop()
        before, body = with_breaks(frame, self.builder.pop())
        for stmt in before:
            self.builder.emit(stmt)
        if spec.kind == "pipelined":
            body = _declared_before(self.builder, body, loop_vars)
        for var, start, extent in reversed(list(zip(loop_vars, spec.starts, spec.extents))):
            pipeline = ir.PipelineInfo(spec.stages) if spec.kind == "pipelined" else None
            body = ir.For(var, extent, body, spec.kind, start, dict(spec.annotations), pipeline, loc=self.loc(node))
        self.builder.emit(body)

    def visit_Assert(self, node):
        """An ``assert`` on values known while the kernel is built (sizes) is checked then, as
        TileLang's builder does; one on a kernel value would need a device-side trap."""
        cond = self.eval(node.test)
        if _is_ir(cond) or isinstance(cond, _NOT_VALUES):
            raise self.error(node, "`assert` is not supported on kernel values (check sizes in Python, or guard "
                                   "the work with an `if`)")
        if not cond:
            message = self.eval(node.msg) if node.msg is not None else ast.unparse(node.test)
            raise self.error(node, f"assertion failed: {message}")

    def visit_While(self, node):
        if node.orelse or not self.builder.in_kernel:
            raise self.error(node, "while-else is not supported in kernels" if node.orelse else
                             "a `while` loop must be inside `with T.Kernel(...)`")
        cond = self.eval(node.test)
        if (problem := _while_condition_problem(cond)) is not None:
            raise self.error(node.test, problem)
        outer = self.scope
        self.scope = Scope({}, outer)
        self.builder.push()
        self.builder.loop_vars.append(ir.Var("while"))  # names re-assigned in it are loop-carried
        self.builder.loop_frames.append(LoopFrame("while"))
        try:
            self.visit_body(node.body)
        finally:
            self.builder.loop_vars.pop()
            self.builder.loop_frames.pop()
            self.scope = outer
        body = self.builder.pop()
        if not _changes_condition(body, cond):
            raise self.error(node.test, f"the body of this loop changes nothing its condition ({expr_text(cond)}) "
                                        "reads, so once entered it would never end (a hung GPU): assign a kernel "
                                        "variable or local buffer element the condition reads inside the loop")
        self.builder.emit(ir.While(cond, body, loc=self.loc(node)))

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
        if isinstance(cond, _NOT_VALUES):
            raise self.error(node.test, f"{ir.describe(cond)} is not a condition; compare its elements instead")
        if not _is_ir(cond):  # decided while parsing: keep only the branch taken
            self.visit_body(node.body if cond else node.orelse)
            return
        if not self.builder.in_kernel:
            raise self.error(node, "an `if` on a kernel value must be inside `with T.Kernel(...)`")
        chain = thread_branches(node, cond, self.eval, self.builder)
        if chain is not None:
            emit_thread_branches(self, node, chain)
            return
        names = BranchNames(self.scope.names)
        then_body = self._branch(node.body, None)
        names.start_branch()
        else_body = self._branch(node.orelse, None) if node.orelse else None
        names.end_if(self.loc(node).line if self.loc(node) is not None else None)
        self.builder.emit(ir.IfThenElse(cond, then_body, else_body))

    def _branch(self, statements, scope: tuple[int, int] | None) -> ir.Stmt:
        """A branch's statements, built as code of the threads ``scope`` (first, count) where the
        branch may become one (``T.sync_threads(id, count)`` inside counts them)."""
        outer = self.builder.thread_scope
        if scope is not None:
            self.builder.thread_scope = scope
        self.builder.push()
        try:
            self.visit_body(statements)
        finally:
            self.builder.thread_scope = outer
        return self.builder.pop()


def _kept(builder, name: str, var: ir.Var) -> str | None:
    """Why the kernel variable ``var`` must keep its first value, if it must."""
    if (where := builder.sized_by.get(var)) is not None:
        return f"the slice at line {where.line} has the extent it has because {name} keeps its first value"
    if (where := builder.decides_threads.get(var)) is not None:
        return f"the `if` at line {where.line} gives its branch to the threads {name} names there"
    return None


def _declared_before(builder, body: ir.Stmt, loop_vars) -> ir.Stmt:
    """A ``T.Pipelined`` body without the buffers it allocates itself (mHC's ``x_smem =
    T.alloc_shared(...)`` in the loop), which are declared before the loop instead: one buffer
    for every iteration, as TileLang has it, that the pipeline can fill ahead of the loop (its
    prologue) and warp specialisation can hand between its roles."""
    statements = ir.statements(body)
    declared = [s for s in statements if isinstance(s, ir.Allocate)
                and not any(uses_var(e, v) for e in s.buffer.shape for v in loop_vars)]
    for alloc in declared:
        builder.emit(alloc)
    return ir.seq([s for s in statements if not any(s is d for d in declared)]) if declared else body


def _changes_condition(body: ir.Stmt, cond: ir.Expr) -> bool:
    """Whether ``body`` may change what a ``while`` condition reads: it assigns one of the
    condition's scalars or stores into one of its buffers (tile operations included); memory
    that other threads or blocks can write (global, shared) counts as changing."""
    loaded = {load.buffer for load in collect(cond, ir.BufferLoad)}
    if any(b.scope in ("global", "shared") for b in loaded):
        return True
    written = {s.var for s in collect(body, ir.Assign)}
    written |= {s.buffer for s in collect(body, ir.BufferStore)}
    written |= {s.dst.buffer for s in collect(body, (ir.Copy, ir.Fill))}
    return bool(written & (loaded | set(collect(cond, ir.Var))))


def _while_condition_problem(cond) -> str | None:
    """Why ``cond`` cannot be a ``while`` loop's condition (None: it can)."""
    if isinstance(cond, _NOT_VALUES):
        return f"{ir.describe(cond)} is not a condition; compare its elements instead"
    if not _is_ir(cond):
        return (f"this condition is {bool(cond)} while the kernel is built, so the loop would run never or "
                "forever: make it depend on a kernel value that the body changes (a T.alloc_var, or a local "
                "buffer element)")
    if cond.dtype.is_float:
        return f"a while condition must be a comparison or an integer, not {cond.dtype.name}"
    return None


def _persistent_loop(self, node, tiles, names):
    """``for bx, by in T.Persistent(...)``: a serial loop over waves; in each, this block's tile
    (``w * wave_size + index`` in the grouped order) unravelled into the loop's names, the body
    run where the tile is one of the domain's (TileLang leaves the loop there instead: we have
    no break, and every later wave is past the end too)."""
    if len(names) != len(tiles.domain):
        raise self.error(node, f"this T.Persistent domain has {len(tiles.domain)} dimension(s) but "
                               f"{len(names)} loop variable(s)")
    wave = ir.Var(self.builder.fresh_name("w"))
    grouped = tiles.grouped()
    tile = wave * tiles.wave_size + tiles.index
    digits, rest = [], tile
    for extent in reversed(grouped[1:]):
        digits.append(rest % extent)
        rest = rest // extent
    digits = [rest] + list(reversed(digits))  # one per grouped dimension, slowest first
    coords = [*digits[1:-1], digits[0] * tiles.group + digits[-1]]
    outer = self.scope
    self.builder.push()
    coord_vars = [ir.Var(self.builder.fresh_name(n)) for n in names]
    self.scope = Scope(dict(zip(names, coord_vars)), outer)
    self.builder.loop_vars.append(wave)
    try:
        self.visit_body(node.body)
    finally:
        self.builder.loop_vars.pop()
        self.scope = outer
    body = ir.IfThenElse(ir.cmp("<", coord_vars[-1], ir.const(tiles.domain[-1])), self.builder.pop())
    body = ir.seq([ir.LetStmt(v, c) for v, c in zip(coord_vars, coords)] + [body])
    body = ir.IfThenElse(ir.cmp("<", tile, ir.const(tiles.places())), body)
    walk = PersistentWalk(tuple(ir.const_int(d) for d in tiles.domain), ir.const_int(tiles.wave_size), tiles.index,
                          tuple(coord_vars))
    self.builder.emit(ir.For(wave, ir.const(tiles.waves()), body, "serial", annotations={ir.PERSISTENT_WALK: walk},
                             loc=self.loc(node)))
