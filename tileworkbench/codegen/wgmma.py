"""The ``wgmma.mma_async`` instruction for one shape, emitted as a small C++ functor.

An ``m64nNk16`` wgmma writes N/2 float registers per thread; spelling the asm out per N keeps
the headers small (no giant switch over every N) and the generated source honest about what
it uses.
"""

from __future__ import annotations

from ..ir.records import wgmma_functor_name as functor_name

_TYPES = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}


def functor_source(n: int, dtype: str, b_k_major: bool, a_k_major: bool = True, a_registers: bool = False) -> str:
    if a_registers:
        return _register_a_source(n, dtype, b_k_major)
    if dtype.startswith("float8"):
        return _fp8_source(n, dtype)
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    ptx_type = _TYPES[dtype]
    trans_a, trans_b = (0 if a_k_major else 1), (0 if b_k_major else 1)
    return (
        f"struct {functor_name(n, dtype, b_k_major, a_k_major)} {{\n"
        f"  // D (64x{n}, f32) += A (64x16, {'K' if a_k_major else 'M'}-major) * B (16x{n}, "
        f"{'K' if b_k_major else 'N'}-major), both from shared memory\n"
        "  __device__ __forceinline__ static void mma(float* d, unsigned long long desc_a, unsigned long long desc_b) {\n"
        "    asm volatile(\n"
        '        "{\\n .reg .pred p;\\n"\n'
        f'        " setp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
        f'        " wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} "\n'
        f'        "{{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, {trans_a}, {trans_b};\\n}}\\n"\n'
        f"        : {operands}\n"
        '        : "l"(desc_a), "l"(desc_b), "r"(1));\n'
        "  }\n"
        "};\n"
    )


def _register_a_source(n: int, dtype: str, b_k_major: bool) -> str:
    """The register-A form: A is four 32-bit registers of 16-bit pairs, no transpose of A."""
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    ptx_type = _TYPES[dtype]
    a_regs = ", ".join(f"%{regs + i}" for i in range(4))
    return (
        f"struct {functor_name(n, dtype, b_k_major, a_registers=True)} {{\n"
        f"  // D (64x{n}, f32) += A (64x16, registers) * B (16x{n}, {'K' if b_k_major else 'N'}-major, "
        "shared memory)\n"
        "  __device__ __forceinline__ static void mma(float* d, unsigned int a0, unsigned int a1, unsigned int a2,\n"
        "                                             unsigned int a3, unsigned long long desc_b) {\n"
        "    asm volatile(\n"
        '        "{\\n .reg .pred p;\\n"\n'
        f'        " setp.ne.b32 p, %{regs + 5}, 0;\\n"\n'
        f'        " wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} "\n'
        f'        "{{{outs}}}, {{{a_regs}}}, %{regs + 4}, p, 1, 1, {0 if b_k_major else 1};\\n}}\\n"\n'
        f"        : {operands}\n"
        '        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(1));\n'
        "  }\n"
        "};\n"
    )


def _fp8_source(n: int, dtype: str) -> str:
    """The FP8 form: m64nNk32, both operands K-major from shared memory (FP8 wgmma has no
    transpose operands)."""
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    ptx_type = _TYPES[dtype]
    return (
        f"struct {functor_name(n, dtype, True)} {{\n"
        f"  // D (64x{n}, f32) += A (64x32, {ptx_type}, K-major) * B (32x{n}, {ptx_type}, K-major), both from "
        "shared memory\n"
        "  __device__ __forceinline__ static void mma(float* d, unsigned long long desc_a, unsigned long long desc_b) {\n"
        "    asm volatile(\n"
        '        "{\\n .reg .pred p;\\n"\n'
        f'        " setp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
        f'        " wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{ptx_type}.{ptx_type} "\n'
        f'        "{{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1;\\n}}\\n"\n'
        f"        : {operands}\n"
        '        : "l"(desc_a), "l"(desc_b), "r"(1));\n'
        "  }\n"
        "};\n"
    )
