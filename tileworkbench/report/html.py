"""The static HTML view of a trace: one renderer for the notebook fallback and the report page.

It reads only the trace document (docs/trace-schema.md) and needs no network and no
JavaScript: passes and sources are ``<details>`` elements, timelines are inline SVG with
``<title>`` tooltips. Every section carries a ``data-tw`` attribute naming it, so tests (and
readers of the DOM) can find it.
"""

from __future__ import annotations

import difflib
import json
import uuid
from html import escape

from .timeline_svg import measured_svg, sm_activity_svg
from .svg import barriers_svg, smem_svg

SECTIONS = ("summary", "findings", "pass-list", "passes", "device-source", "host-source", "smem",
            "barriers", "tma", "compare")

CSS = """
.tw-report { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 13px; color: #111827;
  line-height: 1.4; max-width: 100%; }
.tw-report h2 { font-size: 17px; margin: 18px 0 6px; border-bottom: 1px solid #e5e7eb; }
.tw-report h3 { font-size: 14px; margin: 10px 0 4px; }
.tw-report pre { background: #f8fafc; border: 1px solid #e5e7eb; padding: 6px 8px; overflow: auto;
  max-height: 520px; font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; margin: 4px 0; }
.tw-report table { border-collapse: collapse; margin: 4px 0; }
.tw-report td, .tw-report th { border: 1px solid #e5e7eb; padding: 2px 8px; text-align: left; }
.tw-report th { background: #f3f4f6; }
.tw-report .tw-changed { font-weight: 600; }
.tw-report .tw-unchanged { color: #6b7280; }
.tw-report .tw-error, .tw-report .tw-sev-error { color: #b91c1c; font-weight: 600; }
.tw-report .tw-sev-warning { color: #b45309; }
.tw-report .tw-diff-add { background: #dcfce7; }
.tw-report .tw-diff-del { background: #fee2e2; }
.tw-report .tw-diff-hunk { color: #6d28d9; }
.tw-report details { margin: 3px 0; }
.tw-report summary { cursor: pointer; }
.tw-report .tw-scroll { overflow-x: auto; border: 1px solid #e5e7eb; }
.tw-report .tw-svg-small { font-size: 10px; fill: #374151; }
.tw-report .tw-svg-label { font-size: 11px; fill: #111827; font-family: ui-monospace, monospace; }
.tw-report .tw-note, .tw-report .tw-empty { color: #6b7280; }
.tw-report .tw-lineno { color: #9ca3af; user-select: none; }
"""


def unified_diff(before: str | None, after: str | None, from_label="before", to_label="after") -> list[str]:
    """The unified diff of two texts as lines (empty when they are equal)."""
    return list(difflib.unified_diff((before or "").splitlines(), (after or "").splitlines(),
                                     fromfile=from_label, tofile=to_label, lineterm=""))


def diff_html(lines: list[str]) -> str:
    if not lines:
        return '<pre class="tw-diff"><span class="tw-note">(no change)</span></pre>'
    out = []
    for line in lines:
        cls = ""
        if line.startswith("@@"):
            cls = "tw-diff-hunk"
        elif line.startswith("+") and not line.startswith("+++"):
            cls = "tw-diff-add"
        elif line.startswith("-") and not line.startswith("---"):
            cls = "tw-diff-del"
        text = escape(line)
        out.append((f'<span class="{cls}">{text}</span>' if cls else text) + "\n")
    return '<pre class="tw-diff">' + "".join(out) + "</pre>"


def code_html(text: str | None, kind: str, numbered: bool = True, first_line: int = 1) -> str:
    if text is None:
        return f'<p class="tw-empty">No {escape(kind)} source (lowering stopped earlier).</p>'
    lines = text.splitlines()
    width = len(str(len(lines) + first_line - 1))
    if numbered:
        body = "\n".join(f'<span class="tw-lineno">{i:>{width}}</span>  {escape(t)}'
                         for i, t in enumerate(lines, first_line))
    else:
        body = escape(text)
    return f'<pre class="tw-code" data-source="{escape(kind)}">{body}</pre>'


