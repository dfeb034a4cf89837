"""Timeline mode without a GPU (issue 20): the pass ``instrument_timeline`` (where records go, who
records, the plan), the generated sources (byte-identical without the config, NVRTC-compiled for
sm_90a with it), the host launcher's buffer, config errors, and the decoding of a buffer laid out
as ``tw/timeline.h`` writes it (an encoder here mirrors the header) into events and derived numbers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.analysis.timeline import HEADER_WORDS, decode, pipeline_order, summary, waits
from tileworkbench.examples.gemm import matmul, matmul_tma_copy
from tileworkbench.ir.records import TimelinePlan


def _ws_gemm(n=1024):
    return matmul(n, n, n, 128, 256, 64, num_stages=3, threads=256)


def test_without_the_config_nothing_changes():
    plain = tw.lower(_ws_gemm())
    off = tw.lower(_ws_gemm(), pass_configs={"tw.timeline": False})
    assert plain.device_source == off.device_source and plain.host_source == off.host_source
    assert "tw_tl" not in plain.device_source and "Timeline" not in plain.device_source
    assert "instrument_timeline" not in plain.trace.pass_names() and plain.trace.timeline is None
    assert "timeline" not in plain.trace.to_dict()


def test_records_surround_the_plan_events():
    art = tw.lower(_ws_gemm(), pass_configs={"tw.timeline": 4})
    plan = art.trace.timeline["plan"]
    assert plan["every"] == 4 and plan["recorders"] == [0, 128, 256]
    assert plan["roles"] == ["consumer", "consumer", "producer"]
    kinds = [(s["role"], s["kind"], s["barrier"]) for s in plan["sites"]]
    assert ("producer", "wait_begin", "stage_empty") in kinds and ("producer", "tma_issue", "stage_full") in kinds
    assert ("consumer", "wait_end", "stage_full") in kinds and ("consumer", "wgmma_issue", None) in kinds
    assert ("consumer", "store_issue", None) in kinds
    src = art.device_source
    # a consumer wait: its begin recorded right before it, its end right after it
    begin = next(i for i, s in enumerate(plan["sites"]) if s["role"] == "consumer" and s["kind"] == "wait_begin")
    lines = src.splitlines()
    at = next(i for i, line in enumerate(lines) if f"tw_tl.record({begin}," in line)
    assert "stage_full[" in lines[at + 1] and ".wait(" in lines[at + 1]
    assert f"tw_tl.record({begin + 1}," in lines[at + 2]
    # every stream opened before the body and closed after it, by its thread
    for i, tx in enumerate((0, 128, 256)):
        assert src.index(f"tw_tl.open<{tx}, {i}>();") < src.index("stage_full[0].init") < \
            src.index(f"tw_tl.close<{tx}, {i}>();")
    # the producer's elected TMA issue is recorded before the election; an arrival before it happens
    # (both by the record of the wait's end before them: nothing between them waits)
    issue = next(i for i, s in enumerate(plan["sites"]) if s["kind"] == "tma_issue")
    record = plan["sites"][issue]["recorded_by"]
    assert plan["sites"][record]["kind"] == "wait_end" and plan["sites"][record]["role"] == "producer"
    assert src.index(f"tw_tl.record({record},") < src.index("if (tw::shuffle_elect<32>())") < src.index("tw::tma_load(")
    arrive = next(i for i, s in enumerate(plan["sites"]) if s["kind"] == "arrive" and s["role"] == "producer")
    arrival = re.search(r"stage_full\[[^]]*\]\.arrive\(\);", src)
    assert plan["sites"][arrive]["recorded_by"] == record
    assert arrival and src.index(f"tw_tl.record({record},") < arrival.start()
    # a persistent kernel samples tiles: every block opens its streams and records every 4th tile
    assert plan["unit"] == "tile" and plan["block_every"] == 1
    assert "unsigned int* __restrict__ tw_timeline" in src and "tw::Timeline<2048, 3> tw_tl(tw_timeline, 1, 4)" in src
    assert "TIMELINE = (1, 3, 4112)" in art.host_source
    assert "rt.timeline_buffer(KERNEL, grid, TIMELINE, stream)" in art.host_source  # a persistent grid
    assert "tw_timeline, tw_timeline_wave), stream)" in art.host_source  # passed, unused by tile sampling
    assert art.trace.pass_names()[-1] == "instrument_timeline"


def test_instrumented_kernels_compile_for_sm90a_without_spills():
    # The warp-specialised GEMM's producer warpgroup runs on 24 registers (setmaxnreg); the two a
    # recording lane holds its event in cost it one word, the tile loop's bound, kept in local
    # memory and read once a tile (outside the k loop). Nothing else spills.
    for func, configs, spills in ((_ws_gemm(), {}, 4),
                                  (matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128,
                                                   2), {"tl.disable_warp_specialized": True}, 0)):
        plain = tw.lower(func, pass_configs=configs, enable_device_compile=True)
        art = tw.lower(func, pass_configs={**configs, "tw.timeline": True}, enable_device_compile=True)
        assert art.nvrtc.cubin and plain.nvrtc.spills_bytes == 0 and art.nvrtc.spills_bytes <= spills


@pytest.mark.parametrize("value", ["yes", -1, 2.5])
def test_bad_timeline_values_are_refused(value):
    with pytest.raises(tw.CompileError, match="tw.timeline"):
        tw.lower(_ws_gemm(), pass_configs={"tw.timeline": value})


def test_timeline_and_debug_mode_are_refused_together():
    with pytest.raises(tw.CompileError, match="cannot be combined"):
        tw.lower(_ws_gemm(), pass_configs={"tw.timeline": True, "tw.debug_barrier_timeout": 1.0})


def test_capacity_is_checked():
    with pytest.raises(tw.CompileError, match="timeline_capacity"):
        tw.lower(_ws_gemm(), pass_configs={"tw.timeline": True, "tw.timeline_capacity": 0})
    art = tw.lower(_ws_gemm(), pass_configs={"tw.timeline": True, "tw.timeline_capacity": 64})
    assert art.trace.timeline["plan"]["capacity"] == 64


# ---- decoding a buffer as tw/timeline.h lays it out -----------------------------------------------
SITES = [("wait_begin", "producer", "empty"), ("wait_end", "producer", "empty"), ("tma_issue", "producer", "full"),
         ("arrive", "producer", "full"), ("wait_begin", "consumer", "full"), ("wait_end", "consumer", "full"),
         ("arrive", "consumer", "empty")]


def _plan(every=1, capacity=64):
    sites = tuple(tw.ir.records.TimelineSite(k, r, b, 10 + i, "") for i, (k, r, b) in enumerate(SITES))
    return TimelinePlan(every, capacity, (0, 128), ("consumer", "producer"), sites).to_json()


def _encode(plan, blocks, streams_events, clock_start=(1 << 32) - 500, ghz=2.0):
    """Words as the kernel writes them: ``streams_events[block][stream]`` = [(cycles after open, site,
    slot, parity)]; each stream opens at global time 1000 + block * 10000 ns."""
    words_per_stream = HEADER_WORDS + 2 * plan["capacity"]
    sampled = -(-blocks // plan["every"])
    w = np.zeros((sampled, len(plan["recorders"]), words_per_stream), dtype=np.uint32)
    for sb in range(sampled):
        for s in range(len(plan["recorders"])):
            events = streams_events[sb][s]
            gt0 = 1000 + sb * 10000
            last = max((e[0] for e in events), default=0) + 100
            h = w[sb, s]
            for at, v in ((0, gt0), (2, clock_start), (4, gt0 + int(last / ghz)), (6, clock_start + last)):
                h[at], h[at + 1] = v & 0xFFFFFFFF, v >> 32
            h[8], h[9], h[10], h[11], h[12] = len(events), 3 + sb, sb * plan["every"], plan["recorders"][s], 1
            for i, (cycles, site, slot, parity) in enumerate(events[:plan["capacity"]]):
                h[HEADER_WORDS + 2 * i] = (clock_start + cycles) & 0xFFFFFFFF
                h[HEADER_WORDS + 2 * i + 1] = site | slot << 16 | parity << 31
    return w.reshape(-1)


def _pipeline(iterations=6, slots=2, consumer_start=300):
    """A producer that loads slot k % slots once the consumer released it, and a consumer that waits
    for each load and releases its slot (cycles after each stream's open)."""
    producer, consumer, released = [], [], []
    p, c = 0, consumer_start
    for k in range(iterations):  # producer k needs the release of k - slots, consumer k the load of k
        end = max(p, released[k - slots] + 1) if k >= slots else p
        producer += [(p, 0, k % slots, 0), (end, 1, k % slots, 0), (end + 5, 2, k % slots, 0),
                     (end + 6, 3, k % slots, 0)]
        p = end + 20
        done = max(c, end + 15)
        consumer += [(c, 4, k % slots, (k // slots) % 2), (done, 5, k % slots, (k // slots) % 2),
                     (done + 60, 6, k % slots, 0)]
        released.append(done + 60)
        c = done + 65
    return [consumer, producer]


def test_decode_puts_events_on_one_clock_across_the_32_bit_wrap():
    plan = _plan()
    words = _encode(plan, 2, [_pipeline(), _pipeline()])
    columns, facts = decode(words, (2, 1, 1), plan)
    assert facts["cycles_per_ns"] == pytest.approx(2.0, rel=1e-2)
    assert facts["unclosed_streams"] == 0 and facts["dropped_events"] == 0 and facts["recorded_blocks"] == 2
    first = (columns["block"] == 0) & (columns["stream"] == 1)
    assert columns["t_ns"][first][:4] == pytest.approx([0, 0, 2.5, 3], abs=0.1)  # cycles / 2 GHz, past the wrap
    second = (columns["block"] == 1) & (columns["stream"] == 1)
    assert columns["t_ns"][second][0] == pytest.approx(10000, abs=1)
    assert set(columns["role"][columns["stream"] == 0]) == {"consumer"}
    assert list(columns["line"][:3]) == [14, 15, 16]


def test_pipeline_order_and_protocol_checks():
    plan = _plan()
    consumer, producer = _pipeline(consumer_start=0)
    columns, facts = decode(_encode(plan, 1, [[consumer, producer]]), (1, 1, 1), plan)
    order = pipeline_order(columns)
    assert order["violations"] == [] and order["waits_checked"] == 6
    assert order["lead_stages_median"] >= 1  # the load was issued when each wait began
    s = summary(columns, facts)
    assert s["events"] == 6 * 7 and s["sm_busy"]["sms"] == 1
    slot0 = next(e for e in s["wait_by_slot"] if e["role"] == "consumer" and e["slot"] == 0)
    waited = sum(consumer[3 * k + 1][0] - consumer[3 * k][0] for k in (0, 2, 4)) / 2.0  # cycles at 2 GHz
    assert waited > 0 and slot0["waits"] == 3 and slot0["total_ns"] == pytest.approx(waited, abs=0.5)
    w = waits(columns)
    assert len(w["begin_ns"]) == 12 and (w["end_ns"] >= w["begin_ns"]).all()


def test_streams_of_a_block_share_one_clock_offset_whatever_their_global_timers_read():
    # Found on the H200: a producer's wait ended 3 ns after the consumers' arrival by their clocks,
    # but each stream put on the global timer through its own (coarse) reading came out 3 ns before.
    plan = _plan()
    consumer, producer = _pipeline()
    words = _encode(plan, 1, [[consumer, producer]]).copy()
    exact, _ = decode(words, (1, 1, 1), plan)
    stream_words = HEADER_WORDS + 2 * plan["capacity"]
    for at in (0, 4):  # the producer's stream read the global timer 700 ns early, at its open and close
        words[stream_words + at] -= 700
    columns, _ = decode(words, (1, 1, 1), plan)
    assert np.allclose(columns["t_ns"] - columns["t_ns"][0], exact["t_ns"] - exact["t_ns"][0])
    assert pipeline_order(columns)["violations"] == []


def test_a_wait_that_ends_before_its_load_is_a_violation():
    plan = _plan()
    consumer, producer = _pipeline()
    consumer[0] = (0, *consumer[0][1:])
    consumer[1] = (1, *consumer[1][1:])  # the first wait ends before the producer issued its load
    columns, _ = decode(_encode(plan, 1, [[consumer, producer]]), (1, 1, 1), plan)
    violations = pipeline_order(columns)["violations"]
    assert violations and violations[0]["what"] == "wait ended before its load was issued"


def test_dropped_events_and_unclosed_streams_are_counted():
    plan = _plan(capacity=4)
    words = _encode(plan, 1, [_pipeline(iterations=2), _pipeline(iterations=2)])
    columns, facts = decode(words, (1, 1, 1), plan)
    assert facts["dropped_events"] == (6 - 4) + (8 - 4)
    assert len(columns["kind"]) == 8
    words = words.copy()
    words[12] = 0  # stream 0 never closed: a kernel cut short
    _, facts = decode(words, (1, 1, 1), plan)
    assert facts["unclosed_streams"] == 1


def test_a_buffer_past_32_bit_word_offsets_is_refused():
    from tileworkbench.backend.timeline_buffers import TimelineBuffers

    buffers = TimelineBuffers()
    buffers.timelines = {}
    with pytest.raises(tw.KernelRuntimeError, match="2\\^32.*tw.timeline_capacity"):
        buffers.timeline_buffer("k", (1 << 16, 1, 1), (1, 4, 16 + 2 * 8192))


def test_a_stream_whose_warp_diverged_is_left_out_and_counted():
    plan = _plan()
    words = _encode(plan, 1, [_pipeline(), _pipeline()]).copy()
    full, _ = decode(words, (1, 1, 1), plan)
    words[13] = 1  # stream 0's lanes did not run the same records: its events cannot be trusted
    columns, facts = decode(words, (1, 1, 1), plan)
    assert facts["diverged_streams"] == 1 and facts["unclosed_streams"] == 0
    assert set(columns["stream"].tolist()) == {1} and len(columns["kind"]) == (full["stream"] == 1).sum()
    assert summary(columns, facts)["diverged_streams"] == 1


def test_nothing_is_recorded_inside_a_branch_that_splits_a_warp():
    import tileworkbench.language as T

    def kernel(lo: int, hi: int):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                bar = T.alloc_barrier(hi - lo)
                if tx >= lo and tx < hi:
                    T.barrier_arrive(bar)
                    T.barrier_wait(bar, 0)
                A[tx] = 1.0

        return main

    def records(lo, hi):
        art = tw.lower(kernel(lo, hi), pass_configs={"tw.timeline": True})
        return [s["kind"] for s in art.trace.timeline["plan"]["sites"]], art.device_source.count("tw_tl.record(")

    assert records(32, 64) == (["arrive", "wait_begin", "wait_end"], 3)  # one whole warp records
    assert records(8, 24) == ([], 0)  # half of two warps: nothing is recorded there


def test_sampling_every_kth_block():
    plan = _plan(every=3)
    blocks = 7  # blocks 0, 3 and 6 record
    words = _encode(plan, blocks, [_pipeline(2)] * 3)
    columns, facts = decode(words, (7, 1, 1), plan)
    assert sorted(set(columns["block"].tolist())) == [0, 3, 6] and facts["recorded_blocks"] == 3


def test_a_shared_record_is_a_row_per_site_it_stands_for():
    site = tw.ir.records.TimelineSite
    sites = (site("wait_begin", "consumer", "full", 3, ""), site("wait_end", "consumer", "full", 3, ""),
             site("wgmma_issue", "consumer", None, 4, "", recorded_by=1), site("arrive", "consumer", "empty", 5, ""),
             site("tma_issue", "consumer", "full", 6, "", recorded_by=3))
    plan = TimelinePlan(1, 64, (0,), ("consumer",), sites).to_json()
    words = _encode(plan, 1, [[[(0, 0, 1, 1), (40, 1, 1, 1), (90, 3, 2, 0)]]])
    columns, _ = decode(words, (1, 1, 1), plan)
    assert columns["site"].tolist() == [0, 1, 2, 3, 4] and columns["seq"].tolist() == [0, 1, 2, 3, 4]
    assert columns["kind"].tolist() == ["wait_begin", "wait_end", "wgmma_issue", "arrive", "tma_issue"]
    t = columns["t_ns"]
    assert t[1] == t[2] and t[3] == t[4] and t[0] < t[1] < t[3]
    assert columns["slot"].tolist() == [1, 1, 0, 2, 2]  # a site without a barrier has no slot
    assert columns["parity"].tolist() == [1, 1, 0, 0, 0]  # nor one that does not wait a parity


def _spec(n=1024):
    return matmul_tma_copy(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, 2)


def test_records_are_shared_only_where_nothing_waits_between():
    art = tw.lower(_spec(), pass_configs={"tl.disable_warp_specialized": True, "tw.timeline": True})
    sites = art.trace.timeline["plan"]["sites"]
    src = art.device_source
    heads = {i for i, s in enumerate(sites) if s["recorded_by"] is None}
    assert {f"tw_tl.record({i}," in src for i in range(len(sites))} == {True, False}
    assert all((f"tw_tl.record({i}," in src) == (i in heads) for i in range(len(sites)))
    loop = src[src.index("for (int k = 0;"):src.index("tw::fence_proxy_async();\n  __syncthreads();")]
    # in the steady-state loop: the next stage's two loads and arrivals share the record before the
    # first load; the end of A's wait and the begin of B's, the end of B's and the wgmma issue share one
    assert loop.count("tw_tl.record(") == 4 and loop.count(".wait(") == 2
    recorded = [int(m) for m in re.findall(r"tw_tl\.record\((\d+),", loop)]
    members = {h: [sites[h]["kind"]] + [s["kind"] for s in sites if s["recorded_by"] == h] for h in recorded}
    assert [members[h] for h in recorded] == [["tma_issue", "arrive", "tma_issue", "arrive"], ["wait_begin"],
                                              ["wait_end", "wait_begin"], ["wait_end", "wgmma_issue"]]
    # between a record and the next one a wait follows only when the record's last site begins it
    pieces = loop.split("tw_tl.record(")[1:]
    for h, piece in zip(recorded, pieces):
        assert (".wait(" in piece) == (members[h][-1] == "wait_begin")


def test_a_wait_begin_is_never_recorded_earlier_than_where_it_stands():
    from tileworkbench.examples.attention import PASS_CONFIGS, mha_fwd

    art = tw.lower(mha_fwd(1, 4, 1024, 128, False), pass_configs={**PASS_CONFIGS, "tw.timeline": True})
    sites = art.trace.timeline["plan"]["sites"]
    src = art.device_source
    for i, s in enumerate(sites):
        if s["kind"] == "wait_begin" and s["recorded_by"] is not None:
            # shared only with the record right before it: the end of the wait before
            head = s["recorded_by"]
            after = src[src.index(f"tw_tl.record({head},"):]
            assert sites[head]["kind"] == "wait_end" and ".wait(" in after.splitlines()[1]
    # the producer's wait for a V slot begins after its K loads: its own record, after them
    producer = [s for s in sites if s["role"] == "producer"]
    v_wait = next(i for i, s in enumerate(sites) if s["role"] == "producer" and s["kind"] == "wait_begin"
                  and s["barrier"] == "V_shared_empty")
    assert sites[v_wait]["recorded_by"] is None and len(producer) == 10
    assert src.index("tw::tma_load(K_desc") < src.index(f"tw_tl.record({v_wait},")


def test_sampled_units_run_the_plain_code():
    plain = tw.lower(_spec(), pass_configs={"tl.disable_warp_specialized": True}).device_source
    every8 = tw.lower(_spec(), pass_configs={"tl.disable_warp_specialized": True, "tw.timeline": 8})
    src = every8.device_source
    assert every8.trace.timeline["plan"]["unit"] == "block"
    # sampled blocks: the wave (blocks resident at once) comes from the host, none of the last records
    assert "tw_tl(tw_timeline, 8, 1, tw_timeline_wave);  // tw.timeline: every 8 block(s) record, none of the " \
           "last wave" in src and "unsigned int tw_timeline_wave) {" in src
    assert "tw_timeline_wave = rt.timeline_wave(KERNEL, BLOCK, SMEM_BYTES)" in every8.host_source
    assert "(A, B, C, A_desc, B_desc, C_desc, tw_timeline, tw_timeline_wave), stream)" in every8.host_source
    sampled, rest = src.split("if (tw_tl.samples_block()) {", 1)[1].split("} else {", 1)
    plain_copy = rest[:rest.index("tw_tl.close<")]
    assert "tw_tl.record(" in sampled and "tw_tl." not in plain_copy
    body = plain[plain.index("__syncthreads();"):]
    for op in (".wait(", "tw::tma_load(", "tw::wgmma_gemm_ss<", ".arrive();", "tw::tma_store("):
        assert plain_copy.count(op) == body.count(op) == sampled.count(op)
    # a persistent kernel samples tiles: each tile loop keeps its body twice, the copy without records
    ws = tw.lower(_ws_gemm(), pass_configs={"tw.timeline": 2}).device_source
    assert ws.count("if (tw_tl.samples_tile(tile_iter") == 2
    every = tw.lower(_ws_gemm(), pass_configs={"tw.timeline": True}).device_source
    assert "samples_" not in every.split("// ---- kernel ----")[1]


def test_frame_views(tmp_path):
    pd = pytest.importorskip("pandas")
    from tileworkbench.analysis.timeline_frame import MeasuredTimeline

    plan = _plan()
    frame = MeasuredTimeline.of(*decode(_encode(plan, 2, [_pipeline(), _pipeline()]), (2, 1, 1), plan))
    assert isinstance(frame, pd.DataFrame) and len(frame) == 2 * 42
    assert isinstance(frame[frame["block"] == 1], MeasuredTimeline)  # slices keep the class
    assert frame.waits()["wait_ns"].min() >= 0
    doc = frame.to_chrome_trace(tmp_path / "t.json")
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert "block 1 (SM 4)" in names and "producer (thread 128)" in names
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 2 * 12 and all(e["dur"] >= 0 for e in spans)
    assert json.loads((tmp_path / "t.json").read_text())["displayTimeUnit"] == "ns"
    measured = frame.to_trace_json(block=1)
    assert measured["block"] == 1 and measured["sm"] == 4 and measured["events"][0]["t_ns"] >= 0
    assert json.dumps(measured, allow_nan=False) and json.dumps(doc, allow_nan=False)  # strict JSON for browsers


def test_recorded_blocks_are_named_by_the_kernels_own_indices_too():
    """kernel.timeline() names each recorded block by the kernel's (bx, by, bz) beside its dispatch
    number, where the grid is reordered (here causal attention's order over two heads)."""
    from tileworkbench.analysis.timeline_frame import MeasuredTimeline
    from tileworkbench.codegen.block_order import kernel_blocks

    order = {"grid": [2, 2, 1], "raster_panel": 0, "heaviest_first": True, "heaviest_first_panel": 0,
             "persistent": False}
    assert kernel_blocks(order, [0, 1, 2, 3], (2, 2, 1)) == {0: [1, 0, 0], 1: [1, 1, 0], 2: [0, 0, 0], 3: [0, 1, 0]}
    assert kernel_blocks({**order, "persistent": True}, [0, 1], (2, 2, 1)) == {}
    plan = _plan()
    columns, facts = decode(_encode(plan, 2, [_pipeline(), _pipeline()]), (2, 1, 1), plan)
    facts["block_indices"] = kernel_blocks({**order, "grid": [2, 1]}, facts["blocks"], (2, 1, 1))
    frame = MeasuredTimeline.of(columns, facts)
    names = {e["args"]["name"] for e in frame.to_chrome_trace()["traceEvents"] if e["ph"] == "M"}
    assert "block 0: bx, by, bz = (1, 0, 0) (SM 3)" in names
    assert frame.to_trace_json(block=1)["block_indices"] == [0, 0, 0]


def test_a_kernels_timeline_carries_its_block_indices():
    kernel = tw.compile(_ws_gemm(), out_idx=[2], target="sm_90a", load_device=False,
                        pass_configs={"tw.timeline": True})
    plan = _plan()
    kernel.trace.timeline = {"plan": plan, "measured": None}

    class Recorded:  # what the runtime hands back after a call: the words, the launch's grid and wave
        def timeline_words(self, name):
            return _encode(plan, 2, [_pipeline(), _pipeline()]), (2, 1, 1), 132

    kernel._runtime = Recorded()
    kernel.trace.resources["block_order"] = {"grid": [2, 1], "raster_panel": 0, "heaviest_first": True,
                                             "heaviest_first_panel": 0, "persistent": False}
    frame = kernel.timeline()
    assert frame.facts["block_indices"] == {0: [1, 0, 0], 1: [0, 0, 0]}
    assert kernel.trace.timeline["measured"]["block_indices"] == [1, 0, 0]


def test_events_without_a_barrier_export_as_null():
    from tileworkbench.analysis.timeline_frame import MeasuredTimeline

    sites = (tw.ir.records.TimelineSite("wgmma_issue", "consumer", None, None, ""),
             tw.ir.records.TimelineSite("wait_begin", "consumer", "full", 3, ""))
    plan = TimelinePlan(1, 64, (0,), ("consumer",), sites).to_json()
    frame = MeasuredTimeline.of(*decode(_encode(plan, 1, [[[(0, 0, 0, 0), (5, 1, 0, 0)]]]), (1, 1, 1), plan))
    events = frame.to_trace_json()["events"]
    assert [e["barrier"] for e in events] == [None, "full"] and events[0]["line"] is None
    names = [e["name"] for e in frame.to_chrome_trace()["traceEvents"] if e["ph"] == "i"]
    assert names == ["wgmma_issue"]
    with pytest.raises(ValueError, match="did not record"):
        frame.to_trace_json(block=5)


# ---- the cost benchmark's record and refusal --------------------------------------------------------
def test_the_recorded_cost_benchmark_reads_back():
    from pathlib import Path

    from tileworkbench.bench.timeline import GOAL_COST, table

    records = sorted(Path(__file__).resolve().parents[1].glob("benchmarks/results/timeline-*.json"))
    assert records, "no timeline record under benchmarks/results"
    record = json.loads(records[-1].read_text())
    text = table(record)
    assert text.count("\n") == 1 + sum(len(r["variants"]) for r in record["rows"])
    for row in record["rows"]:
        plain, *others = row["variants"]
        assert plain["every"] is None and plain["correct"]
        for v in (v for v in others if v["every"] is not None):  # what the run measured, read back: correct, ordered, its cost against plain
            # a record whose violations were found to be the decoder's says so (its annotations)
            assert v["correct"] and (v["timeline"]["violations"] == 0 or "violations" in record.get("annotations", {}))
            if record["version"] == 1:  # the median time over plain's
                assert v["cost"] == pytest.approx(v["ms"] / plain["ms"])
            else:  # the median of the rounds' ratios, within their quartiles
                low, high = v["cost_quartiles"]
                assert low <= v["cost"] <= high
    assert GOAL_COST == 1.05


def test_the_cost_benchmark_needs_a_gpu(capsys, monkeypatch):
    from tileworkbench.bench import cli

    monkeypatch.setattr(cli, "_torch_gpu", lambda what, stack="torch": print(f"{what} needs a CUDA GPU") or False)
    assert cli.main(["timeline"]) == 2
    assert "the timeline benchmark needs a CUDA GPU" in capsys.readouterr().out


# ---- kernels of other shapes ---------------------------------------------------------------------
def test_user_warp_specialised_scopes_record_as_their_roles():
    from tests.tilelang_compat.test_warp_groups import loader_and_gemm

    art = tw.lower(loader_and_gemm(stages=2), pass_configs={"tw.timeline": True}, enable_device_compile=True)
    plan = art.trace.timeline["plan"]
    assert plan["recorders"] == [0, 128] and plan["roles"] == ["ws(0)", "ws(1)"]
    loader = {s["kind"] for s in plan["sites"] if s["role"] == "ws(0)"}
    gemm = {s["kind"] for s in plan["sites"] if s["role"] == "ws(1)"}
    assert {"wait_begin", "wait_end", "tma_issue", "arrive"} <= loader
    assert {"wait_begin", "wait_end", "wgmma_issue", "arrive"} <= gemm
    assert art.nvrtc.cubin and art.nvrtc.spills_bytes == 0


def test_the_last_wave_of_a_sampled_grid_is_not_read_as_recorded():
    # every 2nd of 8 blocks, 3 resident at once: blocks 5-7 are the last wave, so block 6 does not
    # record; its stream may hold a closed stream of an earlier launch, which is not this one's
    from tileworkbench.examples.elementwise import elementwise_add

    art = tw.lower(elementwise_add(4096, 4096, 128, 128, "float16", 256), pass_configs={"tw.timeline": 2})
    plan = art.trace.timeline["plan"]
    words = _encode(plan, 8, [[[], []]] * 4)  # every stream closed, block 6's as if left from before
    _, facts = decode(words, (8, 1, 1), plan, wave=3)
    assert sorted(facts["blocks"]) == [0, 2, 4] and facts["unclosed_streams"] == 0
    _, facts = decode(words, (8, 1, 1), plan)  # no wave told (a record from before the rule): all four
    assert sorted(facts["blocks"]) == [0, 2, 4, 6]
    _, facts = decode(words, (8, 1, 1), plan, wave=8)  # one wave: none left out
    assert sorted(facts["blocks"]) == [0, 2, 4, 6]


def test_a_kernel_without_barriers_records_each_warpgroups_span():
    from tileworkbench.examples.elementwise import elementwise_add

    art = tw.lower(elementwise_add(4096, 4096, 128, 128, "float16", 256), pass_configs={"tw.timeline": 2},
                   enable_device_compile=True)
    plan = art.trace.timeline["plan"]
    assert plan["sites"] == [] and plan["recorders"] == [0, 128] and plan["roles"] == ["block", "block"]
    assert art.device_source.count("tw_tl.open<") == 2 and art.nvrtc.cubin
    words = _encode(plan, 4, [[[], []]] * 2)  # 4 blocks, every 2nd records: two blocks' open and close
    columns, facts = decode(words, (4, 1, 1), plan)
    assert len(columns["kind"]) == 0 and facts["recorded_blocks"] == 2
    s = summary(columns, facts)
    assert s["events"] == 0 and s["sm_busy"]["sms"] == 2 and s["pipeline"]["waits_checked"] == 0


def test_a_cost_row_compiles_each_variant_with_room_for_its_events():
    from types import SimpleNamespace

    from tileworkbench.bench.timeline import DEFAULT_CAPACITY, VARIANTS, _row

    compiled = []

    class FakeKernel:
        def __init__(self, configs):
            self.configs = configs
            self.ms = 2.0 if configs.get("tw.timeline") else 1.6
            capacity = configs.get("tw.timeline_capacity", DEFAULT_CAPACITY)
            self.trace = SimpleNamespace(timeline={"plan": {"capacity": capacity}})
            compiled.append(configs)

        def __call__(self):  # its "output" is the kernel itself, so the fake timer can read its time
            return self

        def timeline(self):
            summary = {"events": 10, "recorded_blocks": 2, "span_ns": 5.0, "dropped_events": 0, "unclosed_streams": 0,
                       "consumer_wait_on_loads_fraction": 0.25,
                       "pipeline": {"violations": [], "lead_stages_median": 1.0, "waits_checked": 4}}
            return SimpleNamespace(facts={"max_events_per_stream": DEFAULT_CAPACITY + 10}, summary=lambda: summary)

    turns = []

    def time_alternating(fns, rounds, warmup=2):  # as Timer's: one call of each a round, rotated
        times = [[] for _ in fns]
        for turn in range(rounds):
            shift = turn % len(fns)
            for i in list(range(shift, len(fns))) + list(range(shift)):
                kernel = fns[i]()
                turns.append(kernel.configs.get("tw.timeline"))
                times[i].append(kernel.ms * (1.1 if turn == 1 else 1.0))  # round 1 ran on a warmer GPU
        return [tuple(t) for t in times]

    row = _row("fake", FakeKernel, lambda k: k(), lambda out: {"correct": isinstance(out, FakeKernel)}, 3.2e9,
               SimpleNamespace(time_alternating=time_alternating), rounds=3)
    assert [v["variant"] for v in row["variants"]] == [label for label, *_ in VARIANTS]
    # one call of each a round, the order rotated each round (the two plain variants: None)
    assert turns == [None, None, True, 8, 64, None, True, 8, 64, None, True, 8, 64, None, None]
    plain, moved, *recorded = row["variants"]
    assert plain["ms"] == 1.6 and plain["cost"] == 1.0 and plain["tflops"] == pytest.approx(2.0)
    assert moved["every"] is None and moved["cost"] == 1.0 and "timeline" not in moved
    for v in recorded:  # the warmer round slowed every call alike: the ratios leave it out
        assert v["cost"] == pytest.approx(2.0 / 1.6) and v["cost_quartiles"] == pytest.approx([2.0 / 1.6] * 2)
        assert v["ms"] == 2.0 and v["capacity"] == DEFAULT_CAPACITY + 10
        assert v["timeline"]["violations"] == 0 and v["timeline"]["pipeline"]["lead_stages_median"] == 1.0
    # each recording variant: once at the default capacity, once with room for every event
    room = DEFAULT_CAPACITY + 10
    assert compiled == [{}, {"tw.code_offset": 1}, {"tw.timeline": True},
                        {"tw.timeline": True, "tw.timeline_capacity": room},
                        {"tw.timeline": 8}, {"tw.timeline": 8, "tw.timeline_capacity": room},
                        {"tw.timeline": 64}, {"tw.timeline": 64, "tw.timeline_capacity": room}]
