"""The HTML report's measured-timeline section (``tw.timeline``), on a timeline recorded on the H200
(tests/fixtures/trace_timeline.json, scripts/record_timeline_trace.py): drawn on the planned
barrier timeline's rows, every wait a bar, the summary's numbers in its table."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from tileworkbench.report.html import render_fragment
from tileworkbench.report.svg import barrier_lanes
from tileworkbench.report.timeline_svg import MAX_DRAWN, measured_lanes, measured_svg, sm_activity_svg

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trace_timeline.json"


def _doc():
    return json.loads(FIXTURE.read_text())


def test_the_measured_rows_are_the_plans_rows_first():
    doc = _doc()
    measured = doc["timeline"]["measured"]
    lanes = measured_lanes(doc["barriers"], measured)
    planned = barrier_lanes(doc["barriers"])
    assert [(a, b) for kind, a, b in lanes if kind == "slot"][:len(planned)] == planned
    assert [a for kind, a, _ in lanes if kind == "stream"] == [
        f"{s['role']} (thread {s['thread']})" for s in measured["streams"]]
    svg = measured_svg(doc["barriers"], measured)
    labels = re.findall(r'class="tw-svg-label">([^<]+)</text>', svg)
    assert labels[:len(planned)] == [f"{name}[{slot}]" for name, slot in planned]


def test_every_wait_is_a_bar_and_every_other_event_a_mark():
    doc = _doc()
    measured = doc["timeline"]["measured"]
    svg = measured_svg(doc["barriers"], measured)
    assert svg.count('class="tw-measured-wait"') == min(len(measured["waits"]), MAX_DRAWN)
    marks = [e for e in measured["events"] if e["kind"] not in ("wait_begin", "wait_end")]
    assert svg.count('class="tw-measured-mark"') == len(marks) + 7  # and the legend's seven
    assert svg.count('data-role="producer"') == sum(w["role"] == "producer" for w in measured["waits"])


def test_the_report_shows_the_summary():
    doc = _doc()
    html = render_fragment(doc, uid="t")
    section = html[html.index('data-tw="measured"'):]
    s = doc["timeline"]["measured"]["summary"]
    assert f"{len(s['pipeline']['violations'])} of {s['pipeline']['waits_checked']} waits checked" in section
    assert f"{s['consumer_wait_on_loads_fraction']:.1%}" in section
    assert f"{s['sm_busy']['sms']} SMs" in section
    assert "streams left out" in section and f"{s['dropped_events']} / {s['unclosed_streams']} / 0" in section
    s["diverged_streams"] = 2  # a stream whose warp's lanes diverged is counted where it shows
    html = render_fragment(doc, uid="t")
    assert f"{s['dropped_events']} / {s['unclosed_streams']} / 2" in html[html.index('data-tw="measured"'):]


def test_a_reordered_grids_block_is_named_by_the_kernels_indices_too():
    doc = _doc()
    measured = doc["timeline"]["measured"]
    assert f"<p>Block {measured['block']} on SM" in render_fragment(doc, uid="t")  # a trace without them
    measured["block_indices"] = [62, 3, 0]
    assert f"<p>Block {measured['block']} (bx, by, bz = 62, 3, 0) on SM" in render_fragment(doc, uid="t")


def test_sections_follow_the_trace():
    doc = _doc()
    waiting = copy.deepcopy(doc)
    waiting["timeline"]["measured"] = None
    assert "kernel.timeline()</code> fills this section" in render_fragment(waiting, uid="t")
    plain = copy.deepcopy(doc)
    del plain["timeline"]
    assert 'data-tw="measured"' not in render_fragment(plain, uid="t")


def test_per_sm_activity_has_a_row_per_sm_and_a_bar_per_block():
    measured = _doc()["timeline"]["measured"]
    svg = sm_activity_svg(measured)
    blocks = measured["blocks"]
    assert svg.count('class="tw-sm-block"') == len(blocks)
    assert f"{len({b[1] for b in blocks})} SMs" in svg
    first = blocks[0]
    assert f"block {first[0]} on SM {first[1]}: {first[2] / 1e3:.1f}-{first[3] / 1e3:.1f} us" in svg
    assert 'data-tw="sm-activity"' in render_fragment(_doc(), uid="t")
