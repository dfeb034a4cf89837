"""reread_thread_index: each role's main loop reads the thread index again at its top.

Expects: codegen-phase IR (run after ``CODEGEN``'s passes, whose per-thread offsets it leaves where
they are); the launch's thread variable.
Guarantees: for the kernel's code outside any role and for each role of a warp-specialised block
(each ``T.ws`` scope, the compiler's producer and consumer sides), the largest loop that no other
loop holds and whose body uses the thread index (that role's main loop; unrolled loops and
``While`` loops are not taken) first binds ``<thread>_again = tw::thread_index()`` and reads the
thread index only through it: the thread index itself, a ``T.ws`` scope's index (``<thread>_again
- first``), and each name bound outside the loop to arithmetic on those (``tx_1 =
T.get_thread_binding()``, offsets), written out anew from ``<thread>_again``. The values are the same
(``%tid.x``), so the kernel computes what it computed; elsewhere it is as it was.
Why: NVVM lifts every value computed from the thread index alone out of the loop (loop-invariant
code motion): addresses, masks, per-thread offsets. In a kernel at ptxas's register limit those
values then live across the whole loop, and ptxas spills them and reloads each one from local
memory every iteration. ``tw::thread_index()`` is an ``asm volatile`` read, which NVVM may neither
lift nor merge with the first, so what is computed from it is computed again inside the loop (a
few integer instructions) instead of reloaded. In DeepSeek v3.2's sparse MLA backward (255
registers): spill stores 316 -> 72 bytes, the loop's local loads and stores 80 -> 24 an
iteration, the kernel 17.50 -> 15.73 ms on an H100; in its "seesaw" forward the spills were all
the producer's gather addresses (232 -> 0 bytes; docs/experiments.md, session 41). Where the
kernel needs every register that lifting saves it is worse (the fine-tuning backward: 2784 ->
6268 bytes), and where the lifted values fit in registers it only adds work to every iteration
(FlashAttention's backward: 8 -> 0 bytes of spills, 254 -> 192 registers, 12% slower), so it runs
only where asked for (``tw.reread_thread_index``: True) or where ``jit.lower``, given ptxas's
spills, compiles the kernel both ways and ptxas spills less with it at the same register count.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect, reassigned_vars, substitute
from .manager import register


def _pure(expr) -> bool:
    """Arithmetic on names and constants only: no loads, no calls (computing it again reads nothing)."""
    return not collect(expr, (ir.BufferLoad, ir.Call))


class _MainLoops:
    """Walks the kernel once: for each role (None: outside any; a ``ThreadScope``; a
    ``WarpSpecialize``'s producer or consumer side), its outermost loops that read the thread index,
    and for each loop the thread-derived names bound outside it (name -> its value in the thread
    index)."""

    def __init__(self, func: ir.PrimFunc):
        self.tx = func.launch.thread_var
        self.mutable = reassigned_vars(func.body)
        self.loops: dict = {}  # role -> [(loop, {name: value in tx})]
        self.walk(func.body, None, {self.tx: self.tx})

    def walk(self, node, role, derived: dict) -> dict:
        """``derived`` (name -> its value in the thread index) as it stands after ``node``."""
        if isinstance(node, ir.SeqStmt):
            for child in node.stmts:
                derived = self.walk(child, role, derived)
            return derived
        if isinstance(node, ir.LetStmt):
            names = collect(node.value, ir.Var)
            # written out again inside the loop, the value must mean there what it meant here: no
            # name in it (nor the name bound) assigned again in between
            if node.var not in self.mutable and _pure(node.value) and any(v in derived for v in names) and \
                    not any(v in self.mutable for v in names):
                return {**derived, node.var: substitute(node.value, derived)}
            return derived
        if isinstance(node, ir.For):
            if node.kind != "unrolled" and any(v in derived for v in collect(node.body, ir.Var)):
                self.loops.setdefault(role, []).append((node, derived))
            return derived  # loops inside it are not a main loop
        if isinstance(node, ir.While):
            return derived
        if isinstance(node, ir.ThreadScope):
            self.walk(node.body, node, {**derived, node.var: self.tx - node.first})
            return derived
        if isinstance(node, ir.WarpSpecialize):
            self.walk(node.producer, (node, "producer"), derived)
            self.walk(node.consumer, (node, "consumer"), derived)
            return derived
        for name in ("body", "then_body", "else_body"):
            child = getattr(node, name, None)
            if isinstance(child, ir.Stmt):
                self.walk(child, role, derived)
        return derived

    def main_loops(self) -> list:
        """Each role's largest such loop, with the names to write anew in it."""
        return [max(loops, key=lambda pair: len(collect(pair[0].body, ir.Stmt))) for loops in self.loops.values()]


def main_loops(func: ir.PrimFunc) -> list:
    """``[(loop, {thread-derived name: its value in the thread index})]``, one per role."""
    return _MainLoops(func).main_loops()


class _RereadIn(IRMutator):
    def __init__(self, loops: dict, tx: ir.Var):
        self.loops, self.tx = loops, tx

    def visit_For(self, node: ir.For):
        if node not in self.loops:
            return self.generic_visit(node)
        again = ir.Var(f"{self.tx.name}_again", self.tx.dtype)
        anew = {name: substitute(value, {self.tx: again}) for name, value in self.loops[node].items()}
        body = ir.seq([ir.LetStmt(again, ir.Call(ir.THREAD_INDEX, (), self.tx.dtype), loc=node.loc),
                       substitute(node.body, anew)])
        return ir.For(node.var, node.extent, body, node.kind, node.start, node.annotations, node.pipeline,
                      node.form, loc=node.loc)


def applies(func: ir.PrimFunc) -> bool:
    return bool(main_loops(func))


@register("reread_thread_index", "codegen")
def reread_thread_index(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    loops = dict(main_loops(func))
    if not loops:
        return func
    return func.with_body(_RereadIn(loops, func.launch.thread_var).visit(func.body))
