"""Measured timelines on the H200 (``tw.timeline``): the instrumented kernels still compute the right
result (against float32 on random inputs), and what they record is ordered as the protocol
requires: every stream closed, nothing dropped, times monotone per recording warpgroup, each wait
on a loaded barrier ended after its load was issued, each producer wait on a released slot ended
after the consumers' arrival, and the counts the loop's trip count gives."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.bench.attention import check, reference
from tileworkbench.examples.attention import PASS_CONFIGS, mha_fwd
from tileworkbench.examples.gemm import matmul, matmul_tma_copy
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def _assert_well_formed(frame):
    facts = frame.facts
    assert facts["unclosed_streams"] == 0 and facts["dropped_events"] == 0 and facts["diverged_streams"] == 0
    for _, rows in frame.groupby(["block", "stream"]):
        t = rows["t_ns"].to_numpy()
        assert (np.diff(t) >= 0).all(), "times go back within one recording warpgroup"
        assert list(rows["seq"]) == list(range(len(rows)))
    waits = frame.waits()
    assert (waits["end_ns"] >= waits["begin_ns"]).all()
    summary = frame.summary()
    assert summary["pipeline"]["violations"] == [], summary["pipeline"]["violations"][:3]
    assert summary["pipeline"]["waits_checked"] > 0
    return summary


def _gemm_inputs(torch, n, seed):
    torch.manual_seed(seed)
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    return a, b, a.float() @ b.float()


@pytest.mark.parametrize("every", [1, 3])
def test_warp_specialized_gemm_timeline(torch, every, tmp_path):
    n = 4096  # 512 tiles on a persistent grid: several tiles per block
    kernel = tw.compile(matmul(n, n, n, 128, 256, 64, num_stages=3, threads=256), out_idx=[2],
                        pass_configs={"tw.timeline": every})
    a, b, want = _gemm_inputs(torch, n, every)
    c = kernel(a, b)
    assert float((c.float() - want).norm() / want.norm()) < 1e-3
    frame = kernel.timeline()
    summary = _assert_well_formed(frame)
    grid, tiles = frame.facts["grid"][0], (n // 128) * (n // 256)
    assert frame.facts["unit"] == ("tile" if every > 1 else "block") and frame.facts["recorded_blocks"] == grid
    # block b runs tiles b, b + grid, ...; it records its tile_iter-th when (tile_iter + b) % every == 0
    recorded = {b: sum((t + b) % every == 0 for t in range(-(-(tiles - b) // grid))) for b in range(grid)}
    assert set(frame["role"]) == {"producer", "consumer"}
    iterations = n // 64
    consumer = frame[(frame["role"] == "consumer") & (frame["kind"] == "wait_end")
                     & (frame["barrier"] == "stage_full")]
    per_stream = consumer.groupby(["block", "stream"]).size()
    assert all(count == iterations * recorded[b] for (b, _), count in per_stream.items())
    assert sorted(consumer["block"].unique()) == [b for b in range(grid) if recorded[b]]
    producer_loads = frame[(frame["role"] == "producer") & (frame["kind"] == "tma_issue")]
    assert all(count == 2 * iterations * recorded[b]  # A and B per stage
               for b, count in producer_loads.groupby("block").size().items())
    # a 3-stage ring lets the producer run ahead of the plan's lockstep order
    assert summary["pipeline"]["lead_stages_median"] >= 1
    doc = frame.to_chrome_trace(tmp_path / "trace.json")
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"] == doc["traceEvents"]
    measured = kernel.trace.timeline["measured"]
    assert measured["block"] == 0 and measured["events"] and measured["summary"]["recorded_blocks"] == grid


def test_spec_kernel_timeline(torch):
    n = 1024
    func = matmul_tma_copy(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, 2)
    kernel = tw.compile(func, out_idx=[2], pass_configs={"tl.disable_warp_specialized": True, "tw.timeline": True})
    a, b, want = _gemm_inputs(torch, n, 7)
    c = kernel(a, b)
    assert float((c.float() - want).norm() / want.norm()) < 1e-3
    frame = kernel.timeline()
    _assert_well_formed(frame)
    issues = frame[frame["kind"] == "tma_issue"].groupby("block").size()
    assert (issues == 2 * (n // 32)).all()


def test_a_sampled_grid_records_no_block_of_its_last_wave(torch):
    n = 4096  # 1024 blocks of 128 x 128 tiles: more than two waves
    func = matmul_tma_copy(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, 2)
    kernel = tw.compile(func, out_idx=[2], pass_configs={"tl.disable_warp_specialized": True, "tw.timeline": 8})
    a, b, want = _gemm_inputs(torch, n, 5)
    c = kernel(a, b)
    assert float((c.float() - want).norm() / want.norm()) < 1e-3
    frame = kernel.timeline()
    _assert_well_formed(frame)
    blocks = (n // 128) ** 2
    wave = kernel._runtime.timeline_waves[kernel.name]
    assert 132 <= wave < blocks  # an H200: 132 multiprocessors, a block or more each
    assert sorted(frame.facts["blocks"]) == [b for b in range(0, blocks, 8) if b < blocks - wave]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_timeline(torch, causal):
    seq = 1024
    kernel = tw.compile(mha_fwd(1, 4, seq, 128, causal), out_idx=[3],
                        pass_configs={**PASS_CONFIGS, "tw.timeline": 2})
    torch.manual_seed(11 + causal)
    q, k, v = (torch.randn(1, 4, seq, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    result = check(torch, kernel(q, k, v), reference(torch, q, k, v, causal))
    assert result["correct"], result
    frame = kernel.timeline()
    _assert_well_formed(frame)
    assert {"wgmma_issue", "arrive", "tma_issue", "wait_begin", "wait_end"} <= set(frame["kind"])
    assert set(frame["role"]) == {"producer", "consumer"}


def test_timeline_before_a_call_is_an_error(torch):
    kernel = tw.compile(matmul(256, 256, 256, 128, 128, 64, num_stages=2, threads=128), out_idx=[2],
                        pass_configs={"tw.timeline": True})
    with pytest.raises(tw.KernelRuntimeError, match="has not run"):
        kernel.timeline()
    plain = tw.compile(matmul(256, 256, 256, 128, 128, 64, num_stages=2, threads=128), out_idx=[2])
    with pytest.raises(tw.KernelRuntimeError, match="records no timeline"):
        plain.timeline()
