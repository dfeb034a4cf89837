"""``tilelang.cuda.intrinsics``: the layout helpers TileLang programs annotate shared tiles with.
``make_mma_swizzle_layout(shared_buf)`` asks for the bank-conflict-free swizzle of a tile that
``mma``/``ldmatrix`` read, which is what the compiler gives every shared tile anyway
(``passes/choose_shared_layouts``): the same hint as ``tilelang.layout.make_swizzled_layout``."""

from __future__ import annotations

from ..layout import SwizzledLayout, make_swizzled_layout
from ..not_here import backend_part


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False) -> SwizzledLayout:
    return make_swizzled_layout(shared_buf)


__getattr__ = backend_part(__name__)
