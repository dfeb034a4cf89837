"""The measured timeline (``timeline.measured`` of a trace, ``tw.timeline``) as inline SVG, drawn on
the planned barrier timeline's rows: one lane per barrier slot, in the plan's order and with its
labels, then one lane per recording warpgroup for what belongs to no barrier (wgmma, stores).
x is time in the recorded block, in microseconds. Plain SVG with ``<title>`` tooltips, as
``report/svg.py``'s views.
"""

from __future__ import annotations

from html import escape

from .svg import _el, _title, barrier_lanes

ROLE_COLORS = {"producer": "#d97706", "consumer": "#2563eb"}
MARKS = {"tma_issue": "#2563eb", "arrive": "#059669", "expect_tx": "#d97706", "wgmma_issue": "#7c3aed",
         "wgmma_wait": "#0f766e", "store_issue": "#be185d", "store_wait": "#9d174d"}
MAX_DRAWN = 3000  # waits and marks drawn; the rest are counted in a note


def _role_color(role: str) -> str:
    return ROLE_COLORS.get(role, "#4b5563")


def _mark(kind, cx, cy, tip) -> str:
    color, r = MARKS.get(kind, "#111827"), 4
    if kind == "tma_issue":
        shape = _el("polygon", points=f"{cx},{cy - r} {cx + r},{cy} {cx},{cy + r} {cx - r},{cy}", fill=color)
    elif kind == "expect_tx":
        shape = _el("polygon", points=f"{cx},{cy - r} {cx + r},{cy + r} {cx - r},{cy + r}", fill=color)
    elif kind in ("wgmma_wait", "store_wait"):
        shape = _el("rect", x=cx - 1, y=cy - r - 2, width=2, height=2 * r + 4, fill=color)
    else:
        shape = _el("circle", cx=cx, cy=cy, r=r, fill=color)
    return f'<g class="tw-measured-mark" data-kind="{kind}">{_title(tip)}{shape}</g>'


def measured_lanes(sim: dict | None, measured: dict) -> list:
    """The lanes: the plan's barrier slots (``svg.barrier_lanes``), any slot only the measurement has, then
    one per recording stream."""
    lanes = [("slot", name, slot) for name, slot in (barrier_lanes(sim) if sim else [])]
    seen = {(name, slot) for _, name, slot in lanes}
    for e in measured.get("events", []):
        if e.get("barrier") is not None and (e["barrier"], e["slot"]) not in seen:
            seen.add((e["barrier"], e["slot"]))
            lanes.append(("slot", e["barrier"], e["slot"]))
    for s in measured.get("streams", []):
        lanes.append(("stream", f"{s['role']} (thread {s['thread']})", s["stream"]))
    return lanes


