"""The workbench view of a trace in a notebook.

:class:`TraceView` displays as a MIME bundle: ``mime.TRACE_MIME`` (the
trace document, which the JupyterLab extension renders) and a self-contained ``text/html``
fallback (``tileworkbench.report``) for every other front end, plus a ``text/plain`` line.
"""

from __future__ import annotations

from ..mime import BENCH_MIME, TRACE_MIME
from ..report import render_fragment, render_page, with_compare
from ..errors import lab_dependency


class TraceView:
    """Displays a trace (and optionally a second one to diff against, as ``compare``)."""

    def __init__(self, trace, compare=None, compare_label: str | None = None):
        self.document = with_compare(trace, compare, compare_label)

    @property
    def name(self) -> str:
        return self.document.get("kernel", {}).get("name", "kernel")

    def _repr_mimebundle_(self, include=None, exclude=None):
        n_err = sum(1 for f in self.document.get("findings", []) if f.get("severity") == "error")
        plain = (f"<tileworkbench trace of {self.name}: {len(self.document.get('passes', []))} passes"
                 + (f", {n_err} error finding(s)" if n_err else "") + ">")
        return {TRACE_MIME: self.document, "text/html": render_fragment(self.document), "text/plain": plain}

    def to_html(self) -> str:
        """The full, self-contained report page."""
        return render_page(self.document)

    def save(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.to_html())
        return path


def show(obj, compare=None, compare_label=None) -> TraceView:
    """Display the workbench view of ``obj`` (Kernel, Artifact, Trace or trace dict) and return it."""
    display = lab_dependency("IPython.display", "tileworkbench.show").display

    view = TraceView(obj, compare, compare_label)
    display(view)
    return view


class BenchView:
    """A bench record (``mime.BENCH_MIME``) with an HTML table fallback."""

    def __init__(self, record: dict):
        if record.get("schema") != "tileworkbench.bench":
            raise ValueError("not a tileworkbench.bench record")
        self.record = record

    def _repr_mimebundle_(self, include=None, exclude=None):
        from html import escape

        rows = self.record.get("rows", [])
        keys = ["suite", "kernel", "dtype", "M", "N", "K", "ms", "tflops", "cublas_tflops", "ratio", "correct"]
        head = "".join(f"<th>{k}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(r.get(k)))}</td>" for k in keys) + "</tr>" for r in rows)
        machine = escape(", ".join(f"{k} {v}" for k, v in self.record.get("machine", {}).items()))
        html = f"<p>Recorded on: {machine}</p><table><tr>{head}</tr>{body}</table>"
        return {BENCH_MIME: self.record, "text/html": html,
                "text/plain": f"<tileworkbench bench record: {len(rows)} rows>"}
