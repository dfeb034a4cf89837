"""TileLang's ``tilelang.layout`` names that programs pass to ``T.annotate_layout``.

Here the compiler chooses every shared tile's layout itself (the swizzle TMA and wgmma want,
``passes/choose_shared_layouts``), so a layout annotated on a shared tile is a hint it can take
without changing what the program computes; ``make_swizzled_layout`` says "swizzle this tile",
which is what it does anyway. ``Layout(shape, forward)`` on a global tensor says where each of its
elements lies in memory (``T.annotate_layout`` honours it: ``language/global_layouts.py``); on a
fragment a layout would decide which thread holds an element, and is refused."""

from __future__ import annotations

from dataclasses import dataclass

from .frontend.builder import describe, error
from .frontend.regions import Layout  # noqa: F401 - TileLang's tilelang.layout.Layout
from .ir import nodes as ir
from .not_here import module_getattr


@dataclass(frozen=True, eq=False)
class SwizzledLayout:
    """``make_swizzled_layout(buffer)``: the bank-conflict-free swizzle of a shared tile."""

    buffer: ir.Buffer


def make_swizzled_layout(buffer, k_major: bool = True, allow_pad: bool = True) -> SwizzledLayout:
    if not isinstance(buffer, ir.Buffer):
        raise error(f"make_swizzled_layout takes a shared tile, not {describe(buffer)}")
    return SwizzledLayout(buffer)


__getattr__ = module_getattr(__name__, "layout")  # TileLang's other layouts: an ImportError naming them
