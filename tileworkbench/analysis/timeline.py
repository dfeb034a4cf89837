"""The measured timeline: a ``tw.timeline`` kernel's buffer decoded into events, and what they show.

``decode(words, grid, plan)`` reads the buffer the kernel wrote (``runtime/include/tw/timeline.h``;
``plan`` is ``TimelinePlan.to_json()``, as the trace keeps it) into columns of NumPy arrays, one
row per event, on one clock: each stream's ``clock64`` values are put on ``%globaltimer``'s
nanoseconds by the cycles per nanosecond of the whole launch (every stream's clock and global
timer between its open and close; one clock rate for the chip) and the global time and clock of
its block's first stream at its open. ``t_ns`` counts from the earliest open. ``%globaltimer``
ticks in steps of up to a microsecond on some GPUs, so times between SMs agree to about that;
within a block every stream runs on one SM's clock, read through one offset, and their order is
exact.

``summary(events, plan)`` derives what the plan cannot know: the time each role waits on each
barrier slot, the producer's lead over the consumers (in pipeline stages and nanoseconds),
pipeline bubbles (the consumers' share of time spent waiting for loads), per-SM activity, and
where the real order differs from the plan's (the barrier simulation runs the roles in lockstep,
producer iteration k then consumer iteration k) or from what the protocol requires (a wait that
ended before the load or arrival it waited for was issued: never on a correct GPU run).
Pure NumPy; no GPU needed. ``analysis/timeline_frame.py`` wraps the columns in a DataFrame.
"""

from __future__ import annotations

import numpy as np

from ..ir.records import TIMELINE_HEADER_WORDS, timeline_sampled_blocks, timeline_stream_words

HEADER_WORDS = TIMELINE_HEADER_WORDS
_GT_OPEN, _CLOCK_OPEN, _GT_CLOSE, _CLOCK_CLOSE, _COUNT, _SM, _BLOCK, _THREAD, _CLOSED, _DIVERGED = \
    0, 2, 4, 6, 8, 9, 10, 11, 12, 13
COLUMNS = ("block", "sm", "stream", "thread", "role", "seq", "site", "kind", "barrier", "slot", "parity", "line",
           "t_ns")


def _u64(h, at):
    return h[:, at].astype(np.uint64) | (h[:, at + 1].astype(np.uint64) << np.uint64(32))