def measured_svg(sim: dict | None, measured: dict | None) -> str:
    if not measured or not measured.get("events"):
        return '<p class="tw-empty">No measured events.</p>'
    lanes = measured_lanes(sim, measured)
    row = {(kind, a, b): i for i, (kind, a, b) in enumerate(lanes)}
    events, waits = measured["events"], measured.get("waits", [])
    end_ns = max([e["t_ns"] for e in events] + [w["end_ns"] for w in waits]) or 1.0
    width, left, right, top, lane_h = 1180, 170, 20, 44, 26
    plot_w = width - left - right
    height = top + lane_h * len(lanes) + 40
    x = lambda t: left + plot_w * t / end_ns
    parts = []
    for tick in range(11):
        t = end_ns * tick / 10
        parts.append(_el("line", x1=x(t), y1=top - 6, x2=x(t), y2=top + lane_h * len(lanes), stroke="#e5e7eb"))
        parts.append(_el("text", f"{t / 1e3:.1f}", x=x(t), y=top - 10, text_anchor="middle", class_="tw-svg-small"))
    parts.append(_el("text", "time from the block's start (us)", x=left, y=14, class_="tw-svg-small"))
    for i, (kind, a, b) in enumerate(lanes):
        cy = top + lane_h * i + lane_h / 2
        label = f"{a}[{b}]" if kind == "slot" else a
        parts.append(_el("line", x1=left, y1=cy, x2=width - right, y2=cy, stroke="#d1d5db"))
        parts.append(_el("text", label, x=left - 8, y=cy + 4, text_anchor="end", class_="tw-svg-label"))
    drawn = 0
    for w in waits[:MAX_DRAWN]:
        cy = top + lane_h * row[("slot", w["barrier"], w["slot"])] + lane_h / 2
        x0, x1 = x(w["begin_ns"]), x(w["end_ns"])
        tip = (f"{w['role']} waited on {w['barrier']}[{w['slot']}] for parity {w['parity']}: "
               f"{(w['end_ns'] - w['begin_ns']):.0f} ns (from {w['begin_ns'] / 1e3:.2f} us)")
        parts.append(f'<g class="tw-measured-wait" data-role="{escape(w["role"])}">{_title(tip)}'
                     + _el("rect", x=x0, y=cy - 5 + (3 if w["role"] == "producer" else -3), width=max(x1 - x0, 1.0),
                           height=6, fill=_role_color(w["role"]), opacity="0.75") + "</g>")
        drawn += 1
    for e in events[:MAX_DRAWN]:
        if e["kind"] in ("wait_begin", "wait_end"):
            continue
        key = ("slot", e["barrier"], e["slot"]) if e.get("barrier") is not None else ("stream", None, None)
        if key[0] == "stream":
            key = next(k for k in row if k[0] == "stream" and k[2] == e["stream"])
        cy = top + lane_h * row[key] + lane_h / 2
        where = f" on {e['barrier']}[{e['slot']}]" if e.get("barrier") is not None else ""
        tip = f"{e['role']} {e['kind']}{where} at {e['t_ns'] / 1e3:.3f} us" + (
            f" (line {e['line']})" if e.get("line") is not None else "")
        parts.append(_mark(e["kind"], x(e["t_ns"]), cy, tip))
    legend_y, lx = height - 10, left
    for role, color in ROLE_COLORS.items():
        parts.append(_el("rect", x=lx, y=legend_y - 8, width=14, height=6, fill=color))
        parts.append(_el("text", f"{role} waiting", x=lx + 18, y=legend_y, class_="tw-svg-small"))
        lx += 150
    for kind in MARKS:
        parts.append(_mark(kind, lx + 4, legend_y - 4, kind))
        parts.append(_el("text", kind, x=lx + 12, y=legend_y, class_="tw-svg-small"))
        lx += 108
    note = ""
    if len(waits) > MAX_DRAWN or len(events) > MAX_DRAWN or measured.get("truncated"):
        note = (f'<p class="tw-note">Drawn: the first {min(drawn, MAX_DRAWN)} waits and {MAX_DRAWN} events of the '
                f"block ({len(events)} kept in the trace{', truncated' if measured.get('truncated') else ''}).</p>")
    return (f'<svg class="tw-measured-svg" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="measured timeline">' + "".join(parts)
            + "</svg>" + note)


def sm_activity_svg(measured: dict | None) -> str:
    """Per-SM activity over the launch: one row per SM that ran a recorded block, a bar per block
    from its first stream's open to its last close (times from the launch's first open)."""
    blocks = (measured or {}).get("blocks") or []
    if not blocks:
        return '<p class="tw-empty">No recorded blocks.</p>'
    sms = sorted({b[1] for b in blocks})
    row = {sm: i for i, sm in enumerate(sms)}
    end_ns = max(b[3] for b in blocks) or 1
    width, left, right, top, row_h = 1180, 170, 20, 24, max(3, min(12, 480 // len(sms)))
    plot_w = width - left - right
    height = top + row_h * len(sms) + 20
    x = lambda t: left + plot_w * t / end_ns
    parts = [_el("text", "time from the launch's first block (us)", x=left, y=12, class_="tw-svg-small")]
    for tick in range(11):
        t = end_ns * tick / 10
        parts.append(_el("line", x1=x(t), y1=top, x2=x(t), y2=top + row_h * len(sms), stroke="#e5e7eb"))
        parts.append(_el("text", f"{t / 1e3:.0f}", x=x(t), y=height - 6, text_anchor="middle", class_="tw-svg-small"))
    parts.append(_el("text", f"{len(sms)} SMs", x=left - 8, y=top + 10, text_anchor="end", class_="tw-svg-label"))
    for block, sm, lo, hi in blocks:
        parts.append(f'<g class="tw-sm-block">{_title(f"block {block} on SM {sm}: {lo / 1e3:.1f}-{hi / 1e3:.1f} us")}'
                     + _el("rect", x=x(lo), y=top + row_h * row[sm], width=max(x(hi) - x(lo), 1.0),
                           height=max(row_h - 1, 2), fill="#60a5fa") + "</g>")
    return (f'<svg class="tw-sm-svg" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="per-SM activity">' + "".join(parts) + "</svg>")
