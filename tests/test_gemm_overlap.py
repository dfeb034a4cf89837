"""FlashAttention-3's intra-warpgroup overlap in warp_specialize (``rules.OverlapPlan``): the
consumer issues iteration k's Q @ K^T and iteration k - 1's P @ V back to back and runs the softmax
while P @ V is on the tensor cores. The schedule in the IR, its barrier protocol (simulated, no
findings), the numbers (the CPU interpreter against float64 numpy, and the same as the plain
schedule), and every loop the rule leaves alone."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.analysis import check, simulate
from tileworkbench.examples.attention import PASS_CONFIGS, flash_decode, mha_fwd

SM90 = {"kind": "cuda", "arch": "sm_90"}
OVERLAP = {**PASS_CONFIGS, tw.PassConfigKey.TW_GEMM_OVERLAP: True}
PLAIN = {**PASS_CONFIGS, tw.PassConfigKey.TW_GEMM_OVERLAP: False}


def lowered(func, configs=OVERLAP):
    return tw.lower(func, target=SM90, pass_configs=configs)


def consumer_loop(art) -> list:
    text = art.trace.ir_after("warp_specialize")
    body = text[text.index("ws_role='consumer'"):]
    return [line.strip() for line in body.splitlines()[1:] if line.strip()]


def test_attention_issues_the_next_scores_before_the_previous_p_at_v_and_softmaxes_between_the_waits():
    art = lowered(mha_fwd(1, 2, 1024, 128, False))
    assert art.func.attrs["warp_specialized"]["gemm_overlap"] is True
    lines = consumer_loop(art)
    order = [next(i for i, line in enumerate(lines) if line.startswith(start)) for start in (
        "T.barrier_wait(K_shared_full[k % 2]",
        "T.gemm(Q_shared, K_shared[k % 2, 0:128, 0:128], acc_s, transpose_B=True, in_flight=1)",
        "if k > 0:",
        "T.barrier_wait(V_shared_full[(k - 1) % 2], (k - 1) // 2 % 2)",
        "T.gemm(acc_s_cast, V_shared[(k - 1) % 2, 0:128, 0:128], acc_o, in_flight=1)",
        "tw::wgmma_wait<0>()",  # k = k0: S alone was in flight
        "T.barrier_arrive(K_shared_empty[k % 2])",
        "T.reduce_max(acc_s, scores_max, dim=1, clear=False)",  # the softmax, P @ V still running
        "T.reduce_sum(acc_s, scores_sum, dim=1, clear=True)",
    )]
    assert order == sorted(order)
    tail = lines[order[-1]:]
    wait, release, cast = (next(i for i, line in enumerate(tail) if line.startswith(s)) for s in (
        "tw::wgmma_wait<0>()", "T.barrier_arrive(V_shared_empty[(k - 1) % 2])", "T.copy(acc_s, acc_s_cast)"))
    assert wait < release < cast  # P is rewritten only once P @ V has read it
    drain = art.trace.ir_after("warp_specialize")
    assert "T.gemm(acc_s_cast, V_shared[7 % 2, 0:128, 0:128], acc_o)\n" in drain  # the last P @ V, after the loop


def test_the_overlapped_protocol_simulates_without_findings():
    art = lowered(mha_fwd(1, 2, 1024, 128, True))
    assert art.func.attrs["warp_specialized"]["barriers"] == ["K_shared_full", "K_shared_empty", "V_shared_full",
                                                             "V_shared_empty"]
    sim = simulate(art)
    assert sim.findings == [] and check(art) == []
    waits = [e for e in sim.events if e["kind"] == "wait"]
    assert waits and all(e["completes"] for e in waits)


@pytest.mark.parametrize("causal", [False, True])
def test_overlapped_attention_computes_what_the_plain_schedule_does(causal):
    """On the CPU interpreter, which runs the lowered tile program (gemms synchronous), against a
    float64 softmax(Q K^T / sqrt(d)) V and against the plain schedule, bit for bit."""
    func = mha_fwd(1, 2, 256, 64, causal, block_M=64, block_N=64, num_stages=2, threads=128)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 256, 64)).astype(np.float16) for _ in range(3))
    outs = {}
    for name, configs in (("overlap", OVERLAP), ("plain", PLAIN)):
        kernel = tw.compile(func, out_idx=[3], target="cpu", pass_configs=configs)
        outs[name] = np.asarray(kernel(q, k, v), dtype=np.float64)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / 8
    if causal:
        s = np.where(np.tril(np.ones((256, 256), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    assert np.abs(outs["overlap"] - want).max() < 2e-3
    np.testing.assert_array_equal(outs["overlap"], outs["plain"])


def test_two_stage_loops_overlap_by_default():
    assert lowered(mha_fwd(1, 2, 1024, 128, False), PASS_CONFIGS).func.attrs["warp_specialized"]["gemm_overlap"]
    src = lowered(mha_fwd(1, 2, 1024, 128, False), PASS_CONFIGS).device_source
    assert "for (int k_1 = 1; k_1 < 8; ++k_1) {" in src  # the first iteration peeled off (peel_first_iteration)
    assert "if ((k_1 > 0))" not in src
    causal = lowered(mha_fwd(1, 2, 1024, 128, True), PASS_CONFIGS)  # a trip count growing with bx
    assert causal.func.attrs["warp_specialized"]["gemm_overlap"] is True


@pytest.mark.parametrize("block_N", [176, 192])
def test_wider_key_tiles_at_head_dim_128_overlap_and_mask_their_last_tile(block_N):
    """FlashAttention-3's non-causal tile at head dim 128 is 128 x 176: S, P and O take 196 (208 at
    192) of the consumer's 240 registers, inside the margin. 400 keys leave the last tile partial,
    so the overlapped loop runs the bounds mask too; CPU interpreter against float64."""
    func = mha_fwd(1, 1, 400, 128, False, block_N=block_N)
    assert lowered(func, PASS_CONFIGS).func.attrs["warp_specialized"]["gemm_overlap"] is True
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 1, 400, 128)).astype(np.float16) for _ in range(3))
    kernel = tw.compile(func, out_idx=[3], target="cpu", pass_configs=PASS_CONFIGS)
    got = np.asarray(kernel(q, k, v), dtype=np.float64)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(128)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert np.abs(got - (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)).max() < 2e-3


def test_flash_decoding_overlaps_too():
    art = lowered(flash_decode(2, 4, 1, 1024, 128).kernels[0])  # when asked for
    assert art.func.attrs["warp_specialized"]["gemm_overlap"] is True


@pytest.mark.parametrize("make, configs", [
    (lambda: mha_fwd(1, 2, 1024, 64, False, block_N=256), OVERLAP),  # S, P and O would not fit in registers
    (lambda: mha_fwd(1, 2, 1024, 128, False, num_stages=1), OVERLAP),  # one stage: a pair per tile, no overlap
    (lambda: mha_fwd(1, 2, 1024, 128, False), PLAIN),  # switched off
    (lambda: mha_fwd(1, 2, 1024, 128, False), {**OVERLAP, tw.PassConfigKey.TW_WS_TILE_BARRIERS: True}),
], ids=["registers", "one-stage", "switched-off", "tile-barriers"])
def test_loops_the_overlap_leaves_alone(make, configs):
    assert lowered(make(), configs).func.attrs["warp_specialized"]["gemm_overlap"] is False


def two_gemm_loop(what):
    """A two-gemm loop written so that one condition of the overlap fails."""

    @T.prim_func
    def main(Q: T.Tensor((128, 64), "float16"), K: T.Tensor((1024, 64), "float16"),
             V: T.Tensor((1024, 64), "float16"), O: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as _bx:
            Q_shared = T.alloc_shared((128, 64), "float16")
            K_shared = T.alloc_shared((64, 64), "float16")
            V_shared = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((128, 64), "float32")
            P = T.alloc_fragment((128, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            T.copy(Q, Q_shared)
            T.clear(acc)
            T.clear(P)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(K[k * 64:(k + 1) * 64, :], K_shared)
                if what == "touches-p-before":
                    for i, j in T.Parallel(128, 64):
                        P[i, j] = 0
                T.clear(S)
                T.gemm(Q_shared, K_shared, S, transpose_B=True)
                if what == "rescales-first":
                    for i, j in T.Parallel(128, 64):
                        acc[i, j] *= 0.5
                T.copy(S, P)
                T.copy(V[k * 64:(k + 1) * 64, :], V_shared)
                if what == "clears":
                    T.gemm(P, V_shared, acc, clear_accum=True)
                else:
                    T.gemm(P, V_shared, acc)
            T.copy(acc, O)

    return main


@pytest.mark.parametrize("what", ["touches-p-before", "rescales-first", "clears"])
def test_loops_whose_order_the_overlap_would_change_are_left_alone(what):
    art = lowered(two_gemm_loop(what), {tw.PassConfigKey.TW_GEMM_OVERLAP: True})
    info = art.func.attrs["warp_specialized"]
    assert info["applied"] and info["gemm_overlap"] is False
