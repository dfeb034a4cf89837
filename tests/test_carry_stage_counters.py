"""carry_stage_counters: a 3-stage ring's slot and phase are carried across iterations, same values."""

import re

import pytest

import tileworkbench as tw
from tileworkbench.analysis import check, simulate
from tileworkbench.examples import matmul, matmul_tma_copy
from tileworkbench.passes import pipeline

SM90 = {"kind": "cuda", "arch": "sm_90"}
NO_WS = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def spec_gemm(stages):
    return matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, stages)


def barrier_ops(art):
    return [(e["kind"], e["barrier"], e["slot"], e.get("parity")) for e in simulate(art).events]


def test_golden_three_stage_ring():
    art = tw.lower(spec_gemm(3), target=SM90, pass_configs=NO_WS)
    assert art.func.attrs["stage_counters"] == [{"loop": "k", "stages": 3, "counters": ["k + 2", "k"]}]
    ir_text = art.trace.ir_after("carry_stage_counters")
    for line in ("k_slot0: int32 = 2", "k_slot1: int32 = 0", "k_phase1: int32 = 0",
                 "mbar_A[k_slot0].expect_transaction(8192)", "mbar_A[k_slot1].wait(k_phase1)",
                 "k_slot1 = T.if_then_else(k_slot1 == 2, 0, k_slot1 + 1)",
                 "k_phase1 = T.if_then_else(k_slot1 == 0, 1 - k_phase1, k_phase1)"):
        assert line in ir_text, line
    assert "k_phase0" not in ir_text  # no phase is read at k + 2: none is carried
    assert not re.search(r"% 3\b", ir_text.split("for k in T.serial")[1].split("tw::store_matrix_x4")[0])


@pytest.mark.parametrize("program,configs", [
    (spec_gemm(3), NO_WS),
    (matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), {}),  # persistent, warp-specialised
    (matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}),
])
def test_the_barrier_protocol_is_the_same_with_and_without_the_pass(monkeypatch, program, configs):
    carried = tw.lower(program, target=SM90, pass_configs=configs)
    assert carried.func.attrs["stage_counters"]
    monkeypatch.setattr(pipeline, "PIPELINE", [p for p in pipeline.PIPELINE if p != "carry_stage_counters"])
    divided = tw.lower(program, target=SM90, pass_configs=configs)
    assert "stage_counters" not in divided.func.attrs
    ops = barrier_ops(carried)
    assert len(ops) > 100 and ops == barrier_ops(divided)  # every barrier op, slot and parity, in order
    assert check(carried) == []


def test_persistent_counters_start_from_the_tile():
    art = tw.lower(matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), target=SM90)
    body = art.device_source.split("---- kernel ----")[1]
    assert "int k_slot0_1 = ((tile_iter_1 * 16) % 3);" in body
    assert "int k_phase0_1 = (((tile_iter_1 * 16) / 3) % 2);" in body


@pytest.mark.parametrize("stages", [2, 4])
def test_power_of_two_rings_keep_their_mask(stages):
    art = tw.lower(spec_gemm(stages), target=SM90, pass_configs=NO_WS)
    assert art.func.attrs["stage_counters"] == []
    assert f"mbar_A[(k % {stages})].wait(((k / {stages}) % 2));" in art.device_source
