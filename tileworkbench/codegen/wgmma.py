"""The ``wgmma.mma_async`` instruction for one shape, emitted as a small C++ functor.

An ``m64nNk16`` wgmma writes N/2 float registers per thread; spelling the asm out per N keeps
the headers small (no giant switch over every N) and the generated source honest about what
it uses.
"""

from __future__ import annotations

from ..ir.records import wgmma_functor_name as functor_name

_TYPES = {"float16": "f16", "bfloat16": "bf16"}


def functor_source(n: int, dtype: str, b_k_major: bool, a_k_major: bool = True) -> str:
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
