"""``tilelang.carver.arch``: of it only ``driver`` (the device queries); its architecture models
(``CUDA``, ``CDNA``, ...) drive TileLang's hint generator, which is not here."""

from __future__ import annotations

from ...not_here import backend_part
from . import driver  # noqa: F401 - the one part that is here

__getattr__ = backend_part(__name__)
