"""``T.im2col``: convolution's image patches gathered into a GEMM tile.

``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`` fills the shared tile
``col`` (``block_M x block_K``) with rows ``nhw_step * block_M + i`` of the implicit patch matrix of
the NHWC image ``img`` (one row per output pixel ``(n, oh, ow)``) and its columns
``c_step * block_K + j`` (one per filter tap and channel ``(kh, kw, c)``, channels fastest, as a
``(KH, KW, C, F)`` weight tensor flattens to ``(KH * KW * C, F)``): the pixel
``img[n, oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad, c]``, zero where
that lies in the padding. Rows past the last output pixel read zero too (the kernel's
``T.Parallel`` accesses are kept inside ``img``, ``passes/guard_global_accesses``).

Where the tile's rows move in 16-byte chunks (whole-byte dtype, channels and ``block_K`` multiples
of a chunk) it is a tile operation, ``ir.Im2Col``: a pipelined loop loads it ahead with
``cp.async`` like its ``T.copy`` tiles (TileLang uses TMA's im2col mode instead); otherwise the
``T.Parallel`` loop a user would write, the threads' own loads."""

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
    block_m, block_k = col.static_shape()
    node = ir.Im2Col(ir.Region.full(img), ir.Region.full(col), _b.integer(nhw_step, "T.im2col: nhw_step"),
                     _b.integer(c_step, "T.im2col: c_step"), K, S, D, P, loc=_b.current().loc)
    if min(node.output_size()) < 1:
        raise error(f"T.im2col: a {K}x{K} filter (dilation {D}, padding {P}) does not fit the {H}x{W} image")
    if _moves_in_chunks(img, C, block_k, node.chunk):
        _b.current().emit(node)  # a tile op: pipelined loops load it ahead with cp.async
        return
    # Otherwise the T.Parallel loop a user would write, element by element.
    i, j = ir.Var(_b.current().fresh_name("i")), ir.Var(_b.current().fresh_name("j"))
    indices, inside = node.pixel(i, j)
    zero = ir.zero(img.dtype)
    pixel = ir.Select(inside, ir.BufferLoad(img, indices, img.dtype), zero, img.dtype)
    loc = _b.current().loc
    inner = ir.For(j, ir.const(block_k), ir.BufferStore(col, (i, j), pixel), "parallel", loc=loc)
    _b.current().emit(ir.For(i, ir.const(block_m), inner, "parallel", loc=loc))


def _moves_in_chunks(img: ir.Buffer, channels: int, block_k: int, chunk: int) -> bool:
    """Whether the tile's rows move in 16-byte chunks: whole bytes, a contiguous image, and chunks
    that never straddle two pixels (the channels and the tile's width multiples of a chunk)."""
    bits = img.dtype.storage_bits
    return (not img.dtype.packed and bits in (8, 16, 32) and img.strides is None
            and channels % chunk == 0 and block_k % chunk == 0)
