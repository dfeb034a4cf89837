"""Which tensor-core path a ``T.gemm`` takes, decided in one place (not a pass itself).

``wgmma_plan`` returns a :class:`WgmmaPlan` when the Hopper path applies — sm_90a, fp16/bf16
tiles in shared memory, float32 accumulator, whole warpgroups, tile sizes wgmma can take, and
operand tiles whose layout wgmma can read (K-major A; B K-major or N-major, swizzled) — else
None, and the gemm stays on the ``mma.sync`` path. ``choose_shared_layouts`` (swizzle and panels
of the operand tiles), ``infer_fragment_layouts`` (accumulator layout) and ``lower_tile_ops``
(the call) all ask this function, so they always agree. ``panels_fit`` says whether TMA can fill
a B tile stored in 128-byte panels (``choose_shared_layouts`` and ``warp_specialize`` ask it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.simplify import is_multiple_of
from ..target import PassConfigKey

SWIZZLE_SPANS = (32, 64, 128)


@dataclass(frozen=True)
class WgmmaPlan:
    m: int
    n: int
    k: int
    warpgroups: int  # along M
    a_span: int  # swizzle bytes of A's rows (K-major)
    b_span: int  # swizzle bytes of B
    b_panel: int  # elements per 128-byte panel of an N-major B wider than 128 bytes (0: none)
    b_k_major: bool


def _tile_shape(buf: ir.Buffer):
    shape = buf.static_shape()
    return shape[1:] if buf.attrs.get("versions", 1) > 1 else shape


def wgmma_plan(gemm: ir.Gemm, threads: int, ctx) -> WgmmaPlan | None:
    if ctx.target.arch != "sm_90a" or ctx.flag(PassConfigKey.TW_DISABLE_WGMMA):
        return None
    a, b, c = gemm.a.buffer, gemm.b.buffer, gemm.c.buffer
    if a.scope != "shared" or b.scope != "shared" or c.scope != "fragment" or c.dtype.name != "float32":
        return None
    if a.dtype.name not in ("float16", "bfloat16") or b.dtype != a.dtype or gemm.trans_a:
        return None
    if threads % 128:
        return None
    (m, k), b_shape = _tile_shape(a), _tile_shape(b)
    n = b_shape[0] if gemm.trans_b else b_shape[1]
    warpgroups = threads // 128
    if m % (64 * warpgroups) or k % 16 or n % 8 or not 8 <= n <= 256 or m % 8:
        return None
    a_span = k * 2
    if a_span not in SWIZZLE_SPANS:
        return None
    if gemm.trans_b:  # B stored N x K: K-major
        if k * 2 not in SWIZZLE_SPANS:
            return None
        return WgmmaPlan(m, n, k, warpgroups, a_span, k * 2, 0, True)
    if n * 2 in SWIZZLE_SPANS and k % 8 == 0:
        return WgmmaPlan(m, n, k, warpgroups, a_span, n * 2, 0, False)
    if (n * 2) % 128 == 0 and k % 8 == 0:
        return WgmmaPlan(m, n, k, warpgroups, a_span, 128, 64, False)
    return None


def wgmma_functor_name(n: int, dtype: str, b_k_major: bool) -> str:
    """Name of the generated C++ functor for one wgmma shape (codegen/wgmma.py emits it)."""
    short = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    return f"tw_wgmma_m64n{n}k16_{short}_{'kk' if b_k_major else 'kn'}"


def panels_fit(buf: ir.Buffer, panel: int, pairs) -> bool:
    """A paneled tile can be filled by TMA only from regions that start on a panel boundary of
    a global tensor whose rows are a whole number of panels."""
    for g_region, shared in pairs:
        if shared is not buf:
            continue
        cols = ir.const_int(g_region.buffer.shape[-1])
        if cols is None or cols % panel or g_region.buffer.ndim != 2:
            return False
        if not is_multiple_of(g_region.starts[-1], panel):
            return False
    return True