def _table(headers, rows) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(name: str, title: str, body: str, uid: str) -> str:
    return f'<section id="{uid}-{name}" data-tw="{name}"><h2>{escape(title)}</h2>{body}</section>'


# ---- sections --------------------------------------------------------------------------------


def _summary(doc: dict) -> str:
    k = doc.get("kernel", {})
    res = doc.get("resources", {}) or {}
    target = k.get("target") or {}
    configs = k.get("pass_configs") or {}
    rows = [
        ("kernel", escape(str(k.get("name")))),
        ("target", escape(f"{target.get('kind', '?')} {target.get('arch', '?')}"
                          + ("; run by the CPU interpreter, not a GPU" if k.get("interpreted") else ""))),
        ("source", escape(k.get("source_label") or f"{k.get('source_file')}:{k.get('source_line')}")),
        ("pass configs", escape(", ".join(f"{a}={b}" for a, b in configs.items()) or "none")),
        ("threads / grid", escape(f"{res.get('threads')} / {res.get('grid')}")),
        ("shared memory", escape(f"{res.get('smem_bytes')} bytes")),
        ("registers / spills", escape(f"{res.get('registers')} / {res.get('spills_bytes')}")),
    ]
    if res.get("thread_index_reread"):
        rows.append(("thread index read again", escape(describe_reread(res["thread_index_reread"]))))
    if res.get("warp_specialization"):
        rows.append(("warp specialisation", escape(describe_split(res["warp_specialization"]))))
    return _table(["property", "value"], rows)


def describe_split(split: dict) -> str:
    """What ``warp_specialize`` made of the pipelined loop (``resources.warp_specialization``), as
    the extension's header says it: the producer warpgroup beside the consumers, or why not."""
    if not split.get("applied"):
        return f"one role: {split.get('reason')}"
    shared = "; shared tiles placed by lifetime" if split.get("shares_bytes") else ""
    return (f"a producer warpgroup and {split.get('consumer_threads')} consumer threads, "
            f"{split.get('stages')} stage(s){shared}")


def describe_reread(reread: dict) -> str:
    """What the compile of a spilling kernel's second form (its main loops reading the thread
    index again, ``resources.thread_index_reread``) came to, as the extension's header says it."""
    if reread.get("error"):
        return f"not compiled: {reread['error']}"
    spills = f"spills {reread.get('spills_bytes_without', '?')} -> {reread.get('spills_bytes', '?')} B"
    registers = f"registers {reread.get('registers_without', '?')} -> {reread.get('registers', '?')}"
    return f"{'kept' if reread.get('kept') else 'not kept'} ({spills}, {registers})"


def _findings(doc: dict) -> str:
    findings = doc.get("findings") or []
    if not findings:
        return '<p class="tw-note">No findings.</p>'
    rows = []
    for i, f in enumerate(findings):
        sev = escape(str(f.get("severity")))
        where = ", ".join(f"{k} {f[k]}" for k in ("barrier", "slot", "iteration", "line") if f.get(k) is not None)
        rows.append((str(i), f'<span class="tw-sev-{sev}">{sev}</span>', escape(f.get("message", "")), escape(where)))
    return _table(["#", "severity", "message", "where"], rows)


def _pass_list(doc: dict, uid: str) -> str:
    rows = []
    for p in doc.get("passes", []):
        state = '<span class="tw-error">failed</span>' if p.get("error") else \
            ('<span class="tw-changed">changed</span>' if p.get("changed") else '<span class="tw-unchanged">-</span>')
        ms = p.get("time_ms")
        rows.append((str(p["index"]), f'<a href="#{uid}-pass-{p["index"]}">{escape(p["name"])}</a>',
                     escape(str(p.get("phase"))), state, "" if ms is None else f"{ms:.2f}"))
    return _table(["#", "pass", "phase", "IR", "ms"], rows)


