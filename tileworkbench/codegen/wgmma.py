"""The ``wgmma.mma_async`` instruction for one shape, emitted as a small C++ functor.

An ``m64nNk16`` (FP8 and int8: ``k32``; TF32: ``k8``) wgmma writes N/2 float (int8: int) registers
per thread; spelling the asm out per N keeps the headers small (no giant switch over every N) and the
generated source honest about what it uses. The three forms (A from shared memory, A in registers,
both operands K-major: one-byte and TF32 operands) differ only in
their operands and immediates: ``_functor`` writes each.
"""

from __future__ import annotations

from ..ir.records import WGMMA_K_MAJOR_ONLY, wgmma_k
from ..ir.records import WGMMA_PTX_TYPES as _TYPES
from ..ir.records import wgmma_functor_name as functor_name
_INTEGER = ("int8", "uint8")  # s32 accumulators, and no scale immediates (integer wgmma has none)


def functor_source(n: int, dtype: str, b_k_major: bool, a_k_major: bool = True, a_registers: bool = False) -> str:
    regs, ptx_type = n // 2, _TYPES[dtype]
    b_major = "K" if b_k_major else "N"
    descriptors = '"l"(desc_a), "l"(desc_b)'
    if a_registers:  # A is four 32-bit registers of 16-bit pairs; no transpose of A
        a_regs = ", ".join(f"%{regs + i}" for i in range(4))
        return _functor(functor_name(n, dtype, b_k_major, a_registers=True),
                        f"D (64x{n}, f32) += A (64x16, registers) * B (16x{n}, {b_major}-major, shared memory)",
                        "float* d, unsigned int a0, unsigned int a1, unsigned int a2,\n"
                        "                                             unsigned int a3, unsigned long long desc_b",
                        n, 16, ptx_type, f"{{{a_regs}}}, %{regs + 4}", f", {0 if b_k_major else 1}",
                        '"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b)', 5)
    if dtype in WGMMA_K_MAJOR_ONLY:  # m64nNk32 (TF32: k8), both K-major: no transpose operands
        acc, k = ("s32" if dtype in _INTEGER else "f32"), wgmma_k(dtype)
        params = _DESCRIPTOR_PARAMS.replace("float*", "int*") if acc == "s32" else _DESCRIPTOR_PARAMS
        return _functor(functor_name(n, dtype, True),
                        f"D (64x{n}, {acc}) += A (64x{k}, {ptx_type}, K-major) * B ({k}x{n}, {ptx_type}, K-major), both "
                        "from shared memory", params, n, k, ptx_type, f"%{regs}, %{regs + 1}", "", descriptors, 2, acc)
    trans_a, trans_b = (0 if a_k_major else 1), (0 if b_k_major else 1)
    return _functor(functor_name(n, dtype, b_k_major, a_k_major),
                    f"D (64x{n}, f32) += A (64x16, {'K' if a_k_major else 'M'}-major) * B (16x{n}, {b_major}-major), "
                    "both from shared memory", _DESCRIPTOR_PARAMS, n, 16, ptx_type, f"%{regs}, %{regs + 1}",
                    f", {trans_a}, {trans_b}", descriptors, 2)


_DESCRIPTOR_PARAMS = "float* d, unsigned long long desc_a, unsigned long long desc_b"


def _functor(name: str, comment: str, params: str, n: int, k: int, ptx_type: str, a_b_operands: str,
             transposes: str, inputs: str, n_inputs: int, acc: str = "f32") -> str:
    """The functor: ``mma(params)`` issuing ``wgmma.m64n{n}k{k}`` on the N/2 accumulator registers
    (``acc``: f32, or s32 for integer operands), the A and B operands ``a_b_operands`` (from
    ``inputs``, ``n_inputs`` of them), scale-d from a predicate and, for floats, the scale and
    transpose immediates."""
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    constraint = "+r" if acc == "s32" else "+f"
    operands = ", ".join(f'"{constraint}"(d[{i}])' for i in range(regs))
    scales = "" if acc == "s32" else ", 1, 1"
    return (
        f"struct {name} {{\n"
        f"  // {comment}\n"
        f"  __device__ __forceinline__ static void mma({params}) {{\n"
        "    asm volatile(\n"
        '        "{\\n .reg .pred p;\\n"\n'
        f'        " setp.ne.b32 p, %{regs + n_inputs}, 0;\\n"\n'
        f'        " wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc}.{ptx_type}.{ptx_type} "\n'
        f'        "{{{outs}}}, {a_b_operands}, p{scales}{transposes};\\n}}\\n"\n'
        f"        : {operands}\n"
        f'        : {inputs}, "r"(1));\n'
        "  }\n"
        "};\n"
    )
