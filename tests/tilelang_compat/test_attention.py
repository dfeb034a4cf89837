"""FlashAttention as TileLang writes it, on the CPU: P @ V with P in registers (register-A wgmma),
K-major operand tiles wider than 128 bytes in panels, rows of accumulators of different widths
shared by the softmax, and the warp-specialised pipeline of a loop with work between its gemms."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.codegen.wgmma import functor_source
from tileworkbench.examples.tilelang_programs import attention
from tileworkbench.ir.layout import MmaAccumLayout, WgmmaAccumLayout
from tileworkbench.ir.fragment_parts import ProjectedLayout, project


def _lower(seq_len=512, dim=128, causal=False, **config):
    config = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, **config}
    func = attention.flash_attention.fn(1, 2, seq_len, dim, causal, **config)
    return tw.lower(func, out_idx=[3])


def _fragment(artifact, name):
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.visitor import collect

    return next(a.buffer for a in collect(artifact.func.body, ir.Allocate)
                if a.buffer.name == name)


def test_p_at_v_reads_p_from_the_registers_q_at_k_left_it_in():
    art = _lower()
    src = art.device_source
    # in the loop P @ V leaves its wgmma group running beside the softmax (the overlap); the last one after it
    assert "tw::wgmma_gemm_rs<128, 128, 128, 2, 128, false, tw_wgmma_m64n128k16_f16_rn, 1>(acc_s_cast," in src
    assert "tw::wgmma_gemm_rs<128, 128, 128, 2, 128, false, tw_wgmma_m64n128k16_f16_rn>(acc_s_cast," in src
    # Q @ K^T: both operands K-major with rows of 256 bytes, so two 128-byte panels each
    assert "tw::wgmma_gemm_ss<128, 128, 128, 2, 128, 128, true, tw_wgmma_m64n128k16_f16_kk, 1>" in src
    cast = _fragment(art, "acc_s_cast").attrs["layout"]
    assert cast == WgmmaAccumLayout((128, 128), 2) == _fragment(art, "acc_s").attrs["layout"]
    assert "__shared__" in src and "P_shared" not in src  # no trip through shared memory for P


def test_register_a_functor_passes_four_a_registers_and_only_b_transpose():
    text = functor_source(64, "float16", False, a_registers=True)
    assert "struct tw_wgmma_m64n64k16_f16_rn" in text
    assert "{%32, %33, %34, %35}, %36, p, 1, 1, 1;" in text  # A registers, B descriptor, N-major B
    assert '"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b)' in text
    k_major = functor_source(64, "bfloat16", True, a_registers=True)
    assert "m64n64k16.f32.bf16.bf16" in k_major and "p, 1, 1, 0;" in k_major


def test_rows_of_accumulators_of_one_height_are_one_layout_whatever_their_width():
    scores, output = WgmmaAccumLayout((64, 64), 1), WgmmaAccumLayout((64, 256), 1)
    assert project(scores, (0,)) == project(output, (0,))
    assert hash(project(scores, (0,))) == hash(project(output, (0,)))
    assert project(scores, (0,)) != project(WgmmaAccumLayout((128, 64), 2), (0,))
    assert project(MmaAccumLayout((64, 64), 4, 1), (0,)) != project(MmaAccumLayout((64, 64), 2, 2), (0,))
    # each keeps the slots of its own elements: element j of the wider one is in its own slot
    assert isinstance(project(output, (0,)), ProjectedLayout)
    art = _lower(seq_len=384, dim=256, block_M=64, block_N=64, num_stages=1, threads=128)
    assert "acc_o[j" in art.device_source and "scores_scale" in art.device_source


@pytest.mark.parametrize("stages", [1, 2])
def test_the_loop_with_a_softmax_between_its_gemms_is_warp_specialised(stages):
    art = _lower(num_stages=stages)
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"], ws
    assert ws["registers"] == {"producer": 24, "consumer": 240}
    assert ws["tiles"] == ["K_shared", "V_shared"]
    src = art.device_source
    assert src.count("tw::tma_load(K_desc") == 2 and src.count("tw::tma_load(V_desc") == 2  # two panels each


def test_causal_loop_bound_depends_on_the_block_and_still_compiles():
    art = _lower(causal=True)
    assert art.func.attrs["warp_specialized"]["applied"]
    src = art.device_source
    assert "for (int k = 0; k < (bx + 1); ++k)" in src  # the producer loads only the blocks left of the diagonal
    # the consumers overlap the softmax with the previous P @ V: the first iteration peeled off
    assert "for (int k_1 = 1; k_1 < (bx + 1); ++k_1) {" in src
    assert art.func.attrs["warp_specialized"]["gemm_overlap"]


def test_attention_compiles_with_nvrtc_for_sm90a(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = attention.flash_attention(1, 2, 1000, 64, True, block_M=128, block_N=64, num_stages=2, threads=256)
    assert "wgmma_gemm_rs" in kernel.get_kernel_source()


def test_the_barrier_checker_follows_the_per_tile_protocol(monkeypatch):
    """A consumer that never releases V's slot would hang the producer at the ring's first wrap;
    the simulation of this two-gemm pipeline finds it before any launch."""
    from tileworkbench.ir import nodes as ir
    from tileworkbench.passes import warp_specialize as ws

    real = ws._per_tile_protocol

    def without_v_release(*args):
        barriers, produce, consume = real(*args)
        consume = [s for s in consume
                   if not (isinstance(s, ir.BarrierArrive) and s.barrier.buffer.name == "V_shared_empty")]
        return barriers, produce, consume

    monkeypatch.setattr(ws, "_per_tile_protocol", without_v_release)
    with pytest.raises(tw.CompileError, match=r"V_shared_empty\[0\]\.wait\(0\) can never complete"):
        _lower(num_stages=1)
