"""Float32 atomic adds into neighbouring elements as one float4 atomic (``tw::atomic_add_x4``):
``T.atomic_addx4`` where the four line up (the front end), and ``T.atomic_add`` in a ``T.Parallel``
nest in runs of four (``rules.vector_runs``), as TileLang vectorises them (DeepSeek's sparse MLA
backward: four times fewer L2 atomics). Both interpreters run the vector call against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.atomic_scatters import scatter_rows
from tileworkbench.interpreter.threads import run_at_thread_level

RUNS = [lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level]


def _inputs(rows=16, cols=64, out_rows=40):
    rng = np.random.default_rng(4)
    src = rng.standard_normal((rows, cols)).astype(np.float32)
    idx = rng.integers(-3, out_rows + 3, rows).astype(np.int32)  # some rows outside: skipped
    idx[:4] = 7  # several rows onto one: the adds must all land
    return src, idx


def _expected(src, idx, out_rows=40, start=0):
    want = np.zeros((out_rows, src.shape[1]))
    keep = (idx >= 0) & (idx < out_rows)
    np.add.at(want, idx[keep], 2.0 * src[keep].astype(np.float64))
    want[:, :start] = 0
    return want


@pytest.mark.parametrize("run", RUNS, ids=["tile level", "thread level"])
@pytest.mark.parametrize("by_fours", [True, False], ids=["atomic_addx4", "atomic_add in T.Parallel"])
def test_rows_added_four_at_a_time_compute_what_numpy_does(run, by_fours):
    src, idx = _inputs()
    out = np.zeros((40, 64), np.float32)
    run(scatter_rows(by_fours=by_fours), src, idx, out)
    np.testing.assert_allclose(out, _expected(src, idx), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("by_fours", [True, False])
def test_both_forms_are_one_float4_atomic_per_four(by_fours, nvrtc_check):
    art = tw.lower(scatter_rows(by_fours=by_fours), target="sm_90a")
    kernel = art.device_source[art.device_source.index("__global__"):]
    assert kernel.count("tw::atomic_add_x4(") == 1 and "atomicAdd(" not in kernel
    assert "align=16" in art.host_source  # the launcher checks Out's 16 bytes
    nvrtc_check(art.device_source, "sm_90a")


def test_a_runs_row_index_is_read_once_for_its_check_and_its_address():
    """The run's bounds check reads ``Idx[i]`` on both of its sides and the atomic's address reads
    it again: one load into a name serves all three (three loads, each behind a branch of its own,
    were what NVCC made of the sparse MLA backward's)."""
    art = tw.lower(scatter_rows(by_fours=False), target="sm_90a")
    kernel = art.device_source[art.device_source.index("__global__"):]
    assert kernel.count("Idx[") == 1 and "int Idx_at = Idx[i_1];" in kernel
    assert "if (((Idx_at >= 0) && (Idx_at < 40)))" in kernel and "(&Out[((Idx_at * 64) + j_10)])" in kernel


def _scatter_from_a_start():
    @T.prim_func
    def scatter(src: T.Tensor((16, 64), "float32"), idx: T.Tensor((24,), "int32"), start: T.Tensor((1,), "int32"),
                out: T.Tensor((40, 64), "float32")):
        with T.Kernel(1, threads=128):
            k = start[0]
            for i, j in T.Parallel(16, 64):
                T.atomic_add(out[idx[k + i], j], src[i, j])
    return scatter


@pytest.mark.parametrize("run", RUNS, ids=["tile level", "thread level"])
def test_a_row_index_read_past_a_checked_start_is_named_under_that_check(run):
    """``out[idx[k + i], j]`` with ``k`` read from a tensor: the run's check tests ``k + i`` inside
    ``idx`` first, then the row; the index is read once, under the first test (``k + i`` past the
    table's end skips the run, as TileLang's nested ifs do)."""
    art = tw.lower(_scatter_from_a_start(), target="sm_90a")
    kernel = art.device_source[art.device_source.index("__global__"):]
    assert kernel.count("idx[") == 1
    assert "int idx_at = ((((k + i) >= 0) && ((k + i) < 24)) ? idx[(k + i)] : 0);" in kernel
    assert "if ((((((k + i) >= 0) && ((k + i) < 24)) && (idx_at >= 0)) && (idx_at < 40)))" in kernel
    rng = np.random.default_rng(6)
    src = rng.standard_normal((16, 64)).astype(np.float32)
    idx = rng.integers(-3, 43, 24).astype(np.int32)
    for k in (12, -4):  # past the table's end, before its start
        out = np.zeros((40, 64), np.float32)
        run(_scatter_from_a_start(), src, idx, np.array([k], np.int32), out)
        want = np.zeros((40, 64))
        for i in range(16):
            if 0 <= k + i < 24 and 0 <= idx[k + i] < 40:
                want[idx[k + i]] += src[i]
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("by_fours", [True, False])
def test_neighbours_that_do_not_line_up_stay_element_atomics(by_fours):
    # from column 2: four neighbours straddle a 16-byte boundary
    art = tw.lower(scatter_rows(by_fours=by_fours, start=2, cols=66), target="sm_90a")
    kernel = art.device_source[art.device_source.index("__global__"):]
    assert "tw::atomic_add_x4" not in kernel and "atomicAdd(" in kernel
    src, idx = _inputs(cols=66)
    out = np.zeros((40, 66), np.float32)
    tw.compile(scatter_rows(by_fours=by_fours, start=2, cols=66), target="cpu")(src, idx, out)
    np.testing.assert_allclose(out, _expected(src, idx, start=2), rtol=1e-5, atol=1e-5)


def _masked_scores_scattered():
    """``mask[j] = Idx[j] >= 0`` read as the columns of a gemm's accumulator, and the scores added
    atomically into the rows ``Idx`` picks: the index table is read in the atomic's address, not
    written (it was counted as written, so the mask went through a shared copy with a warning)."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((32, 64), "float16"), Idx: T.Tensor((32,), "int32"),
             Out: T.Tensor((40, 64), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 32), "float32")
            mask = T.alloc_fragment((32,), "bool")
            s_acc = T.alloc_shared((64, 32), "float32")
            for j in T.Parallel(32):
                mask[j] = Idx[j] >= 0
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(64, 32):
                acc[i, j] = T.if_then_else(mask[j], acc[i, j], 0.0)
            T.copy(acc, s_acc)
            for j, i in T.Parallel(32, 64):
                T.atomic_add(Out[Idx[j], i], s_acc[i, j])

    return main


def test_an_index_table_read_in_an_atomics_address_is_not_written(recwarn):
    art = tw.lower(_masked_scores_scattered(), target="sm_90a")
    assert "mask_shared" not in art.device_source  # the mask stays in registers, the accumulator's columns
    assert not [w for w in recwarn if "copied into a shared tile" in str(w.message)]
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((64, 64)).astype(np.float16), rng.standard_normal((32, 64)).astype(np.float16)
    idx = rng.integers(-2, 40, 32).astype(np.int32)
    out = np.zeros((40, 64), np.float32)
    tw.compile(_masked_scores_scattered(), target="cpu")(a, b, idx, out)
    scores = a.astype(np.float64) @ b.astype(np.float64).T  # 64 x 32
    want = np.zeros((40, 64))
    keep = idx >= 0
    np.add.at(want, idx[keep], scores[:, keep].T)
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