def _passes(doc: dict, uid: str) -> str:
    out = []
    for p in doc.get("passes", []):
        before, after = p.get("ir_before") or "", p.get("ir_after") or ""
        diff = unified_diff(before, after, f"before {p['name']}", f"after {p['name']}")
        err = f'<pre class="tw-error">{escape(p["error"])}</pre>' if p.get("error") else ""
        label = f"{p['index']}. {p['name']} ({p.get('phase')})" + \
            (" - changed" if p.get("changed") else " - unchanged") + (" - FAILED" if p.get("error") else "")
        out.append(
            f'<details id="{uid}-pass-{p["index"]}" class="tw-pass" data-pass="{escape(p["name"])}">'
            f"<summary>{escape(label)}</summary>{err}"
            f'<details class="tw-pass-diff" data-tw="diff"{" open" if p.get("changed") else ""}>'
            f"<summary>diff to the previous pass (+{sum(1 for x in diff if x[:1] == '+' and x[:3] != '+++')} "
            f"-{sum(1 for x in diff if x[:1] == '-' and x[:3] != '---')})</summary>{diff_html(diff)}</details>"
            f'<details class="tw-pass-ir" data-tw="ir"><summary>IR after {escape(p["name"])}</summary>'
            f"{code_html(after, 'ir')}</details></details>")
    return "".join(out)


def _tma(doc: dict) -> str:
    descs = doc.get("tma_descriptors") or []
    if not descs:
        return '<p class="tw-note">No tensor-map descriptors (no TMA, or only descriptorless bulk copies).</p>'
    keys = ["name", "buffer", "data_type_name", "rank", "global_dims", "global_strides_bytes", "box_dims",
            "element_strides", "interleave", "swizzle", "l2_promotion", "oob_fill"]
    return _table(keys, [[escape(_tma_field(d, k)) for k in keys] for d in descs])


# CUtensorMapSwizzle codes as the shared-memory tab names them
_SWIZZLE_NAMES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}


def _tma_field(desc: dict, key: str) -> str:
    value = desc.get(key)
    if key == "swizzle" and value in _SWIZZLE_NAMES:
        return f"{_SWIZZLE_NAMES[value]} ({value})"
    return str(value)


def kernel_title(doc: dict) -> str:
    """What a report is about: the caller's label (the builder and its arguments) when the trace
    has one, else the kernel's name and where it is defined."""
    kernel = doc.get("kernel", {})
    if kernel.get("label"):
        return str(kernel["label"])
    name = str(kernel.get("name", "kernel"))
    if kernel.get("source_label"):
        return f"{name} ({kernel['source_label']})"
    where = kernel.get("source_file")
    return f"{name} ({where.rsplit('/', 1)[-1]}:{kernel.get('source_line')})" if where else name


def _smem(doc: dict) -> str:
    smem = doc.get("smem")
    if not smem:
        return '<p class="tw-empty">No shared-memory plan in this trace.</p>'
    keys = ["name", "kind", "dtype", "shape", "versions", "offset", "size_bytes", "align", "swizzle", "live"]
    table = _table(keys, [[escape(str(b.get(k))) for k in keys] for b in smem.get("buffers", [])])
    return f'<div class="tw-scroll" data-tw="smem-timeline">{smem_svg(smem)}</div>{table}'


