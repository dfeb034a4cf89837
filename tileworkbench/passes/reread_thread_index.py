"""reread_thread_index: the kernel's main loop reads the thread index again at its top.

Expects: codegen-phase IR (run after ``CODEGEN``'s passes, whose per-thread offsets it leaves where
they are); the launch's thread variable.
Guarantees: in the largest loop that no other loop holds and whose body uses the thread index
(the main loop; unrolled loops and ``While`` loops are not taken), the body first binds
``<thread>_again = tw::thread_index()`` and reads the thread index through that name only. The
value is the same (``%tid.x``), so the kernel computes what it computed; elsewhere it is as it was.
Why: NVVM lifts every value computed from the thread index alone out of the loop (loop-invariant
code motion): addresses, masks, per-thread offsets. In a kernel at ptxas's register limit those
values then live across the whole loop, and ptxas spills them and reloads each one from local
memory every iteration. ``tw::thread_index()`` is an ``asm volatile`` read, which NVVM may neither
lift nor merge with the first, so what is computed from it is computed again inside the loop (a
few integer instructions) instead of reloaded. In DeepSeek v3.2's sparse MLA backward (255
registers): spill stores 316 -> 72 bytes, the loop's local loads and stores 80 -> 24 an
iteration, the kernel 17.50 -> 15.73 ms on an H100 (docs/experiments.md, session 41). Where the
kernel needs every register that lifting saves it is worse (the fine-tuning backward: 2784 ->
6268 bytes), and where the lifted values fit in registers it only adds work to every iteration
(FlashAttention's backward: 8 -> 0 bytes of spills, 254 -> 192 registers, 12% slower), so it runs
only where asked for (``tw.reread_thread_index``: True) or where ``jit.lower``, given ptxas's
spills, compiles the kernel both ways and ptxas spills less with it at the same register count.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect, substitute, uses_var
from .manager import register

def main_loop(func: ir.PrimFunc) -> ir.For | None:
    """The largest serial loop no other loop holds whose body uses the thread index, else None."""
    tx = func.launch.thread_var
    outermost: list[ir.For] = []

    def walk(node):
        if isinstance(node, ir.For):
            if node.kind != "unrolled":
                outermost.append(node)
            return  # loops inside it are not the kernel's main loop
        if isinstance(node, ir.While):
            return
        for child in _children(node):
            walk(child)

    walk(func.body)
    candidates = [f for f in outermost if uses_var(f.body, tx)]
    return max(candidates, key=lambda f: len(collect(f.body, ir.Stmt)), default=None)


def _children(node) -> list:
    if isinstance(node, ir.SeqStmt):
        return list(node.stmts)
    return [getattr(node, name) for name in ("body", "then_body", "else_body", "producer", "consumer")
            if isinstance(getattr(node, name, None), ir.Stmt)]


class _RereadIn(IRMutator):
    def __init__(self, loop: ir.For, tx: ir.Var):
        self.loop, self.tx = loop, tx

    def visit_For(self, node: ir.For):
        if node is not self.loop:
            return self.generic_visit(node)
        again = ir.Var(f"{self.tx.name}_again", self.tx.dtype)
        body = ir.seq([ir.LetStmt(again, ir.Call(ir.THREAD_INDEX, (), self.tx.dtype), loc=node.loc),
                       substitute(node.body, {self.tx: again})])
        return ir.For(node.var, node.extent, body, node.kind, node.start, node.annotations, node.pipeline,
                      node.form, loc=node.loc)


def applies(func: ir.PrimFunc) -> bool:
    return main_loop(func) is not None


@register("reread_thread_index", "codegen")
def reread_thread_index(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    loop = main_loop(func)
    if loop is None:
        return func
    return func.with_body(_RereadIn(loop, func.launch.thread_var).visit(func.body))
