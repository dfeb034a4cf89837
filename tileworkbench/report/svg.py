"""Inline SVG timelines of a trace: the shared-memory plan and the barrier protocol.

Plain SVG text with ``<title>`` tooltips, no scripts, so the same markup works in a static
report, in a notebook's HTML output and in a browser with JavaScript disabled.
"""

from __future__ import annotations

from html import escape

KIND_COLORS = {
    "init": "#6b7280", "expect_tx": "#d97706", "tma_load": "#2563eb", "arrive": "#059669",
    "phase_complete": "#7c3aed", "wait": "#0f766e",
}
STAGE_COLORS = {"setup": "#f3f4f6", "prologue": "#fef3c7", "steady": "#e0f2fe", "epilogue": "#ede9fe",
                "body": "#f9fafb"}
FINDING_COLOR = "#dc2626"
BUFFER_COLORS = ["#93c5fd", "#fca5a5", "#86efac", "#fcd34d", "#c4b5fd", "#f9a8d4", "#5eead4", "#fdba74"]
MAX_EVENTS_DRAWN = 1500


def _attrs(**kw) -> str:
    return " ".join(f'{k.rstrip("_").replace("_", "-")}="{escape(str(v))}"' for k, v in kw.items())


def _el(tag: str, body: str = "", **kw) -> str:
    return f"<{tag} {_attrs(**kw)}>{body}</{tag}>" if body else f"<{tag} {_attrs(**kw)}/>"


def _title(text: str) -> str:
    return f"<title>{escape(text)}</title>"


# ---- shared memory ---------------------------------------------------------------------------


