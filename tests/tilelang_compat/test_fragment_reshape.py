"""``T.reshape`` / ``T.view`` of a fragment (``frontend.fragment_views``): element accesses land on
the fragment's element at the same row-major position, a ``T.Parallel`` loop over the view's
dimensions becomes a loop the fragment's layout takes (``merge_parallel_dims``), and a reduction
along the inner part of a split dimension reduces runs (``ir.Reduce.segment``). DeepSeek's FP8
indexers (``examples.tilelang_programs.fp8_indexer``) against float64 numpy; what is refused."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples.edge_cases import head_sums
from tileworkbench.examples.tilelang_programs import fp8_indexer
from tileworkbench.frontend.fragment_views import FragmentView
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import MmaAccumLayout, WgmmaAccumLayout
from tileworkbench.ir.fragment_parts import columns_of, segments_of

from .interpreters import on_both_interpreters
from .kernel_files import lower_main_with, main_with


def _buffer(shape):
    return ir.Buffer("b", tuple(ir.const(n) for n in shape), ir.dtypes.float32, "fragment")


@pytest.mark.parametrize("base, view", [((4, 6), (4, 2, 3)), ((4, 6), (24,)), ((2, 3, 4), (6, 4)),
                                        ((8, 4), (8, 1, 4)), ((8, 4), (2, 4, 4)), ((6, 4), (4, 6)),
                                        ((8, 4), (8, 4, 1)), ((2, 12), (2, 3, 2, 2))])
def test_each_view_element_is_the_fragment_element_at_its_row_major_position(base, view):
    fv = FragmentView.of(_buffer(view), _buffer(base))
    for idx in itertools.product(*(range(n) for n in view)):
        got = tuple(ir.const_int(i) for i in fv.element(tuple(ir.const(i) for i in idx)))
        want = np.unravel_index(np.ravel_multi_index(idx, view), base)
        assert got == tuple(int(w) for w in want), (idx, got, want)


@pytest.mark.parametrize("base, segment", [(WgmmaAccumLayout((64, 128), 1), 32), (WgmmaAccumLayout((256, 128), 4), 32),
                                           (WgmmaAccumLayout((128, 64), 2), 64), (WgmmaAccumLayout((64, 64), 1), 8),
                                           (MmaAccumLayout((128, 32), 4, 1), 16), (MmaAccumLayout((64, 64), 2, 1), 8)])
def test_each_accumulator_element_adds_into_its_rows_run_in_its_own_thread(base, segment):
    runs = segments_of(base, segment)
    held = {}
    for tid in range(base.threads):
        for r in range(runs.local_size):
            (row, run), _ = runs.forward(tid, r)
            held[(tid, int(row), int(run))] = r
        for j in range(base.local_size):
            (row, col), _ = base.forward(tid, j)
            slot = int(ir.const_int(runs.slot_of(ir.const(j))))
            assert held[(tid, int(row), int(col) // segment)] == slot
    # each thread holds a result for every run of each of its rows; the row's four lanes the same ones
    assert len(held) == base.threads * runs.local_size
    assert {(t // 4, row, run) for t, row, run in held} == {(t // 4, row, run) for t, row, run in held if t % 4 == 0}


@pytest.mark.parametrize("base, segment, why", [
    (WgmmaAccumLayout((64, 128), 1, 2), 32, "split between warps along N"),
    (MmaAccumLayout((64, 64), 2, 2), 16, "split between warps along N"),
    (WgmmaAccumLayout((64, 128), 1), 12, "not whole blocks of 8")])
def test_runs_stay_in_registers_only_where_a_warp_holds_whole_rows(base, segment, why):
    with pytest.raises(ValueError, match=why):
        segments_of(base, segment)


def test_the_fp8_indexer_sums_its_heads_in_registers():
    src = fp8_indexer.mqa_logits.compile(S=64, SKV=1024, heads=32, index_dim=64).get_kernel_source()
    assert "float logits_part[8];" in src and "scratch" not in src  # two rows a thread, four runs each
    assert src.count("__shfl_xor_sync(0xffffffffu, logits_part[") == 2
    # the head weights w[q_h // 32, q_h % 32]: each thread holds the 32 of its accumulator columns
    assert "float w[32];" in src


@pytest.mark.parametrize("base, split", [(WgmmaAccumLayout((256, 128), 4), 32), (WgmmaAccumLayout((64, 128), 1, 2), 64),
                                         (MmaAccumLayout((64, 64), 2, 2), 16), (WgmmaAccumLayout((64, 64), 1), 1)])
def test_a_2d_fragment_holds_the_columns_at_their_row_major_places(base, split):
    columns = columns_of(base, split)
    assert columns.shape == (base.shape[1] // split, split)
    for tid in range(base.threads):
        for j in range(base.local_size):
            (_, col), _ = base.forward(tid, j)
            place, _ = columns.forward(tid, ir.const_int(columns.slot_of(ir.const(j))))
            assert tuple(int(x) for x in place) == (int(col) // split, int(col) % split)


def test_the_heads_of_a_viewed_fragment_sum_in_runs_on_both_interpreters():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    w = rng.standard_normal((4, 32)).astype(np.float32)
    want = (np.maximum(a.astype(np.float64), 0).reshape(64, 4, 32) * w).sum(-1).T
    for run in on_both_interpreters.args[1]:
        out = np.zeros((4, 64), np.float32)
        run(head_sums(), a, w, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_the_loop_over_the_view_is_one_loop_over_the_fragment():
    src = tw.lower(head_sums(), target="sm_90a").kernel_source
    assert "g_h" in src and "scores_reduce_scratch" in src  # the merged variable; the runs through shared
    compile_check(src, "sm_90a", "head_sums.cu")


def _indexer_inputs(s, skv, heads, dim, seed=0):
    rng = np.random.default_rng(seed)
    f8 = ml_dtypes.float8_e4m3fn
    q = rng.standard_normal((s * heads, dim)).astype(f8)
    k = rng.standard_normal((skv, dim)).astype(f8)
    k_scale = (rng.random(skv) + 0.5).astype(np.float32)
    weights = rng.standard_normal((s, heads)).astype(np.float32)
    scores = np.maximum(q.astype(np.float64) @ k.astype(np.float64).T, 0).reshape(s, heads, skv)
    return (q, k, k_scale, weights), (scores * weights[:, :, None]).sum(1) * k_scale


@pytest.mark.parametrize("heads, block_N, threads, call", [
    (32, 256, 512, "tw::wgmma_gemm_ss<256, 128, 64, 4, 64, 64, true, tw_wgmma_m64n128k32_e4m3_kk>"),
    # 64 rows on two warpgroups: side by side along N, each with its rows of the K-major B tile
    (64, 64, 256, "tw::wgmma_gemm_ss<64, 128, 64, 1, 64, 64, true, tw_wgmma_m64n64k32_e4m3_kk, 0, true, 2>"),
])
@pytest.mark.parametrize("split", [True, False], ids=["warp-specialised", "no_ws"])
def test_the_fp8_indexer_matches_float64_on_the_cpu_and_compiles(monkeypatch, heads, block_N, threads, call, split):
    # partial blocks of tokens (block_Q = 128 // heads) and of keys
    (q, k, k_scale, weights), want = _indexer_inputs(7 if heads == 32 else 5, 500, heads, 64)
    program = fp8_indexer.mqa_logits if split else fp8_indexer.mqa_logits_no_ws
    kernel = program.compile(S=len(weights), SKV=500, heads=heads, index_dim=64, block_N=block_N, threads=threads)
    src = kernel.get_kernel_source()
    assert call in src
    # split: a producer warpgroup loads K while the consumers score, weigh and store (the query
    # block, loaded once before the loop, is B: read where it is); the logits stored from registers
    assert ("} else {  // consumer warpgroups" in src) == split and "logits_shared" not in src
    assert compile_check(src, "sm_90a", "indexer.cu").spills_bytes <= 4
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")  # the tile level: the split's barriers run
    out = program(q, k, k_scale, weights, heads=heads, index_dim=64, block_N=block_N, threads=threads)
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=1e-5, atol=1e-4 * np.abs(want).max())


SIG = 'A: T.Tensor((64, 128), "float32"), Out: T.Tensor((64, 4), "float32")'
START = ('s = T.alloc_fragment((64, 128), "float32")\n        v = T.reshape(s, (64, 4, 32))\n'
         '        T.copy(A, s)\n        ')


@pytest.mark.parametrize("statements, match", [
    (START + 'o = T.alloc_fragment((64, 4), "float32")\n        T.copy(v, o)',
     r"T.copy source: v is a view of the fragment s \(T.reshape / T.view\)"),
    (START + 'o = T.alloc_fragment((64, 32), "float32")\n        T.reduce_sum(v, o, dim=1)',
     r"a view is reduced along a dimension the fragment has, or along the inner part of one it splits"),
    (START + 'o = T.alloc_fragment((64, 2, 2), "float32")\n        T.reduce_sum(s, T.reshape(o, (64, 4)), dim=1)',
     r"the output o_view is a view of a fragment"),
    ('s = T.alloc_fragment((64, 128), "float32")\n        v = T.reshape(s, (64, 4, 33))',
     r"s has 8192 elements and the shape asked for 8448"),
    ('s = T.alloc_fragment((64, 128), "float32")\n        v = T.view(s, (64, 128), dtype="float16")',
     r"a view of a fragment keeps its dtype"),
])
def test_what_a_fragment_view_does_not_take_is_refused_at_its_line(tmp_path, statements, match):
    with pytest.raises(tw.CompileError, match=match) as info:
        main_with(tmp_path, SIG, statements)
    assert "kernel_file.py" in str(info.value) and "^" in str(info.value)


def test_a_loop_whose_index_is_not_the_split_keeps_its_shape(tmp_path):
    # q * 33 + h with h < 32 is no run of the fragment's columns: not merged, so refused as before
    with pytest.raises(tw.CompileError, match="loop over the whole fragment"):
        lower_main_with(tmp_path, 'A: T.Tensor((64, 132), "float32")',
                        's = T.alloc_fragment((64, 132), "float32")\n        T.copy(A, s)\n'
                        '        for n, q, h in T.Parallel(64, 4, 32):\n'
                        '            s[n, q * 33 + h] = 0.0\n        T.copy(s, A)')