def _barriers(doc: dict) -> str:
    sim = doc.get("barriers")
    if not sim:
        return '<p class="tw-empty">No barrier simulation in this trace.</p>'
    bars = ", ".join(f"{b['name']} ({b['slots']} slot(s), count {b['init_count']})" for b in sim.get("barriers", []))
    blocks = sim.get("blocks") or []
    walked = (f' (block ({", ".join(map(str, sim["block"]))}), the longest of the {len(blocks)} blocks simulated)'
              if len(blocks) > 1 and sim.get("block") else "")
    head = (f'<p>Barriers: {escape(bars) or "none"}. Iterations simulated: {sim.get("iterations")}{walked}. '
            f'{len(sim.get("events", []))} events; hover a mark for its details.</p>')
    waits = [e for e in sim.get("events", []) if e["kind"] == "wait"]
    rows = [(str(e["seq"]), escape(f"{e['barrier']}[{e['slot']}]"), escape(str(e.get("iteration"))),
             escape(str(e.get("stage"))), str(e.get("parity")), str(e.get("phase")),
             '<span class="tw-error">never</span>' if "finding" in e else "yes") for e in waits[:400]]
    table = ("<details><summary>waits (slot and parity per iteration)</summary>"
             + _table(["seq", "slot", "iteration", "stage", "parity", "phase", "completes"], rows) + "</details>")
    return (head + f'<div class="tw-scroll" data-tw="barrier-timeline">'
            f'{barriers_svg(sim, doc.get("findings"))}</div>' + table)


def _measured(doc: dict) -> str:
    """The measured timeline over the plan's rows and what it shows (``tw.timeline``)."""
    timeline = doc.get("timeline") or {}
    measured = timeline.get("measured")
    if not measured:
        return ('<p class="tw-note">This kernel records a timeline (tw.timeline); call it, then '
                "<code>kernel.timeline()</code> fills this section.</p>")
    s = measured.get("summary") or {}
    p = s.get("pipeline") or {}
    fraction = s.get("consumer_wait_on_loads_fraction")
    plan = timeline.get("plan") or {}
    every = plan.get("every", "?")
    sampled = f"each block's every {every}-th tile" if plan.get("unit") == "tile" else f"every {every}-th block"
    indices = measured.get("block_indices")
    named = f" (bx, by, bz = {', '.join(map(str, indices))})" if indices else ""
    head = (f"<p>Block {measured['block']}{named} on SM {measured['sm']}, as it ran (one of {s.get('recorded_blocks')} "
            f"recorded blocks, {sampled}). Rows are the planned "
            "timeline's barrier slots, then each recording warpgroup; hover a mark for its details.</p>")
    facts = [
        ("producer's lead (loads issued when a wait began; the plan's lockstep order: 1)",
         f"median {p.get('lead_stages_median')}, min {p.get('lead_stages_min')}"),
        ("waits ahead of the plan's lockstep order", _percent(p.get("ahead_of_lockstep"))),
        ("consumers' time waiting for loads (bubbles)", _percent(fraction)),
        ("load issued to wait ended (median)", f"{p.get('load_to_wait_end_ns_median') or 0:.0f} ns"),
        ("protocol violations (a wait ended before its load or arrival)",
         f"{len(p.get('violations') or [])} of {p.get('waits_checked')} waits checked"),
        ("SMs busy / span", f"{(s.get('sm_busy') or {}).get('sms')} SMs over {(s.get('span_ns') or 0) / 1e3:.1f} us"),
        ("dropped events / streams not closed / streams left out (their warp's lanes diverged)",
         f"{s.get('dropped_events')} / {s.get('unclosed_streams')} / {s.get('diverged_streams', 0)}"),
    ]
    slots = [(escape(e["role"]), escape(f"{e['barrier']}[{e['slot']}]"), str(e["waits"]),
              f"{e['per_block_ns'] / 1e3:.2f}") for e in s.get("wait_by_slot", [])]
    return (head + f'<div class="tw-scroll" data-tw="measured-timeline">{measured_svg(doc.get("barriers"), measured)}'
            "</div>" + _table(["measured", "value"], [(escape(a), escape(str(b))) for a, b in facts])
            + "<details><summary>time waiting per barrier slot</summary>"
            + _table(["role", "slot", "waits", "us per block"], slots) + "</details>"
            + "<details><summary>per-SM activity (the recorded blocks)</summary>"
            + f'<div class="tw-scroll" data-tw="sm-activity">{sm_activity_svg(measured)}</div></details>')


