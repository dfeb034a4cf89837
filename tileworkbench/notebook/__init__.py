"""The notebook workbench: ``%%tilekernel``, the trace view (MIME bundle + HTML fallback) and
the ipywidgets pass stepper. ``%load_ext tileworkbench`` calls :func:`register_magics`."""

from ..report import trace_document
from .display import BenchView, TraceView, show
from .magic import register_magics
from .stepper import Stepper, stepper

__all__ = ["BenchView", "Stepper", "TraceView", "register_magics", "show", "stepper", "trace_document"]
