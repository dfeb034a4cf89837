"""The IR verifier: what every pass may assume of the IR it is given, checked.

``verify(func)`` lists what is wrong with a function's IR (empty: nothing); ``forms(func)`` says
which of the constructs that passes remove it still holds. ``passes.manager.run_pipeline`` runs
both after every pass when ``TILEWORKBENCH_VERIFY_IR=1`` or the pass config ``tw.verify_ir`` is set
(the test suite sets the variable), so a pass that breaks the IR is named at once, not found
later as a wrong kernel; without them, once on what each run of passes leaves (about a
millisecond a compile), so that no compile prints a name nothing binds or a tile nothing
allocates (each of session 41's three miscompiles did) without an internal error.

The rules:
  * every variable is bound where it is used: a scalar parameter, a size in a parameter's shape,
    the launch's block and thread indices, a loop's variable in its body, a ``LetStmt``'s for the
    rest of its block, a ``BaseOffset``'s after it; an ``Assign`` changes a bound variable;
  * every buffer is declared before it is used: a parameter, an ``Allocate`` or a ``BaseOffset``;
  * an access has one index per dimension of its buffer, or one element offset (``flat``), and
    indices, extents and barrier slots are integers;
  * only the codegen phase's IR is flat, and then all of it; loop forms come after flat accesses;
  * a pass does not bring back what an earlier pass removed (:func:`regressions`): tile
    operations, fragments.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import nodes as ir
from .visitor import IRVisitor

TILE_OPS = ir.TILE_OPS


@dataclass
class Forms:
    """Which constructs the IR holds, of those that passes remove or add once."""

    tile_ops: bool = False  # Copy, TmaCopy, Fill, Gemm, Reduce, Scan
    fragments: bool = False  # fragment buffers (per-thread local arrays after partition_parallel_loops)
    logical_accesses: bool = False  # accesses by index per dimension
    flat_accesses: bool = False  # accesses by element offset (the codegen phase)
    loops_with_form: bool = False

    # What a pass may remove but no later pass brings back.
    ONCE_GONE = ("tile_ops", "fragments")


class _Verifier(IRVisitor):
    def __init__(self, func: ir.PrimFunc):
        self.problems: list[str] = []
        self.forms = Forms()
        self.scopes = [set()]
        self.buffers: set = set()
        launch = func.launch
        for v in (*launch.block_vars, launch.thread_var):
            self.bind(v)
        for p in func.params:
            if isinstance(p, ir.Buffer):
                self.buffers.add(p)
                for e in (*p.shape, *(p.strides or ())):
                    for v in _vars_in(e):
                        self.bind(v)
            else:
                self.bind(p)

    # ---- scopes ------------------------------------------------------------------------------
    def bind(self, var: ir.Var):
        self.scopes[-1].add(var)

    def bound(self, var: ir.Var) -> bool:
        return any(var in s for s in self.scopes)

    def scoped(self, stmt):
        """Visit ``stmt`` in a scope of its own (a loop body, a branch)."""
        self.scopes.append(set())
        try:
            self.visit(stmt)
        finally:
            self.scopes.pop()

    def problem(self, node, text: str):
        loc = getattr(node, "loc", None)
        where = f" (line {loc.line})" if loc is not None and loc.line else ""
        self.problems.append(f"{type(node).__name__}{where}: {text}")

    # ---- expressions -------------------------------------------------------------------------
    def visit_Var(self, node: ir.Var):
        if not self.bound(node):
            self.problems.append(f"variable {node.name} used where it is not bound")

    def visit_Buffer(self, node: ir.Buffer):
        if node.scope == "fragment":
            self.forms.fragments = True
        if node not in self.buffers:
            self.problems.append(f"buffer {node.name} ({node.scope}) used before it is declared")
        elif node.data is not None:
            self.visit(node.data)

    def access(self, node, buf: ir.Buffer, indices, flat: bool):
        self.visit(buf)
        if flat:
            self.forms.flat_accesses = True
            if len(indices) != 1:
                self.problem(node, f"a flat access to {buf.name} has {len(indices)} indices")
        elif buf.scope in ("global", "shared", "local", "fragment"):
            self.forms.logical_accesses = True
            if len(indices) != buf.ndim:
                self.problem(node, f"{len(indices)} indices for {buf.name}, which has {buf.ndim} dimensions")
        for i in indices:
            self.integer(node, i, f"an index of {buf.name}")
            self.visit(i)

    def integer(self, node, e, what: str):
        if getattr(e, "dtype", None) is not None and e.dtype.is_float:
            self.problem(node, f"{what} is a {e.dtype.name} ({e})")

    def visit_BufferLoad(self, node: ir.BufferLoad):
        self.access(node, node.buffer, node.indices, node.flat)

    def visit_BarrierRef(self, node: ir.BarrierRef):
        self.visit(node.buffer)
        self.integer(node, node.index, f"the slot of {node.buffer.name}")
        self.visit(node.index)

    # ---- statements --------------------------------------------------------------------------
    def visit_SeqStmt(self, node: ir.SeqStmt):
        for s in node.stmts:  # a LetStmt binds for the rest of the block: the scope is the enclosing one
            self.visit(s)

    def visit_BufferStore(self, node: ir.BufferStore):
        self.access(node, node.buffer, node.indices, node.flat)
        self.visit(node.value)

    def visit_For(self, node: ir.For):
        self.integer(node, node.extent, "the loop's extent")
        self.visit(node.start)
        self.visit(node.extent)
        if node.form is not None:
            self.forms.loops_with_form = True
        self.scopes.append({node.var})
        try:
            if node.form is not None:
                self.visit(node.form.end)
            self.visit(node.body)
        finally:
            self.scopes.pop()

    def visit_While(self, node: ir.While):
        self.visit(node.cond)
        self.scoped(node.body)

    def visit_IfThenElse(self, node: ir.IfThenElse):
        self.visit(node.cond)
        self.scoped(node.then_body)
        if node.else_body is not None:
            self.scoped(node.else_body)

    def visit_WarpSpecialize(self, node: ir.WarpSpecialize):
        self.scoped(node.producer)
        self.scoped(node.consumer)

    def visit_ThreadScope(self, node: ir.ThreadScope):
        self.scopes.append({node.var})  # the scope's thread index is bound inside it only
        try:
            self.visit(node.body)
        finally:
            self.scopes.pop()

    def visit_LetStmt(self, node: ir.LetStmt):
        self.visit(node.value)
        self.bind(node.var)

    def visit_Assign(self, node: ir.Assign):
        if not self.bound(node.var):
            self.problem(node, f"assigns {node.var.name}, which is not bound")
        self.visit(node.value)

    def visit_Allocate(self, node: ir.Allocate):
        buf = node.buffer
        self.buffers.add(buf)
        self.visit(buf)  # and the pointer of a tensor made in the kernel

    def visit_BaseOffset(self, node: ir.BaseOffset):
        self.visit(node.buffer)
        self.visit(node.offset)
        if isinstance(node.target, ir.Buffer):
            self.buffers.add(node.target)
        else:
            self.bind(node.target)

    def generic_visit(self, node):
        if isinstance(node, TILE_OPS):
            self.forms.tile_ops = True
        super().generic_visit(node)


def _vars_in(e) -> list:
    out: list = []

    class _Collect(IRVisitor):
        def visit_Var(self, node):
            out.append(node)

    _Collect().visit(e)
    return out


def check(func: ir.PrimFunc) -> tuple[list[str], Forms]:
    """The problems of ``func``'s IR (rules in the module doc) and the forms it holds."""
    v = _Verifier(func)
    v.visit(func.body)
    if v.forms.flat_accesses and v.forms.logical_accesses:
        v.problems.append("the IR is partly flat: the codegen phase leaves every access flat")
    if v.forms.loops_with_form and v.forms.logical_accesses:
        v.problems.append("loops have forms but accesses are not flat")
    return v.problems, v.forms


def regressions(before: Forms, after: Forms) -> list[str]:
    """What ``after`` holds again that ``before`` no longer held (``Forms.ONCE_GONE``)."""
    return [f"brings back {name.replace('_', ' ')}, which an earlier pass removed"
            for name in Forms.ONCE_GONE if getattr(after, name) and not getattr(before, name)]


def verify(func: ir.PrimFunc) -> list[str]:
    return check(func)[0]


def forms(func: ir.PrimFunc) -> Forms:
    return check(func)[1]
