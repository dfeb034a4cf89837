"""TileLang's ``tilelang.cuda``, its CUDA backend: of it only what programs pass to
``T.annotate_layout`` (``intrinsics.make_mma_swizzle_layout``, a hint: the compiler swizzles every
shared tile itself). Anything else of it (the backend's targets, code generation, passes) is an
``ImportError`` that says so, as an attribute and as an import at any depth (``not_here``)."""

from __future__ import annotations

from ..not_here import backend_part
from . import intrinsics  # noqa: F401 - the one part that is here

__getattr__ = backend_part(__name__)