def smem_svg(smem: dict | None) -> str:
    """Buffers as boxes: x = live range (statement index), y = byte offset; a capacity bar below."""
    if not smem or not smem.get("buffers"):
        return '<p class="tw-empty">No shared memory.</p>'
    buffers = smem["buffers"]
    width, left, right, top, plot_h = 760, 150, 20, 24, 220
    n_stmt = max(smem.get("statements") or 0, max(b["live"][1] + 1 for b in buffers), 1)
    total = max(smem.get("total_bytes") or 0, max((b["offset"] or 0) + b["size_bytes"] for b in buffers), 1)
    plot_w = width - left - right
    x = lambda i: left + plot_w * i / n_stmt
    span = total * 1.04  # headroom: barriers sit at the end and are only a few bytes tall
    y = lambda off: top + plot_h * off / span
    parts = [_el("rect", x=left, y=top, width=plot_w, height=plot_h, fill="#fafafa", stroke="#d1d5db")]
    for tick in range(0, n_stmt + 1, max(1, n_stmt // 10)):
        parts.append(_el("line", x1=x(tick), y1=top + plot_h, x2=x(tick), y2=top + plot_h + 4, stroke="#6b7280"))
        parts.append(_el("text", str(tick), x=x(tick), y=top + plot_h + 16, class_="tw-svg-small",
                         text_anchor="middle"))
    parts.append(_el("text", "live range (statement index in the lowered IR)", x=left + plot_w / 2,
                     y=top + plot_h + 32, text_anchor="middle", class_="tw-svg-small"))
    parts.append(_el("text", "byte offset", x=12, y=top + 10, class_="tw-svg-small"))
    label_y = -1e9  # labels of tiny neighbouring buffers (barriers) must not overlap
    for i, b in enumerate(buffers):
        off = b["offset"] or 0
        y0, y1 = y(off), y(off + b["size_bytes"])
        h = max(y1 - y0, 4)  # barriers are a few bytes: keep them visible
        x0 = x(b["live"][0])
        w = max(x(b["live"][1] + 1) - x0, 3)
        color = "#a3a3a3" if b["kind"] == "barrier" else BUFFER_COLORS[i % len(BUFFER_COLORS)]
        tip = (f"{b['name']} ({b['kind']}, {b['dtype']} {b['shape']}, {b['versions']} version(s)): "
               f"offset {off}, {b['size_bytes']} bytes, align {b['align']}, swizzle {b['swizzle']}, "
               f"live statements {b['live'][0]}-{b['live'][1]}")
        parts.append(f'<g class="tw-smem-buffer" data-name="{escape(b["name"])}">' + _title(tip) +
                     _el("rect", x=f"{x0:.1f}", y=f"{y0:.1f}", width=f"{w:.1f}", height=f"{h:.1f}", fill=color,
                         stroke="#374151", stroke_width="0.6") + "</g>")
        label_y = max(y0 + min(h, 14) / 2 + 4, label_y + 12)
        parts.append(_el("text", f"{b['name']}  @{off}", x=left - 6, y=f"{label_y:.1f}",
                         text_anchor="end", class_="tw-svg-small"))
    # capacity bar: used vs the device limit
    limit = smem.get("limit_bytes") or total
    bar_y = max(top + plot_h + 48, label_y + 16)
    used_w = plot_w * min(total / limit, 1.0)
    over = total > limit
    parts.append(_el("rect", x=left, y=bar_y, width=plot_w, height=14, fill="#e5e7eb"))
    parts.append(_el("rect", x=left, y=bar_y, width=f"{used_w:.1f}", height=14,
                     fill=FINDING_COLOR if over else "#2563eb"))
    parts.append(_el("text", "capacity", x=left - 6, y=bar_y + 11, text_anchor="end", class_="tw-svg-small"))
    parts.append(_el("text", f"{total} of {limit} bytes ({100 * total / limit:.1f}%)"
                     + ("  OVER THE LIMIT" if over else ""), x=left + 4, y=bar_y + 26, class_="tw-svg-small"))
    height = bar_y + 34
    return (f'<svg class="tw-smem-svg" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="shared-memory timeline">'
            + "".join(parts) + "</svg>")


# ---- barriers --------------------------------------------------------------------------------


def barrier_lanes(sim: dict) -> list:
    """The barrier timeline's lanes: every slot of every barrier, in declaration order, then any slot
    only an event names (the measured timeline draws on the same rows)."""
    lanes, seen = [], set()
    for bar in sim.get("barriers", []):
        for slot in range(bar.get("slots") or 0):
            if (bar["name"], slot) not in seen:
                seen.add((bar["name"], slot))
                lanes.append((bar["name"], slot))
    for e in sim.get("events", []):
        if (e["barrier"], e["slot"]) not in seen:
            seen.add((e["barrier"], e["slot"]))
            lanes.append((e["barrier"], e["slot"]))
    return lanes


def describe_event(e: dict, findings: list) -> str:
    facts = [f"{k} {e[k]}" for k in ("iteration", "stage", "scope", "bytes", "count", "parity", "phase", "line")
             if e.get(k) is not None]
    text = f"#{e['seq']} {e['kind']} on {e['barrier']}[{e['slot']}]" + (f": {', '.join(facts)}" if facts else "")
    if "finding" in e and 0 <= e["finding"] < len(findings):
        text += f" -- {findings[e['finding']]['message']}"
    return text


def _mark(kind: str, cx: float, cy: float, color: str) -> str:
    r = 6
    if kind == "init":
        return _el("rect", x=cx - r, y=cy - r, width=2 * r, height=2 * r, fill=color)
    if kind == "expect_tx":
        return _el("polygon", points=f"{cx},{cy - r} {cx + r},{cy + r} {cx - r},{cy + r}", fill=color)
    if kind == "tma_load":
        return _el("polygon", points=f"{cx},{cy - r} {cx + r},{cy} {cx},{cy + r} {cx - r},{cy}", fill=color)
    if kind == "phase_complete":
        return _el("rect", x=cx - 2, y=cy - r - 3, width=4, height=2 * r + 6, fill=color)
    if kind == "wait":
        return _el("circle", cx=cx, cy=cy, r=r, fill="white", stroke=color, stroke_width=3)
    return _el("circle", cx=cx, cy=cy, r=r, fill=color)


def _band_label(stage: str, iteration) -> str:
    if iteration is None:
        return stage
    return {"prologue": f"prologue {iteration}", "steady": f"k={iteration}",
            "epilogue": f"epilogue k={iteration}"}.get(stage, f"iter {iteration}")


def barriers_svg(sim: dict | None, findings: list | None = None) -> str:
    """One lane per barrier slot, one mark per event (x = sequence number), stage bands behind,
    wait parity above its mark and the completed phase above phase marks; offending events red."""
    if not sim or not sim.get("events"):
        return '<p class="tw-empty">No mbarrier operations.</p>'
    findings = findings or []
    events = sim["events"][:MAX_EVENTS_DRAWN]
    lanes = barrier_lanes(sim)
    row = {lane: i for i, lane in enumerate(lanes)}
    step, lane_h, left, top = 18, 40, 120, 42
    width = left + step * (len(events) + 1) + 20
    height = top + lane_h * len(lanes) + 30
    x = lambda seq: left + step * (seq + 0.5)
    parts = []
    # stage bands and iteration ticks
    start = 0
    for i in range(1, len(events) + 1):
        if i == len(events) or (events[i]["stage"], events[i]["iteration"]) != \
                (events[start]["stage"], events[start]["iteration"]):
            e0 = events[start]
            color = STAGE_COLORS.get(e0["stage"], "#ffffff")
            parts.append(_el("rect", x=left + step * start, y=top - 14, width=step * (i - start),
                             height=lane_h * len(lanes) + 14, fill=color, stroke="#ffffff"))
            label = _band_label(e0["stage"], e0["iteration"])
            parts.append(_el("text", label, x=left + step * start + 2, y=top - 4, class_="tw-svg-small"))
            start = i
    for lane, (name, slot) in enumerate(lanes):
        cy = top + lane_h * lane + lane_h / 2
        parts.append(_el("line", x1=left, y1=cy, x2=width - 20, y2=cy, stroke="#d1d5db"))
        parts.append(_el("text", f"{name}[{slot}]", x=left - 8, y=cy + 4, text_anchor="end", class_="tw-svg-label"))
    for e in events:
        cy = top + lane_h * row[(e["barrier"], e["slot"])] + lane_h / 2
        cx = x(e["seq"])
        bad = "finding" in e
        color = FINDING_COLOR if bad else KIND_COLORS.get(e["kind"], "#111827")
        note = ""
        if e["kind"] == "wait":
            note = _el("text", f"p{e.get('parity')}", x=cx, y=cy - 10, text_anchor="middle",
                       class_="tw-svg-small", fill=color)
        elif e["kind"] == "phase_complete":
            note = _el("text", f"ph{e.get('phase')}", x=cx, y=cy - 12, text_anchor="middle",
                       class_="tw-svg-small", fill=color)
        parts.append(f'<g class="tw-barrier-event" data-kind="{e["kind"]}" data-seq="{e["seq"]}"'
                     f'{" data-finding=" + chr(34) + str(e["finding"]) + chr(34) if bad else ""}>'
                     + _title(describe_event(e, findings)) + _mark(e["kind"], cx, cy, color) + note + "</g>")
    legend_y = height - 10
    lx = left
    for kind, color in KIND_COLORS.items():
        parts.append(_mark(kind, lx + 6, legend_y - 4, color))
        parts.append(_el("text", kind, x=lx + 16, y=legend_y, class_="tw-svg-small"))
        lx += 110
    note = ""
    if len(sim["events"]) > len(events):
        note = f'<p class="tw-note">Showing the first {len(events)} of {len(sim["events"])} events.</p>'
    return (f'<svg class="tw-barrier-svg" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="barrier timeline">' + "".join(parts)
            + "</svg>" + note)
