"""Which tensor-core path a ``T.gemm`` takes, decided in one place (not a pass itself).

``wgmma_plan`` returns a :class:`WgmmaPlan` when the Hopper path applies — sm_90a, fp16/bf16
tiles in shared memory, float32 accumulator, whole warpgroups, tile sizes wgmma can take, and
operand tiles whose layout wgmma can read (A K-major, or M-major for ``transpose_A``; B K-major or
N-major; swizzled) — else
None, and the gemm stays on the ``mma.sync`` path. ``choose_shared_layouts`` (swizzle and panels
of the operand tiles), ``infer_fragment_layouts`` (accumulator layout) and ``lower_tile_ops``
(the call) all ask this function, so they always agree. ``panels_fit`` says whether TMA can fill
an operand tile stored in 128-byte panels, ``plan_fits`` whether it can fill both of a plan's
(``choose_shared_layouts`` and ``warp_specialize`` ask it).
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.records import WgmmaPlan
from ...target import PassConfigKey
from . import tma as tma_rules

SWIZZLE_SPANS = (32, 64, 128)


def _tile_shape(buf: ir.Buffer):
    shape = buf.static_shape()
    return shape[1:] if buf.attrs.get("versions", 1) > 1 else shape


def wgmma_plan(gemm: ir.Gemm, threads: int, ctx) -> WgmmaPlan | None:
    if ctx.target.arch != "sm_90a" or ctx.flag(PassConfigKey.TW_DISABLE_WGMMA):
        return None
    a, b, c = gemm.a.buffer, gemm.b.buffer, gemm.c.buffer
    if a.scope != "shared" or b.scope != "shared" or c.scope != "fragment" or c.dtype.name != "float32":
        return None
    if a.dtype.name not in ("float16", "bfloat16") or b.dtype != a.dtype:
        return None
    if threads % 128:
        return None
    a_shape, b_shape = _tile_shape(a), _tile_shape(b)
    k, m = a_shape if gemm.trans_a else a_shape[::-1]
    n = b_shape[0] if gemm.trans_b else b_shape[1]
    warpgroups = threads // 128
    if m % (64 * warpgroups) or k % 16 or n % 8 or not 8 <= n <= 256 or m % 8:
        return None
    a_major = {}
    if gemm.trans_a:  # A stored K x M: every 64-row block of M is one 128-byte swizzled panel
        a_span = 128
        a_major = {"a_k_major": False, "a_panel": 64 if m * 2 > 128 else 0}
    else:
        a_span = k * 2
        if a_span not in SWIZZLE_SPANS:
            return None
    if gemm.trans_b:  # B stored N x K: K-major
        if k * 2 not in SWIZZLE_SPANS:
            return None
        return WgmmaPlan(m, n, k, warpgroups, a_span, k * 2, 0, True, **a_major)
    if n * 2 in SWIZZLE_SPANS and k % 8 == 0:
        return WgmmaPlan(m, n, k, warpgroups, a_span, n * 2, 0, False, **a_major)
    if (n * 2) % 128 == 0 and k % 8 == 0:
        return WgmmaPlan(m, n, k, warpgroups, a_span, 128, 64, False, **a_major)
    return None


def plan_fits(plan: WgmmaPlan, gemm: ir.Gemm, pairs) -> bool:
    """TMA can fill every paneled operand tile of ``plan`` from the copies in ``pairs``."""
    return ((not plan.a_panel or panels_fit(gemm.a.buffer, plan.a_panel, pairs))
            and (not plan.b_panel or panels_fit(gemm.b.buffer, plan.b_panel, pairs)))


def panels_fit(buf: ir.Buffer, panel: int, pairs) -> bool:
    """TMA can move a tile stored as panels to or from each global region it is copied with: a
    2-D tensor of known width whose rows start on 16-byte boundaries (TMA's rule for strides).
    Rows a whole number of panels take one 3-D copy, others one copy per panel
    (``rules.tma.tma_copies``)."""
    for g_region, shared in pairs:
        if shared is not buf:
            continue
        g = g_region.buffer
        cols = ir.const_int(g.shape[-1])
        if cols is None or g.ndim != 2:
            return False
        if tma_rules.whole_panels(g_region, panel):
            continue
        (row_stride,) = tma_rules.global_stride_bytes(g)
        if not isinstance(row_stride, int) or tma_rules.misaligned_stride([row_stride]) is not None \
                or ir.const_int(g.effective_strides()[1]) != 1:
            return False
    return True
