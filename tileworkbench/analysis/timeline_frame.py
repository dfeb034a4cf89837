"""``kernel.timeline()``'s result: the measured events as a pandas DataFrame that can also write
them as a Chrome-trace / Perfetto file and as the trace's ``timeline.measured`` document.

Imported only when a timeline is read (pandas is the ``[lab]`` extra; the image of a GPU machine
has it). The columns and derived numbers are ``analysis.timeline``'s.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .timeline import COLUMNS, summary, waits

MAX_TRACE_EVENTS = 6000  # events of one block the trace document keeps for the views
MAX_TRACE_BLOCKS = 4096  # blocks whose SM and times it keeps


def _barrier(value):
    """A barrier name, or None for an event without one (pandas holds those as a missing value)."""
    return value if isinstance(value, str) else None


class MeasuredTimeline(pd.DataFrame):
    """One row per recorded event (``block``, ``sm``, ``stream``, ``thread``, ``role``, ``seq``,
    ``site``, ``kind``, ``barrier`` (missing for wgmma and store events), ``slot``, ``parity``,
    ``line`` (-1 where unknown), ``t_ns``); ``facts`` holds what the decoding found (dropped events,
    streams that did not close, each block's SM and times) and, from ``kernel.timeline()``,
    ``block_indices``: each recorded block's ``[bx, by, bz]`` (``block`` is its number in dispatch
    order, which a reordered grid numbers otherwise; none for a persistent kernel's blocks)."""

    _metadata = ["facts", "_summary"]

    @property
    def _constructor(self):
        return MeasuredTimeline

    @classmethod
    def of(cls, columns: dict, facts: dict) -> "MeasuredTimeline":
        frame = cls({c: columns[c] for c in COLUMNS})
        frame.facts = facts
        frame._summary = summary(columns, facts)
        return frame

    def _columns(self) -> dict:
        return {c: self[c].to_numpy() for c in COLUMNS}

    def waits(self) -> pd.DataFrame:
        """Each mbarrier wait as an interval (``begin_ns``, ``end_ns``, ``wait_ns``)."""
        frame = pd.DataFrame(waits(self._columns()))
        frame["wait_ns"] = frame["end_ns"] - frame["begin_ns"]
        return frame

    def summary(self) -> dict:
        """Time waiting per barrier slot and role, the producer's lead, bubbles, per-SM activity and
        where the order differs from the plan (``analysis.timeline.summary``; of the frame as read,
        kept, or of a slice of it)."""
        whole = getattr(self, "_summary", None)
        if whole is not None and len(self) == whole["events"]:
            return whole
        return summary(self._columns(), self.facts)

    def to_chrome_trace(self, path=None) -> dict:
        """The events as Chrome-trace JSON (chrome://tracing, ui.perfetto.dev): a process per block
        (named with its SM), a thread per recording warpgroup, each wait a span and every other
        event an instant. Written to ``path`` when given; the document is returned."""
        events = []
        indices = self.facts.get("block_indices", {})
        for block, sm in self.groupby("block")["sm"].first().items():
            mine = indices.get(int(block))
            named = f"block {int(block)}" + (f": bx, by, bz = {tuple(mine)}" if mine is not None else "")
            events.append({"ph": "M", "name": "process_name", "pid": int(block),
                           "args": {"name": f"{named} (SM {int(sm)})"}})
        for (block, stream), rows in self.groupby(["block", "stream"]):
            events.append({"ph": "M", "name": "thread_name", "pid": int(block), "tid": int(stream),
                           "args": {"name": f"{rows['role'].iloc[0]} (thread {int(rows['thread'].iloc[0])})"}})
        w = self.waits()
        for r in w.itertuples(index=False):
            events.append({"ph": "X", "name": f"wait {r.barrier}[{r.slot}]", "cat": "wait", "pid": int(r.block),
                           "tid": int(r.stream), "ts": r.begin_ns / 1e3, "dur": (r.end_ns - r.begin_ns) / 1e3,
                           "args": {"parity": int(r.parity), "line": int(r.line)}})
        rest = self[~self["kind"].isin(["wait_begin", "wait_end"])]
        for r in rest.itertuples(index=False):
            name = r.kind if _barrier(r.barrier) is None else f"{r.kind} {r.barrier}[{r.slot}]"
            events.append({"ph": "i", "s": "t", "name": name, "cat": r.kind, "pid": int(r.block),
                           "tid": int(r.stream), "ts": r.t_ns / 1e3, "args": {"line": int(r.line)}})
        doc = {"traceEvents": events, "displayTimeUnit": "ns",
               "otherData": {"source": "tileworkbench tw.timeline", **_plain({k: v for k, v in self.facts.items() if k != "blocks"})}}
        if path is not None:
            with open(path, "w") as f:
                json.dump(doc, f)
        return doc

    def to_trace_json(self, block=None) -> dict:
        """``timeline.measured`` of the trace document (docs/trace-schema.md): one block's events and
        waits, times from that block's first open, every recorded block's SM and times, and the
        summary."""
        blocks = sorted(self.facts["blocks"])
        if block is None:
            block = blocks[0] if blocks else 0
        if block not in self.facts["blocks"]:
            unit = "tile of each block" if self.facts.get("unit") == "tile" else "block"
            raise ValueError(f"block {block} did not record a timeline (recorded: every {self.facts['every']}-th "
                             f"{unit}, {len(blocks)} blocks)")
        origin = self.facts["blocks"][block][1]
        mine = self[self["block"] == block]
        events = [{"stream": int(r.stream), "role": r.role, "kind": r.kind, "barrier": _barrier(r.barrier),
                   "slot": int(r.slot), "parity": int(r.parity), "line": int(r.line) if r.line >= 0 else None,
                   "t_ns": float(r.t_ns - origin)}
                  for r in mine.head(MAX_TRACE_EVENTS).itertuples(index=False)]
        w = self.waits()
        w = w[w["block"] == block]
        streams = mine.groupby("stream").agg(role=("role", "first"), thread=("thread", "first")).reset_index()
        return {"block": int(block), "block_indices": self.facts.get("block_indices", {}).get(int(block)),
                "sm": int(self.facts["blocks"][block][0]), "events": events,
                "truncated": len(mine) > MAX_TRACE_EVENTS,
                "waits": [{"stream": int(r.stream), "role": r.role, "barrier": r.barrier, "slot": int(r.slot),
                           "parity": int(r.parity), "begin_ns": float(r.begin_ns - origin),
                           "end_ns": float(r.end_ns - origin)} for r in w.itertuples(index=False)],
                "streams": [{"stream": int(r.stream), "role": r.role, "thread": int(r.thread)}
                            for r in streams.itertuples(index=False)],
                "blocks": [[int(b), *map(int, self.facts["blocks"][b])] for b in blocks[:MAX_TRACE_BLOCKS]],
                "summary": _plain(self.summary())}


def _plain(value):
    """JSON values (NumPy scalars and arrays as Python's)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
