"""TileLang's ``tilelang.engine`` in part: its lowering (TVM's) is not here; what example programs
import from it, ``callback.register_cuda_postproc_callback`` (often left unused), is importable and
refuses to register anything, since tileworkbench's code generation has no hook for edited CUDA.
Anything else of it is an ``ImportError`` that says so (``not_here``)."""

from __future__ import annotations

from ..not_here import backend_part
from . import callback  # noqa: F401 - the one part that is here

__getattr__ = backend_part(__name__)
