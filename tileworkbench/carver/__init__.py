"""TileLang's ``tilelang.carver`` in part: its hint generator (templates, the roller, its models of
GPU architectures) is not here, tune with ``tileworkbench.autotune(configs=...)``; what programs
import it for besides, the device queries of ``carver.arch.driver`` (``get_num_sms()`` for a
persistent kernel's grid), is. Anything else of it is an ``ImportError`` that says so (``not_here``)."""

from __future__ import annotations

from ..not_here import backend_part
from . import arch  # noqa: F401 - the one part that is here

__getattr__ = backend_part(__name__)
