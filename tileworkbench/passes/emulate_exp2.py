"""emulate_exp2: one float32 ``exp2`` in every k of an unrolled loop is computed without the MUFU unit.

Phase: codegen, after ``peel_first_iteration``; only where ``tw.exp2_emulation`` is k (2 to 64).
Expects: lowered IR; a softmax's exponentials as ``Call("exp2")`` of float32 inside loops of kind
``unrolled`` with a constant extent (a thread's fragment elements).
Guarantees: in each such loop of at least k iterations, ``exp2(x)`` becomes
``(j % k == k - 1) ? tw::exp2_poly(x) : exp2(x)``, ``j`` the loop's variable, so once NVVM unrolls
the loop one element in k takes ``tw::exp2_poly`` (``tw/common.h``: x rounded to an integer by
adding 1.5 * 2^23, a cubic for 2^f on [-0.5, 0.5], the integer added to the exponent bits: FADD,
FFMA and one LEA, relative error under 1e-4, x below -126 taken as -126) and the rest the MUFU's
``ex2``. Nothing else changes; without the config the pass is not in the pipeline. Like fast math (which
it requires, ``tl.enable_fast_math``, else a ``CompileError``) it is an approximation: for finite
x below 128 (a softmax's arguments are at most 0); NaN and larger x are not IEEE's there.
Why: at head dim 64 FlashAttention's exponentials keep the MUFU unit (16 a clock an SM) as busy as
the tensor cores (a 128 x 256 tile: 32768 exponentials, 2048 clocks; its two GEMMs, 8.4 MFLOP,
2048 clocks at 4096 FLOP a clock), so moving some of them to the FMA pipe (FlashAttention-4's
trick on Blackwell) can shorten each iteration; in the head-dim-64 kernel with k = 4 the main
loop's MUFU instructions go 130 -> 98 for 225 more FMA-pipe ones (nvcc 13.0, docs/experiments.md,
session 44). Not yet timed on a GPU: off by default.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import IRMutator
from ..target import PassConfigKey
from .manager import register

EXP2_POLY = "tw::exp2_poly"


class _Emulate(IRMutator):
    def __init__(self, every: int, fast_math: bool):
        self.every, self.fast_math = every, fast_math
        self.loops: list = []  # the unrolled loops around the node being visited, innermost last

    def visit_For(self, node: ir.For):
        extent = ir.const_int(node.extent)
        taken = node.kind == "unrolled" and extent is not None and extent >= self.every
        if taken:
            self.loops.append(node)
        try:
            return self.generic_visit(node)
        finally:
            if taken:
                self.loops.pop()

    def visit_Call(self, node: ir.Call):
        node = self.generic_visit(node)
        if node.name != "exp2" or node.dtype.name != "float32" or not self.loops:
            return node
        loop = self.loops[-1]
        if not self.fast_math:
            raise CompileError("tw.exp2_emulation approximates exp2 (NaN and x >= 128 are not IEEE's there), as "
                               "fast math does: set tl.enable_fast_math too", loop.loc)
        j = loop.var
        chosen = ir.cmp("==", j % self.every, self.every - 1)
        return ir.Select(chosen, ir.Call(EXP2_POLY, node.args, node.dtype), node, node.dtype)


def exp2_emulation(configs: dict) -> int | None:
    """k of ``tw.exp2_emulation`` (every k-th exponential emulated), or None."""
    value = configs.get(PassConfigKey.TW_EXP2_EMULATION.value)
    return value if value else None


@register("emulate_exp2", "codegen")
def emulate_exp2(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    every = exp2_emulation(ctx.configs)
    if every is None:
        return func
    return func.with_body(_Emulate(every, ctx.flag(PassConfigKey.TL_ENABLE_FAST_MATH)).visit(func.body))
