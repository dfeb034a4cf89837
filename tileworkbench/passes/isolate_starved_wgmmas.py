"""isolate_starved_wgmmas: in a kernel whose fragments outgrow a thread's registers, nothing is
scheduled into a wgmma gemm's wait.

Expects: tile-level IR after ``choose_shared_layouts`` (each ``T.gemm``'s ``plan`` says whether it
runs on wgmma).
Guarantees: the IR as it was, except that where the kernel's fragments and thread-local arrays
together need more registers a thread than it can have (``rules.registers.short_of_registers``), each wgmma gemm that waits for its own instructions (``in_flight``
0) is followed by ``tw::schedule_fence()``. That call does nothing at run time (all lanes of the
warp are converged after the gemm's ``wgmma.wait_group``); ptxas moves no instruction across it.
Elsewhere the kernel is as it was, byte for byte.
Why: short of registers, ptxas runs each wgmma on its own and fills the wait with the next
statements' independent work. In TileLang's fine-tuning sparse MLA backward that work is the dKV
gemm's mma.sync instructions: their 128-register accumulator then lives beside the 128-register
dQ chunk the wgmma is writing, and both spill around every instruction. With the fence the dQ
chunk is stored before the dKV gemm begins: the main loop's local-memory instructions, weighted
by their loops' trip counts, go from 923 to 690 an iteration (docs/experiments.md, session 40).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import IRMutator
from .manager import register
from .rules.registers import short_of_registers

SCHEDULE_FENCE = "tw::schedule_fence"


class _FenceWaitedWgmmas(IRMutator):
    def visit_Gemm(self, node: ir.Gemm):
        if node.plan is None or node.in_flight != 0:
            return node
        return ir.seq([node, ir.Evaluate(ir.Call(SCHEDULE_FENCE, ()), loc=node.loc)])


@register("isolate_starved_wgmmas", "tile")
def isolate_starved_wgmmas(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if not short_of_registers(func):
        return func
    return func.with_body(_FenceWaitedWgmmas().visit(func.body))
