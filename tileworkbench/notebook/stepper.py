"""An ipywidgets pass stepper, for front ends without the JupyterLab extension (VS Code,
classic Notebook, Colab): a slider and buttons over the passes, IR or diff to the previous pass.
"""

from __future__ import annotations

from html import escape

from ..report import trace_document
from ..report.html import diff_html, unified_diff
from ..errors import lab_dependency


class Stepper:
    """``Stepper(trace)``: widgets over the trace's passes. ``select(i)`` and ``set_mode("diff")``
    drive it from code; displaying it shows the widget box."""

    def __init__(self, trace, start: int | None = None, mode: str = "ir"):
        w = lab_dependency("ipywidgets", "the pass stepper")

        self.document = trace_document(trace)
        self.passes = self.document.get("passes", [])
        if not self.passes:
            raise ValueError("the trace has no passes to step through")
        last = len(self.passes) - 1
        self.slider = w.IntSlider(value=last if start is None else start, min=0, max=last, description="pass",
                                  continuous_update=True, layout=w.Layout(width="420px"))
        self.prev_button = w.Button(description="◀ prev", layout=w.Layout(width="80px"))
        self.next_button = w.Button(description="next ▶", layout=w.Layout(width="80px"))
        self.mode = w.ToggleButtons(options=[("IR after", "ir"), ("Diff", "diff")], value=mode)
        self.changed_only = w.Checkbox(value=False, description="skip unchanged passes", indent=False)
        self.header = w.HTML()
        self.view = w.HTML()
        self.prev_button.on_click(lambda _: self.step(-1))
        self.next_button.on_click(lambda _: self.step(+1))
        self.slider.observe(lambda _: self.render(), names="value")
        self.mode.observe(lambda _: self.render(), names="value")
        controls = w.HBox([self.prev_button, self.slider, self.next_button])
        self.box = w.VBox([controls, w.HBox([self.mode, self.changed_only]), self.header, self.view])
        self.render()

    # ---- driving ---------------------------------------------------------------------------
    @property
    def index(self) -> int:
        return self.slider.value

    def select(self, index_or_name) -> None:
        if isinstance(index_or_name, str):
            names = [p["name"] for p in self.passes]
            index_or_name = names.index(index_or_name)
        self.slider.value = int(index_or_name)

    def set_mode(self, mode: str) -> None:
        self.mode.value = mode

    def step(self, delta: int) -> None:
        i = self.slider.value + delta
        while self.changed_only.value and 0 <= i < len(self.passes) and not self.passes[i].get("changed"):
            i += delta
        if 0 <= i < len(self.passes):
            self.slider.value = i

    # ---- rendering -------------------------------------------------------------------------
    def render(self) -> None:
        p = self.passes[self.slider.value]
        state = "FAILED" if p.get("error") else ("changed" if p.get("changed") else "unchanged")
        ms = p.get("time_ms")
        self.header.value = (f"<b>{p['index']}. {escape(p['name'])}</b> &nbsp; phase {escape(str(p.get('phase')))}"
                             f", {state}" + ("" if ms is None else f", {ms:.2f} ms"))
        if self.mode.value == "diff":
            body = diff_html(unified_diff(p.get("ir_before"), p.get("ir_after"), "before", "after"))
        else:
            body = f'<pre class="tw-code">{escape(p.get("ir_after") or "")}</pre>'
        if p.get("error"):
            body = f'<pre style="color:#b91c1c">{escape(p["error"])}</pre>' + body
        style = ("<style>.tw-stepper pre{font:12px/1.35 ui-monospace,monospace;max-height:480px;overflow:auto;"
                 "background:#f8fafc;border:1px solid #e5e7eb;padding:6px}.tw-stepper .tw-diff-add{background:#dcfce7}"
                 ".tw-stepper .tw-diff-del{background:#fee2e2}.tw-stepper .tw-diff-hunk{color:#6d28d9}</style>")
        self.view.value = f'{style}<div class="tw-stepper">{body}</div>'

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.box._repr_mimebundle_(include=include, exclude=exclude)


def stepper(trace, start: int | None = None, mode: str = "ir") -> Stepper:
    """A pass stepper over ``trace`` (a Kernel, Artifact, Trace, TraceView or trace dict)."""
    return Stepper(trace, start, mode)
