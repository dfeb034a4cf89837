"""A gather in a ``T.Pipelined`` loop is issued ahead, as TileLang issues it: sparse MLA's
``KV_shared[i, d] = KV[Indices[k * BI + i], d]`` is a producer of the software pipeline
(``inject_software_pipeline``: the tile gets a version per stage, iteration ``k + 1``'s rows are
loaded while iteration ``k`` computes), and its 16-byte runs go as ``cp.async`` (zero-filled where
the row is out of range, ``rules.vector_runs``). A gather whose address reads what the loop
computes, or whose tile the loop reads before it, stays where it is. Both CPU interpreters
against numpy, the pass's record, the CUDA, NVRTC."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T

from .interpreters import on_both_interpreters

BI, COLS, N, CHUNKS, SOURCE_ROWS = 64, 64, 64, 4, 300


def gather_gemm(n: int = N):
    """``Y = sum over chunks k of X[Idx[k * BI:(k + 1) * BI]] @ W^T`` (``W``: ``n`` rows), a row out of
    range read as zeros."""

    @T.prim_func
    def pipelined_gather_gemm(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
                              W: T.Tensor((n, COLS), "float16"), Y: T.Tensor((BI, n), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((BI, COLS), "float16")
            w = T.alloc_shared((n, COLS), "float16")
            acc = T.alloc_fragment((BI, n), "float32")
            T.copy(W, w)
            T.clear(acc)
            for k in T.Pipelined(CHUNKS, num_stages=2):
                for i, d in T.Parallel(BI, COLS):
                    s[i, d] = X[Idx[k * BI + i], d]
                T.gemm(s, w, acc, transpose_B=True)
            T.copy(acc, Y)

    return pipelined_gather_gemm


pipelined_gather_gemm = gather_gemm()


@T.prim_func
def pipelined_gather_copy(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
                          Y: T.Tensor((CHUNKS, BI, COLS), "float16")):
    """Each iteration's gathered rows, doubled, written out by the threads (no tensor cores: the
    thread-level interpreter runs it, cp.async and its groups included)."""
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((BI, COLS), "float16")
        for k in T.Pipelined(CHUNKS, num_stages=3):
            for i, d in T.Parallel(BI, COLS):
                s[i, d] = X[Idx[k * BI + i], d]
            for i, d in T.Parallel(BI, COLS):
                Y[k, i, COLS - 1 - d] = s[i, d] * 2


@T.prim_func
def gather_after_its_reader(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
                            Y: T.Tensor((CHUNKS, BI, COLS), "float16")):
    """Each iteration writes out the rows the last one gathered before gathering its own: issued
    ahead, the gather would overwrite them first."""
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((BI, COLS), "float16")
        T.clear(s)
        for k in T.Pipelined(CHUNKS, num_stages=2):
            for i, d in T.Parallel(BI, COLS):
                Y[k, i, d] = s[i, d]
            for i, d in T.Parallel(BI, COLS):
                s[i, d] = X[Idx[k * BI + i], d]


@T.prim_func
def gather_at_a_computed_row(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
                             Y: T.Tensor((CHUNKS, BI, COLS), "float16")):
    """The rows are shifted by what the loop computes (a local scalar): known only in its iteration."""
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((BI, COLS), "float16")
        shift = T.alloc_local((1,), "int32")
        for k in T.Pipelined(CHUNKS, num_stages=2):
            shift[0] = k % 3
            for i, d in T.Parallel(BI, COLS):
                s[i, d] = X[Idx[k * BI + i] + shift[0], d]
            for i, d in T.Parallel(BI, COLS):
                Y[k, i, d] = s[i, d]


@T.prim_func
def gather_read_after_the_loop(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
                               Y: T.Tensor((BI, COLS), "float16")):
    """The tile is read after the loop too (the last iteration's rows): it keeps one version, and
    the gather its place."""
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((BI, COLS), "float16")
        for k in T.Pipelined(CHUNKS, num_stages=2):
            for i, d in T.Parallel(BI, COLS):
                s[i, d] = X[Idx[k * BI + i], d]
        T.copy(s, Y)


def indices(seed: int = 0) -> np.ndarray:
    idx = np.random.default_rng(seed).integers(0, SOURCE_ROWS, CHUNKS * BI).astype(np.int32)
    idx[[3, 70, 200]] = [SOURCE_ROWS, -1, SOURCE_ROWS + 5]  # out of range: read as zeros
    return idx


def gathered(x, idx):
    inside = (idx >= 0) & (idx < SOURCE_ROWS)
    return np.where(inside[:, None], x[np.clip(idx, 0, SOURCE_ROWS - 1)], 0)


def expected_sum(x, idx, w):
    rows = gathered(x.astype(np.float64), idx).reshape(CHUNKS, BI, COLS)
    return (rows @ w.astype(np.float64).T).sum(axis=0)


def _inputs(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SOURCE_ROWS, COLS)).astype(np.float16)
    w = rng.standard_normal((N, COLS)).astype(np.float16)
    return x, indices(seed), w


@on_both_interpreters
def test_each_iteration_reads_the_rows_gathered_for_it(run):
    x, idx, _ = _inputs()
    y = np.zeros((CHUNKS, BI, COLS), np.float16)
    run(pipelined_gather_copy, x, idx, y)
    np.testing.assert_array_equal(y, (gathered(x, idx).reshape(CHUNKS, BI, COLS) * 2)[:, :, ::-1])


def test_a_pipelined_gather_feeds_the_gemm_of_its_own_iteration():
    x, idx, w = _inputs()
    y = np.zeros((BI, N), np.float32)
    tw.compile(pipelined_gather_gemm, target="cpu")(x, idx, w, y)  # wgmma: the tile level only
    np.testing.assert_allclose(y, expected_sum(x, idx, w), rtol=1e-3, atol=1e-2)


@on_both_interpreters
def test_gathers_that_cannot_be_issued_ahead_still_compute_the_same(run):
    x, idx, _ = _inputs(2)
    rows = gathered(x, idx).reshape(CHUNKS, BI, COLS)
    y = np.full((CHUNKS, BI, COLS), 7, np.float16)
    run(gather_after_its_reader, x, idx, y)
    np.testing.assert_array_equal(y, np.concatenate([np.zeros((1, BI, COLS), np.float16), rows[:-1]]))
    shifts = np.arange(CHUNKS) % 3
    shifted = gathered(x, idx + np.repeat(shifts, BI).astype(np.int32)).reshape(CHUNKS, BI, COLS)
    run(gather_at_a_computed_row, x, idx, y)
    np.testing.assert_array_equal(y, shifted)
    last = np.zeros((BI, COLS), np.float16)
    run(gather_read_after_the_loop, x, idx, last)
    np.testing.assert_array_equal(last, rows[-1])


def _pipelines(func) -> list:
    return tw.lower(func, target="sm_90a").func.attrs.get("pipelines", [])


def test_the_gather_is_a_producer_with_a_version_per_stage():
    for func, stages in ((pipelined_gather_gemm, 2), (pipelined_gather_copy, 3)):
        (record,) = _pipelines(func)
        assert (record["mode"], record["buffers"], record["producers"], record["stages"]) == \
            ("cp_async", ["s"], 1, stages)


def test_a_gather_that_reads_the_loop_or_whose_tile_is_read_before_it_or_after_the_loop_is_not_issued_ahead():
    for func in (gather_after_its_reader, gather_at_a_computed_row, gather_read_after_the_loop):
        assert _pipelines(func) == [], func.name  # nothing else to pipeline: a plain loop
        source = tw.lower(func, target="sm_90a").device_source
        assert "tw::cp_async<" not in source.split("// ---- kernel ----")[1]


def test_the_issued_rows_go_by_cp_async_zero_filled_out_of_range(nvrtc_check):
    source = tw.lower(pipelined_gather_gemm, target="sm_90a").device_source
    kernel = source.split("// ---- kernel ----")[1]
    copies = [line for line in kernel.splitlines() if "tw::cp_async<16>((&tw::swizzled<tw::half, 128>(s, " in line]
    assert len(copies) >= 2  # the prologue's and the steady state's (split by Idx's own bounds check)
    # the row's bounds as its zero fill; the row's index read once, for the check and the address
    assert copies[0].strip().endswith("(&X[((Idx_at * 64) + d0)]), ((Idx_at >= 0) && (Idx_at < 300)));")
    assert copies[1].strip().endswith("(&X[((Idx_at_1 * 64) + d0_1)]), ((Idx_at_1 >= 0) && (Idx_at_1 < 300)));")
    # the prologue reads its rows' indices itself; the steady state's issue reads them from a thread
    # array filled before the loop and, for the next issue, before each iteration's gemm
    # (prefetch_gather_indices)
    assert "int Idx_at = Idx[i];" in kernel and "int Idx_at_1 = Idx_at_ahead[it_3];" in kernel
    assert kernel.count("Idx[") == 3 and "Idx_at_ahead[it_4] = Idx[(((k * 64) + i_3) + 128)];" in kernel
    assert "(s, " not in "".join(line for line in kernel.splitlines() if "copy_vec" in line)
    assert "tw::cp_async_wait<1>();" in kernel
    nvrtc_check(source, "sm_90a")