def stream_headers(words, grid, plan: dict, wave: int | None = None) -> dict:
    """Per recorded stream: its block, SM, thread, open/close times and event count (arrays).
    ``wave``: the blocks resident at once in the launch; when blocks are sampled (every k-th, k > 1)
    and the grid has more than one wave, the last wave's blocks do not record (``tw/timeline.h``):
    their streams are ``skipped`` (never opened in this launch: whatever they hold is not its own)."""
    streams = len(plan["recorders"])
    stream_words = timeline_stream_words(plan["capacity"])
    every = _block_every(plan)
    blocks = int(np.prod(grid))
    sampled = timeline_sampled_blocks(blocks, every)
    w = np.asarray(words, dtype=np.uint32).reshape(sampled, streams, stream_words)
    h = w[:, :, :HEADER_WORDS].reshape(-1, HEADER_WORDS)
    index = np.arange(sampled * streams)
    block = (index // streams) * every
    skipped = (block >= blocks - wave) if every > 1 and wave and blocks > wave else np.zeros(len(index), bool)
    return {"words": w.reshape(-1, stream_words), "stream": index % streams,
            "block": block, "skipped": skipped, "sm": h[:, _SM].astype(np.int64),
            "thread": h[:, _THREAD].astype(np.int64), "count": h[:, _COUNT].astype(np.int64),
            "closed": (h[:, _CLOSED] == 1) & ~skipped, "diverged": h[:, _DIVERGED] == 1,
            "gt_open": _u64(h, _GT_OPEN), "gt_close": _u64(h, _GT_CLOSE),
            "clock_open": _u64(h, _CLOCK_OPEN), "clock_close": _u64(h, _CLOCK_CLOSE)}


def decode(words, grid, plan: dict, wave: int | None = None) -> tuple[dict, dict]:
    """(columns, facts): one row per event (``COLUMNS``), in stream order; facts: the streams that
    did not close (a kernel cut short), the streams whose recording warp's lanes did not run the
    same records (their events are left out: never seen in a kernel the pass instrumented, but
    checked), events dropped past the capacity, cycles per ns, the
    launch's span and each recorded block's SM and open/close times. ``wave``: the launch's blocks
    resident at once (``stream_headers``: the last wave of a sampled grid records nothing)."""
    hd = stream_headers(words, grid, plan, wave)
    closed = hd["closed"]
    clocks = (hd["clock_close"] - hd["clock_open"]).astype(np.float64)[closed]
    nanos = (hd["gt_close"] - hd["gt_open"]).astype(np.float64)[closed]
    cycles_per_ns = float(clocks.sum() / nanos.sum()) if nanos.sum() > 0 else 1.0
    t0 = int(hd["gt_open"][closed].min()) if closed.any() else 0
    sites = plan["sites"]
    kinds = np.array([s["kind"] for s in sites] or [""], dtype=object)
    barriers = np.array([s["barrier"] for s in sites] or [None], dtype=object)
    lines = np.array([s["line"] if s["line"] is not None else -1 for s in sites] or [-1], dtype=np.int64)
    roles = np.array([s["role"] for s in sites] or [""], dtype=object)
    has_slot = np.array([s["barrier"] is not None for s in sites] or [False])
    is_wait = np.isin(kinds, ("wait_begin", "wait_end"))
    shared = _SharedRecords(sites)
    # The streams of a block run on one SM's clock: each is put on the nanosecond axis through the
    # block's first stream's open (its global time and clock), so that their order is the clocks'
    # own, exact; a stream's own global time would add the timer's coarse steps between them.
    reference = {}
    for i in np.flatnonzero(closed):
        reference.setdefault(int(hd["block"][i]), i)
    parts = []
    dropped = 0
    for i in np.flatnonzero(closed & ~hd["diverged"]):  # a diverged warp's events are not to be trusted
        n = min(int(hd["count"][i]), plan["capacity"])
        dropped += int(hd["count"][i]) - n
        if n == 0:
            continue
        ev = hd["words"][i, HEADER_WORDS:HEADER_WORDS + 2 * n].reshape(n, 2)
        low = ev[:, 0].astype(np.int64)
        start = int(hd["clock_open"][i])
        steps = np.diff(np.concatenate(([start & 0xFFFFFFFF], low))) % (1 << 32)  # clock64's low bits, unwrapped
        clock = start + np.cumsum(steps)
        ref = reference[int(hd["block"][i])]
        t = (int(hd["gt_open"][ref]) - t0) + (clock - int(hd["clock_open"][ref])) / cycles_per_ns
        info = ev[:, 1].astype(np.int64)
        record, site = shared.rows(info & 0xFFFF)  # a shared record is a row per site it stands for
        info, t, rows = info[record], t[record], len(site)
        parts.append({"block": np.full(rows, hd["block"][i]), "sm": np.full(rows, hd["sm"][i]),
                      "stream": np.full(rows, hd["stream"][i]), "thread": np.full(rows, hd["thread"][i]),
                      "role": roles[site], "seq": np.arange(rows), "site": site, "kind": kinds[site],
                      "barrier": barriers[site], "slot": ((info >> 16) & 0x7FFF) * has_slot[site],
                      "parity": ((info >> 31) & 1) * is_wait[site], "line": lines[site], "t_ns": t})
    columns = {c: (np.concatenate([p[c] for p in parts]) if parts else np.array([])) for c in COLUMNS}
    blocks = {}
    for i in np.flatnonzero(closed):
        b = int(hd["block"][i])
        lo, hi = int(hd["gt_open"][i]) - t0, int(hd["gt_close"][i]) - t0
        if b in blocks:
            blocks[b] = (blocks[b][0], min(blocks[b][1], lo), max(blocks[b][2], hi))
        else:
            blocks[b] = (int(hd["sm"][i]), lo, hi)
    facts = {"unclosed_streams": int((~closed & ~hd["skipped"]).sum()),
             "diverged_streams": int((closed & hd["diverged"]).sum()),
             "dropped_events": dropped,
             "max_events_per_stream": int(hd["count"][closed].max()) if closed.any() else 0, "cycles_per_ns": cycles_per_ns,
             "span_ns": max((v[2] for v in blocks.values()), default=0), "blocks": blocks,
             "recorded_blocks": len(blocks), "every": plan["every"], "unit": plan.get("unit", "block"),
             "grid": [int(g) for g in grid]}
    return columns, facts


def _block_every(plan: dict) -> int:
    """Every how many blocks opened streams (a plan recorded before tile sampling has only ``every``)."""
    return int(plan.get("block_every", plan["every"]))


class _SharedRecords:
    """The sites each record stands for (``TimelineSite.recorded_by``): itself, then the sites
    whose record it is, in site order."""

    def __init__(self, sites: list):
        groups = [[i] for i in range(len(sites))]
        for i, s in enumerate(sites):
            if s.get("recorded_by") is not None:
                groups[s["recorded_by"]].append(i)
        self.size = np.array([len(g) for g in groups] or [1], dtype=np.int64)
        self.first = np.concatenate(([0], np.cumsum(self.size)[:-1]))
        self.members = np.array([m for g in groups for m in g] or [0], dtype=np.int64)

    def rows(self, head):
        """(index of each row's record, each row's site) for records of sites ``head``."""
        counts = self.size[head]
        record = np.repeat(np.arange(len(head)), counts)
        within = np.arange(len(record)) - np.repeat(np.cumsum(counts) - counts, counts)
        return record, self.members[self.first[head][record] + within]


def waits(columns: dict) -> dict:
    """Each wait as an interval, as columns: a ``wait_begin`` and the ``wait_end`` right after it in
    its stream (``block``, ``stream``, ``role``, ``barrier``, ``slot``, ``parity``, ``line``,
    ``begin_ns``, ``end_ns``)."""
    kind = columns["kind"]
    if len(kind) < 2:
        return {k: np.array([]) for k in ("block", "stream", "role", "barrier", "slot", "parity", "line", "site",
                                          "begin_ns", "end_ns")}
    i = np.flatnonzero((kind[:-1] == "wait_begin") & (kind[1:] == "wait_end")
                       & (columns["stream"][:-1] == columns["stream"][1:]) & (columns["block"][:-1] == columns["block"][1:]))
    out = {k: columns[k][i] for k in ("block", "stream", "role", "barrier", "slot", "parity", "line", "site")}
    out["begin_ns"], out["end_ns"] = columns["t_ns"][i], columns["t_ns"][i + 1]
    return out


def _stream_ranges(columns) -> list[tuple[int, int]]:
    """``[start, end)`` of each (block, stream)'s rows (decode keeps each stream's rows together)."""
    n = len(columns["kind"])
    if not n:
        return []
    change = np.flatnonzero((np.diff(columns["block"]) != 0) | (np.diff(columns["stream"]) != 0)) + 1
    edges = np.concatenate(([0], change, [n]))
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _loads(columns, lo: int, hi: int) -> dict:
    """A stream's loads: per barrier, the time of each load phase (a run of consecutive TMA issues
    on one slot counts once, at its last issue), in order."""
    kind = columns["kind"][lo:hi]
    i = np.flatnonzero(kind == "tma_issue")
    if not len(i):
        return {}
    barrier, slot, t = columns["barrier"][lo:hi][i], columns["slot"][lo:hi][i], columns["t_ns"][lo:hi][i]
    # the last issue of each run: the next row is not an issue on the same barrier slot
    last = np.ones(len(i), dtype=bool)
    last[:-1] = (i[1:] != i[:-1] + 1) | (barrier[1:] != barrier[:-1]) | (slot[1:] != slot[:-1])
    return {name: t[last & (barrier == name)] for name in set(barrier[last].tolist())}


def _arrivals(columns, lo: int, hi: int) -> dict:
    """A stream's arrivals: per barrier, their times in order."""
    i = np.flatnonzero(columns["kind"][lo:hi] == "arrive")
    barrier, t = columns["barrier"][lo:hi][i], columns["t_ns"][lo:hi][i]
    return {name: t[barrier == name] for name in set(barrier.tolist())}


def pipeline_order(columns: dict) -> dict:
    """Per block, the order the protocol requires and the plan assumed, against what happened.

    Loads: the k-th wait on a barrier that TMA fills ends after the k-th load on it was issued
    (by the stream that issues them). Releases: the k-th wait of a producer on a barrier the
    other role arrives on ends after every arriving stream's (k - slots)-th arrival (the first
    ``slots`` waits pass on fresh slots). Either the other way round is a violation. Also the
    producer's lead over each waiting stream when its wait began, in loads (the plan's lockstep
    order has a lead of one), and from a load's issue to the end of the wait for it, in ns."""
    leads, lead_ns, violations = [], [], []
    by_block: dict = {}
    for lo, hi in _stream_ranges(columns):
        by_block.setdefault(int(columns["block"][lo]), []).append((lo, hi))
    slots = {}  # barrier -> its slots (the most seen)
    for name in set(columns["barrier"][columns["kind"] == "arrive"].tolist()):
        slots[name] = int(columns["slot"][columns["barrier"] == name].max()) + 1

    def violated(block, stream, name, k, cause_ns, end_ns, what):
        if len(violations) < 50:
            violations.append({"block": block, "stream": stream, "barrier": name, "iteration": int(k),
                               "what": what, "cause_ns": float(cause_ns), "wait_end_ns": float(end_ns)})

    for block, spans in by_block.items():
        loads: dict = {}
        arrivals: dict = {}  # barrier -> [(stream, times)]
        for lo, hi in spans:
            for name, times in _loads(columns, lo, hi).items():
                loads.setdefault(name, times)  # the first stream that issues them
            for name, times in _arrivals(columns, lo, hi).items():
                arrivals.setdefault(name, []).append((int(columns["stream"][lo]), columns["role"][lo], times))
        for lo, hi in spans:
            stream, role = int(columns["stream"][lo]), columns["role"][lo]
            w = waits({c: v[lo:hi] for c, v in columns.items()})
            for name in set(w["barrier"].tolist()):
                mine = w["barrier"] == name
                begin, end = w["begin_ns"][mine], w["end_ns"][mine]
                if name in loads:
                    times = loads[name]
                    k = np.arange(min(len(begin), len(times)))
                    leads.append(np.searchsorted(times, begin[k], side="right") - k)
                    lead_ns.append(end[k] - times[k])
                    for j in np.flatnonzero(times[k] > end[k])[:5]:
                        violated(block, stream, name, j, times[j], end[j], "wait ended before its load was issued")
                elif role == "producer" and name in arrivals:
                    ring = slots[name]
                    for other, other_role, times in arrivals[name]:
                        if other_role == role:
                            continue
                        k = np.arange(ring, min(len(end), len(times) + ring))
                        late = times[k - ring] > end[k]
                        for j in k[late][:5]:
                            violated(block, stream, name, j, times[j - ring], end[j],
                                     f"wait ended before stream {other}'s arrival")
    lead = np.concatenate(leads) if leads else np.array([])
    late = np.concatenate(lead_ns) if lead_ns else np.array([])
    return {"waits_checked": int(len(lead)), "violations": violations,
            "lead_stages_median": float(np.median(lead)) if len(lead) else None,
            "lead_stages_min": float(lead.min()) if len(lead) else None,
            "ahead_of_lockstep": float((lead > 1).mean()) if len(lead) else None,
            "load_to_wait_end_ns_median": float(np.median(late)) if len(late) else None}


def summary(columns: dict, facts: dict) -> dict:
    """The derived numbers (module doc), as plain JSON values."""
    w = waits(columns)
    wait_ns = w["end_ns"] - w["begin_ns"]
    by_slot: dict = {}
    if len(wait_ns):  # grouped by (wait site, slot): a site has one role and barrier
        keys, first, inverse = np.unique(w["site"].astype(np.int64) * 65536 + w["slot"].astype(np.int64),
                                         return_index=True, return_inverse=True)
        totals, counts = np.bincount(inverse, weights=wait_ns), np.bincount(inverse)
        for j, at in enumerate(first):
            key = (w["role"][at], w["barrier"][at], int(w["slot"][at]))
            entry = by_slot.setdefault(key, {"role": key[0], "barrier": key[1], "slot": key[2], "waits": 0,
                                             "total_ns": 0.0})
            entry["waits"] += int(counts[j])
            entry["total_ns"] += float(totals[j])
    blocks = max(1, facts["recorded_blocks"])
    for entry in by_slot.values():
        entry["per_block_ns"] = entry["total_ns"] / blocks
    # Bubbles: the consumers' time waiting on barriers the producer loads, against their span.
    loaded = set(columns["barrier"][columns["kind"] == "tma_issue"]) if len(columns["kind"]) else set()
    on_loads = (w["role"] == "consumer") & np.isin(w["barrier"], list(loaded)) if len(wait_ns) else np.array([])
    consumer_wait = float(wait_ns[on_loads].sum()) if len(wait_ns) else 0.0
    consumer_span = _role_span(columns, "consumer")
    return {"events": int(len(columns["kind"])), "recorded_blocks": facts["recorded_blocks"],
            "span_ns": facts["span_ns"], "dropped_events": facts["dropped_events"],
            "unclosed_streams": facts["unclosed_streams"], "diverged_streams": facts.get("diverged_streams", 0),
            "cycles_per_ns": facts["cycles_per_ns"],
            "wait_by_slot": sorted(by_slot.values(), key=lambda e: (e["role"], str(e["barrier"]), e["slot"])),
            "consumer_wait_on_loads_fraction": consumer_wait / consumer_span if consumer_span else None,
            "pipeline": pipeline_order(columns), "sm_busy": _sm_busy(facts)}


def _role_span(columns, role) -> float:
    """Sum over a role's streams of the time from their first to their last event."""
    t = columns["t_ns"]
    return float(sum(t[hi - 1] - t[lo] for lo, hi in _stream_ranges(columns) if columns["role"][lo] == role))


def _sm_busy(facts) -> dict:
    """Per SM (of the recorded blocks): the blocks it ran, their busy time and its share of the span."""
    per: dict = {}
    for b, (sm, lo, hi) in facts["blocks"].items():
        entry = per.setdefault(int(sm), {"sm": int(sm), "blocks": 0, "busy_ns": 0})
        entry["blocks"] += 1
        entry["busy_ns"] += hi - lo
    span = facts["span_ns"] or 1
    for entry in per.values():
        entry["busy_fraction"] = entry["busy_ns"] / span
    rows = sorted(per.values(), key=lambda e: e["sm"])
    return {"sms": len(rows), "per_sm": rows}