def _percent(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _compare(doc: dict) -> str:
    cmp = doc.get("compare")
    if not cmp:
        return ""
    other = cmp["trace"]
    parts = []
    for kind in ("device", "host"):
        diff = unified_diff(other.get("sources", {}).get(kind), doc.get("sources", {}).get(kind),
                            f"{cmp['label']} ({kind})", f"{doc['kernel'].get('name')} ({kind})")
        parts.append(f'<details open data-tw="compare-{kind}"><summary>{kind} source: diff from '
                     f'{escape(cmp["label"])}</summary>{diff_html(diff)}</details>')
    return "".join(parts)


KERNEL_MARKER = "// ---- kernel ----"  # where the generated CUDA's kernel starts, after the inlined headers


def _device_source(text: str | None) -> str:
    """The kernel's own code first; the inlined headers, hundreds of lines, folded after it."""
    at = text.find(KERNEL_MARKER) if text else -1
    if at <= 0:
        return (f"<details><summary>show {len((text or '').splitlines())} lines</summary>"
                f"{code_html(text, 'device')}</details>")
    headers, kernel = text[:at], text[at:]
    first = headers.count("\n") + 1
    return (f'<details data-tw="kernel-code"><summary>show the kernel (lines {first}-'
            f"{first + len(kernel.splitlines()) - 1})</summary>{code_html(kernel, 'device', first_line=first)}</details>"
            f'<details data-tw="inlined-headers"><summary>inlined tileworkbench headers (lines 1-{first - 1})</summary>'
            f"{code_html(headers, 'device-headers')}</details>")


# ---- entry points ----------------------------------------------------------------------------


def render_fragment(doc: dict, uid: str | None = None) -> str:
    """The workbench as one ``<div class="tw-report">`` with its own ``<style>`` (notebook output)."""
    uid = uid or "tw-" + uuid.uuid4().hex[:8]
    name = kernel_title(doc)
    sources = doc.get("sources") or {}
    parts = [
        f"<style>{CSS}</style>",
        f'<div class="tw-report" id="{uid}" data-tw="report">',
        f"<h1 style=\"font-size:19px;margin:4px 0\">tileworkbench: {escape(str(name))}</h1>",
        _section("summary", "Kernel", _summary(doc), uid),
        _section("findings", "Findings", _findings(doc), uid),
        _section("pass-list", "Passes", _pass_list(doc, uid), uid),
        _section("passes", "IR after each pass, and its diff", _passes(doc, uid), uid),
        _section("device-source", "Device source (CUDA C++)", _device_source(sources.get("device")), uid),
        _section("host-source", "Host source (Python launcher)",
                 f"<details><summary>show {len((sources.get('host') or '').splitlines())} lines</summary>"
                 f"{code_html(sources.get('host'), 'host')}</details>", uid),
        _section("smem", "Shared memory", _smem(doc), uid),
        _section("barriers", "mbarrier protocol", _barriers(doc), uid),
        *([_section("measured", "Measured timeline (tw.timeline)", _measured(doc), uid)] if doc.get("timeline") else []),
        _section("tma", "TMA descriptors", _tma(doc), uid),
    ]
    if doc.get("compare"):
        parts.append(_section("compare", f"Compared with {doc['compare']['label']}", _compare(doc), uid))
    parts.append("</div>")
    return "".join(parts)


def render_page(doc: dict, title: str | None = None) -> str:
    """A complete, self-contained HTML page (the ``tileworkbench report`` output).

    The trace itself is embedded as JSON in a ``<script type="application/json">`` block
    (data, not code) so the page can be re-read by tools."""
    title = title or f"tileworkbench report: {kernel_title(doc)}"
    data = json.dumps(doc).replace("</", "<\\/")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title></head><body>"
            + render_fragment(doc, uid="tw")
            + f'<script type="application/json" id="tw-trace-json">{data}</script>'
            + "</body></html>\n")
