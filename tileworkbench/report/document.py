"""The trace document a view renders, from whatever the user holds.

Views read only the trace JSON (docs/trace-schema.md): an Artifact's and a Kernel's trace carries
the analyses already (``lower`` runs them), a Trace or a dict is taken as it is.
"""

from __future__ import annotations

import copy

from ..trace import SCHEMA, Trace


def trace_document(obj) -> dict:
    """The trace document of an Artifact, a Kernel, a Trace, a dict, or anything with ``.document``."""
    if isinstance(obj, dict):
        if obj.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document")
        return obj
    if isinstance(getattr(obj, "document", None), dict):
        return obj.document
    if isinstance(obj, Trace):
        return obj.to_dict()
    trace = getattr(obj, "trace", None)
    if isinstance(trace, Trace):
        return trace.to_dict()
    raise TypeError(f"cannot get a trace from {type(obj).__name__}")


def with_compare(obj, other=None, label: str | None = None) -> dict:
    """A shallow copy of ``obj``'s document with ``other`` attached as ``compare`` (the extension
    and the HTML report show the source diff); without ``other``, without ``compare``."""
    doc = copy.copy(trace_document(obj))
    doc.pop("compare", None)
    if other is not None:
        second = copy.copy(trace_document(other))
        second.pop("compare", None)
        doc["compare"] = {"label": label or second.get("kernel", {}).get("name", "compare"), "trace": second}
    return doc


def write_report(obj, path, compare=None, compare_label: str | None = None) -> str:
    """Write the self-contained HTML report of ``obj`` (Artifact, Kernel, Trace or trace dict)."""
    from .html import render_page

    html = render_page(with_compare(obj, compare, compare_label))
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(html)
    return str(path)
