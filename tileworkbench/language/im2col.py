"""``T.im2col``: convolution's image patches gathered into a GEMM tile.

``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`` fills the shared tile
``col`` (``block_M x block_K``) with rows ``nhw_step * block_M + i`` of the implicit patch matrix of
the NHWC image ``img`` (one row per output pixel ``(n, oh, ow)``) and its columns
``c_step * block_K + j`` (one per filter tap and channel ``(kh, kw, c)``, channels fastest, as a
``(KH, KW, C, F)`` weight tensor flattens to ``(KH * KW * C, F)``): the pixel
``img[n, oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad, c]``, zero where
that lies in the padding. Rows past the last output pixel read zero too (the kernel's
``T.Parallel`` accesses are kept inside ``img``, ``passes/guard_global_accesses``).

It is written here as the ``T.Parallel`` loop a user would write (TileLang lowers it to TMA's
im2col mode on Hopper; we keep the threads' loads, so a pipelined loop around it stays serial)."""

from __future__ import annotations

from ..frontend import builder as _b
from ..frontend.builder import error
from ..ir import nodes as ir


def _size(value, what: str) -> int:
    return _b.constant_int(value, f"T.im2col: {what}", low=0)


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None):
    if not isinstance(img, ir.Buffer) or img.scope != "global" or img.ndim != 4:
        raise error(f"T.im2col: the image must be a 4-D global tensor (N, H, W, C), not {_b.describe(img)}")
    if not isinstance(col, ir.Buffer) or col.scope != "shared" or col.ndim != 2:
        raise error(f"T.im2col: the patch tile must be a 2-D shared tile (block_M, block_K), not {_b.describe(col)}")
    if img.dtype != col.dtype:
        raise error(f"T.im2col: the image holds {img.dtype.name} and the tile {col.dtype.name}; they must match")
    dims = img.static_shape()
    if dims is None:
        raise error("T.im2col: the image's shape must be known when the kernel is compiled")
    K, S, D, P = (_size(v, w) for v, w in ((kernel, "kernel"), (stride, "stride"), (dilation, "dilation"),
                                            (pad, "pad")))
    if K < 1 or S < 1 or D < 1:
        raise error(f"T.im2col: kernel, stride and dilation must be at least 1, got {K}, {S}, {D}")
    _, H, W, C = dims
    OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1
    if OH < 1 or OW < 1:
        raise error(f"T.im2col: a {K}x{K} filter (dilation {D}, padding {P}) does not fit the {H}x{W} image")
    block_m, block_k = col.static_shape()
    nhw = _b.integer(nhw_step, "T.im2col: nhw_step")
    cs = _b.integer(c_step, "T.im2col: c_step")

    i, j = ir.Var(_b.current().fresh_name("i")), ir.Var(_b.current().fresh_name("j"))
    m = nhw * block_m + i
    k = cs * block_k + j
    n, oh, ow = m // (OH * OW), m // OW % OH, m % OW
    kh, kw, c = k // (C * K), k // C % K, k % C
    h, w = oh * S + kh * D - P, ow * S + kw * D - P
    inside = ir.logical_and(ir.cmp(">=", h, ir.const(0)), ir.cmp("<", h, ir.const(H)),
                            ir.cmp(">=", w, ir.const(0)), ir.cmp("<", w, ir.const(W)))
    pixel = ir.BufferLoad(img, (n, h, w, c), img.dtype)
    zero = ir.cast(ir.const(0.0 if img.dtype.is_float else 0), img.dtype)
    store = ir.BufferStore(col, (i, j), ir.Select(inside, pixel, zero, img.dtype))
    loc = _b.current().loc
    inner = ir.For(j, ir.const(block_k), store, "parallel", loc=loc)
    _b.current().emit(ir.For(i, ir.const(block_m), inner, "parallel", loc=loc))
