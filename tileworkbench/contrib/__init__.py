"""TileLang's ``tilelang.contrib`` in part: its compiler wrappers (nvcc, hipcc, ...) are not here,
tileworkbench compiles with NVRTC; what example scripts import it for, ``nvcc``'s questions about
the GPU (``get_target_compute_version``), is. Anything else of it is an ``ImportError`` that says
so (``not_here``)."""

from __future__ import annotations

from ..not_here import backend_part
from . import nvcc  # noqa: F401 - the one part that is here

__getattr__ = backend_part(__name__)
