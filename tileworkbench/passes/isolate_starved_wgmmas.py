"""isolate_starved_wgmmas: in a kernel whose fragments outgrow a thread's registers, no mma.sync
gemm's work is scheduled into a wgmma gemm's wait.

Expects: tile-level IR after ``choose_shared_layouts`` (each ``T.gemm``'s ``plan`` says whether it
runs on wgmma).
Guarantees: the IR as it was, except that where the kernel's fragments and thread-local arrays
together need more registers a thread than it can have (``rules.registers.short_of_registers``),
each wgmma gemm that waits for its own instructions (``in_flight`` 0) and is followed, later in
its statement sequence, by an mma.sync gemm (``plan`` None) is followed by
``tw::schedule_fence()``. That call does nothing at run time (all lanes of the warp are converged
after the gemm's ``wgmma.wait_group``); ptxas moves no instruction across it. Elsewhere the
kernel is as it was, byte for byte.
Why: short of registers, ptxas runs each wgmma on its own and fills the wait with the next
statements' independent work. In TileLang's fine-tuning sparse MLA backward that work is the dKV
gemm's mma.sync instructions: their 128-register accumulator then lives beside the 128-register
dQ chunk the wgmma is writing, and both spill around every instruction. With the fence the dQ
chunk is stored before the dKV gemm begins: the main loop's local-memory instructions, weighted
by their loops' trip counts, go from 923 to 690 an iteration, and the script from 14.42 to 9.93
ms on the H100 (docs/experiments.md, session 40). Only that pattern has been measured, so only it
is fenced: the fence also keeps ptxas from overlapping other work with the wait, which a kernel
that fits its registers despite the count (TileLang's GDN delta backward: 244) may want.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import IRMutator, collect
from .manager import register
from .rules.registers import short_of_registers

SCHEDULE_FENCE = "tw::schedule_fence"


def _waits_for_itself_on_wgmma(stmt) -> bool:
    return isinstance(stmt, ir.Gemm) and stmt.plan is not None and stmt.in_flight == 0


def _runs_mma_sync(stmt) -> bool:
    return any(g.plan is None for g in collect(stmt, ir.Gemm))


class _FenceWaitedWgmmas(IRMutator):
    def visit_SeqStmt(self, node: ir.SeqStmt):
        stmts = [self.visit(s) for s in node.stmts]
        out = []
        for i, stmt in enumerate(stmts):
            out.append(stmt)
            if _waits_for_itself_on_wgmma(stmt) and any(_runs_mma_sync(s) for s in stmts[i + 1:]):
                out.append(ir.Evaluate(ir.Call(SCHEDULE_FENCE, ()), loc=stmt.loc))
        return ir.seq(out)


@register("isolate_starved_wgmmas", "tile")
def isolate_starved_wgmmas(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if not short_of_registers(func):
        return func
    return func.with_body(_FenceWaitedWgmmas().visit(func.body))
