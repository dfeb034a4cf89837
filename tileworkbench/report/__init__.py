"""The static HTML report of a trace (``tileworkbench report``) and the notebook's HTML fallback."""

from .document import trace_document, with_compare, write_report
from .html import SECTIONS, render_fragment, render_page, unified_diff
from .svg import barriers_svg, smem_svg

__all__ = [
           "SECTIONS",
           "barriers_svg",
           "render_fragment",
           "render_page",
           "smem_svg",
           "trace_document",
           "unified_diff",
           "with_compare",
           "write_report",
]
