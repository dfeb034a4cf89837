"""Rows that neither divide nor are divided by the block's threads (RMSNorm at N = 1000 over 128
threads): the fragments a reduction reads by rows get a blocked layout with padded rows
(``ir.layout.BlockedLayout.row``), so each row is whole sweeps of the threads or shared by a
power-of-two run of them. The layout's arithmetic is checked element by element, with the
reduction the compiler lowers to (partials per slot, ``shfl.xor`` over the lane masks, the warps
through shared memory) carried out in numpy; the programs that were refused compile (NVRTC
included). On the GPU: tests/gpu/test_padded_rows_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tileworkbench as tw
from tileworkbench.analysis.evaluate import evaluate
from tileworkbench.backend import nvrtc
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import BlockedLayout, padded_row
from tileworkbench.ir.fragment_parts import project

T_VAR, J_VAR = ir.Var("t"), ir.Var("j")


def _value(expr, tid, j):
    if expr is None:
        return np.ones_like(tid, dtype=bool)
    return np.broadcast_to(evaluate(expr, {T_VAR: tid, J_VAR: j}), tid.shape)


def _holders(layout):
    """(row, column) held by each thread's local slot j, or (-1, -1) where the slot holds nothing."""
    tid = np.arange(layout.threads)
    out = np.full((layout.threads, layout.local_size, 2), -1)
    for j in range(layout.local_size):
        (row, col), guard = layout.forward(T_VAR, ir.const(j))
        keep = _value(guard, tid, j).astype(bool)
        out[keep, j, 0] = _value(row, tid, j)[keep]
        out[keep, j, 1] = _value(col, tid, j)[keep]
    return out


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(m=st.integers(1, 9), n=st.integers(1, 1100), threads=st.sampled_from([32, 64, 96, 128, 256, 384]))
def test_padded_rows_hold_every_element_once_and_reduce_to_each_rows_sum(m, n, threads):
    row = padded_row(n, threads)
    layout = BlockedLayout((m, n), threads, 1, row if row != n else 0)
    held = _holders(layout)
    taken = held[..., 0] >= 0
    pairs = held[taken]
    assert len(pairs) == m * n and len({tuple(p) for p in pairs}) == m * n  # each element exactly once

    rows = project(layout, (0,))  # what a reduction's result holds: the rows, one slot per row held
    values = np.random.default_rng(m * n).standard_normal((m, n))
    tid = np.arange(threads)
    partial = np.zeros((threads, rows.local_size))
    for j in range(layout.local_size):  # step 1: each thread adds its elements into its row's slot
        slot = int(evaluate(rows.slot_of(ir.const(j)), {}))
        keep = taken[:, j]
        partial[keep, slot] += values[held[keep, j, 0], held[keep, j, 1]]
    for mask in rows.lane_masks:  # step 2: shfl.xor within each warp
        assert mask < 32
        partial = partial + partial[tid ^ mask]
    if rows.warp_sharers > 1:  # step 3: a lane of each warp through shared memory, then every thread adds
        slot_of_warp = _value(rows.warp_slot(T_VAR), tid, 0)
        writers = tid % (1 << len(rows.lane_masks)) == 0
        scratch = {}
        for t in np.nonzero(writers)[0]:
            scratch[(t // 32 // rows.warp_sharers, int(slot_of_warp[t]))] = partial[t]
        partial = np.stack([sum(scratch[(t // 32 // rows.warp_sharers, w)] for w in range(rows.warp_sharers))
                            for t in tid])
    for r in range(rows.local_size):  # every thread's slot r now holds the sum of the row it names
        (row_of,), guard = rows.forward(T_VAR, ir.const(r))
        keep = _value(guard, tid, r).astype(bool)
        want = values.sum(1)[_value(row_of, tid, r)[keep]]
        np.testing.assert_allclose(partial[keep, r], want, rtol=1e-12, atol=1e-12)


def test_the_padded_length_is_the_next_power_of_two_dividing_the_threads_or_whole_sweeps():
    assert [padded_row(n, 128) for n in (1000, 129, 100, 24, 3, 128, 64, 256)] == \
           [1024, 256, 128, 32, 4, 128, 64, 256]
    assert padded_row(48, 96) == 96 and padded_row(100, 96) == 192


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
@pytest.mark.parametrize("m,n,blk_m", [(256, 1000, 1), (256, 1000, 2), (100, 129, 1), (100, 24, 8), (50, 3, 4)])
def test_rms_norm_over_rows_the_threads_do_not_divide_compiles(m, n, blk_m, monkeypatch):
    from tileworkbench.examples.tilelang_programs import norms

    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = norms.rms_norm.compile(M=m, N=n, blk_m=blk_m)
    lowered = kernel.trace.passes[-1].ir_after
    assert f"rows padded to {padded_row(n, 128)}" in lowered
    # in registers where every thread holds a row (or part of one); 4 rows of 4 slots leave 112 of
    # 128 threads without one, and those rows go through a shared copy
    in_registers = blk_m * padded_row(n, 128) % 128 == 0
    assert ("__shfl_xor_sync" in lowered) == in_registers and ("reduce_scratch" in lowered) != in_registers
    assert kernel.trace.resources.get("spill_bytes") in (None, 0)


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_layernorm_and_top_k_over_such_rows_compile(monkeypatch):
    from tileworkbench.examples.tilelang_programs import norms, topk

    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    norms.layernorm_fwd(300, 1000, in_dtype="float32", out_dtype="float32")
    assert "rows padded to 128" in topk.top_k_rows.compile(M=512, N=100, topk=4, blk_m=64).trace.passes[-1].ir_after


def test_fragments_no_reduction_reads_by_rows_keep_their_plain_layout():
    import tileworkbench.language as T

    @T.prim_func
    def scale(A: T.Tensor((4, 1000), "float32"), B: T.Tensor((4, 1000), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 1000), "float32")
            T.copy(A, x)
            for i, j in T.Parallel(4, 1000):
                x[i, j] = x[i, j] * 2.0
            T.copy(x, B)

    assert "padded" not in tw.lower(scale).trace.passes[-1].ir_after


@pytest.mark.parametrize("m,n,blk_m", [(40, 1000, 1), (40, 1000, 2), (30, 129, 1), (50, 24, 8), (50, 3, 4)])
def test_rms_norm_over_padded_rows_at_the_thread_level(m, n, blk_m, monkeypatch):
    """The kernel's final lowered IR run thread by thread (``interpreter.threads``), against float64."""
    from tileworkbench.examples.tilelang_programs import norms
    from tileworkbench.interpreter.threads import ThreadKernel

    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    x = np.random.default_rng(n).standard_normal((m, n)).astype(np.float32)
    got = ThreadKernel.of(norms.rms_norm.compile(M=m, N=n, blk_m=blk_m))(x)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_layernorm_and_top_k_over_padded_rows_at_the_thread_level(monkeypatch):
    from tileworkbench.examples.tilelang_programs import norms, topk
    from tileworkbench.interpreter.threads import ThreadKernel

    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    rng = np.random.default_rng(4)
    x, gamma, beta = (rng.standard_normal(s).astype(np.float32) for s in ((20, 1000), (1000,), (1000,)))
    y, mean, rstd = ThreadKernel.of(norms.layernorm_fwd(20, 1000, threads=256, in_dtype="float32",
                                                        out_dtype="float32"), out_idx=[3, 4, 5])(x, gamma, beta)
    x64 = x.astype(np.float64)
    mu = x64.mean(1, keepdims=True)
    r = 1 / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, (x64 - mu) * r * gamma + beta, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, mu[:, 0], rtol=1e-5, atol=1e-6)
    logits = (np.argsort(rng.random((128, 100)), 1) + rng.random((128, 100)) * 0.5).astype(np.float32) / 100
    values, indices = ThreadKernel.of(topk.top_k_rows.compile(M=128, N=100, topk=4, blk_m=64))(logits)
    assert np.array_equal(values, -np.sort(-logits, 1)[:, :4])
    assert np.array_equal(np.take_along_axis(logits, indices, 1), values)
