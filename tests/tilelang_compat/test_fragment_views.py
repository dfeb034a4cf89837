"""Fragments indexed in a ``T.Parallel`` loop other than by its variables in order, where the
layouts still give each thread the elements it reads (``rules.fragments.ParallelNest``):

* up to unit dimensions: LayerNorm backward's loop over ``(1, D)`` reads ``x_hat[i, j]`` and the
  row sum ``sum_dx_hat[0]`` and accumulates ``dgamma_acc[j]``, a ``(D,)`` fragment
  (``ir.layout.with_shape``);
* a slice: GQA decoding's combine kernel reads ``lse_local[k, j]`` in a loop over ``j`` inside a
  serial loop over ``k`` (``ir.layout.slice_layout``): every slice lies over the threads as the
  loop's elements do, so each thread reads its own registers.

The slot arithmetic is checked element by element against the layouts for every thread, and the
programs run on both CPU interpreters against numpy (the thread-level one runs the final code,
registers and all); what stays refused. (TileLang's own LayerNorm backward and GQA decoding build
unchanged since: ``scripts/experiments/tilelang_examples.py``.)"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import BlockedLayout, slice_layout, slice_slots, stacked_layout, unravel, with_shape

from .interpreters import on_both_interpreters
from .kernel_files import lower_main_with


def _owners(layout):
    """{element index tuple: (thread, slot)} of a blocked layout, from its own forward map."""
    held = {}
    for tid in range(layout.threads):
        for j in range(layout.local_size):
            idx, guard = layout.forward(tid, j)
            if guard is None or guard.value:  # on ints the guard folds to a constant
                held[tuple(int(x) for x in idx)] = (tid, j)
    return held


@pytest.mark.parametrize("layout", [BlockedLayout((1, 256), 64), BlockedLayout((1, 512), 64, 4),
                                    BlockedLayout((1, 1000), 128, 1, 1024)])
def test_unit_dimensions_leave_every_element_where_it_was(layout):
    flat = with_shape(layout, (layout.shape[-1],))
    assert flat is not None and flat.local_size == layout.local_size
    two, one = _owners(layout), _owners(flat)
    assert {(0,) + k: v for k, v in one.items()} == two


@pytest.mark.parametrize("layout, lead", [(BlockedLayout((8, 128), 128), 1), (BlockedLayout((4, 2, 256), 64, 4), 2),
                                          (BlockedLayout((3, 1024), 256, 4), 1)])
def test_each_slice_lies_as_the_slice_layout_at_its_own_slots(layout, lead):
    inner = slice_layout(layout, lead)
    assert stacked_layout(inner, layout.shape[:lead]) == layout
    per = slice_slots(layout, lead)
    whole, part = _owners(layout), _owners(inner)
    n_lead = int(np.prod(layout.shape[:lead]))
    for k in range(n_lead):
        lead_idx = tuple(int(x) for x in unravel(k, layout.shape[:lead]))
        for idx, (tid, j) in part.items():
            assert whole[lead_idx + idx] == (tid, k * per + j)


def test_a_slice_that_does_not_lie_alike_has_no_slice_layout():
    assert slice_layout(BlockedLayout((8, 96), 128), 1) is None  # a slice is less than a sweep
    assert with_shape(BlockedLayout((4, 8), 32), (32,)) is None  # another shape, not unit dimensions


@T.prim_func
def layer_norm_backward(X: T.Tensor((8, 256), "float32"), DY: T.Tensor((8, 256), "float32"),
                        DX: T.Tensor((8, 256), "float32"), DG: T.Tensor((256,), "float32")):
    """LayerNorm backward's shape of code: rows one at a time in a loop over (1, D), a row sum read
    at [0], a (D,) accumulator over the rows, added atomically at the end."""
    with T.Kernel(2, threads=64) as bx:
        x_smem = T.alloc_shared((1, 256), "float32")
        dx_smem = T.alloc_shared((1, 256), "float32")
        x_hat = T.alloc_fragment((1, 256), "float32")
        total = T.alloc_fragment((1,), "float32")
        acc = T.alloc_fragment((256,), "float32")
        T.clear(acc)
        for k in T.serial(4):
            row = bx * 4 + k
            T.copy(X[row, 0], x_smem)
            for i, j in T.Parallel(1, 256):
                x_hat[i, j] = x_smem[i, j] * 2
            T.reduce_sum(x_hat, total, dim=1)
            for i, j in T.Parallel(1, 256):
                dx_smem[i, j] = x_hat[i, j] - total[0] / 256
                acc[j] += DY[row, j] * x_hat[i, j]
            T.copy(dx_smem, DX[row, 0])
        for j in T.Parallel(256):
            T.atomic_add(DG[j], acc[j])


@on_both_interpreters
def test_unit_dimensions_in_layer_norm_backward(run):
    rng = np.random.default_rng(12)
    x, dy = rng.standard_normal((8, 256)).astype(np.float32), rng.standard_normal((8, 256)).astype(np.float32)
    dx, dg = np.zeros((8, 256), np.float32), np.zeros(256, np.float32)
    run(layer_norm_backward, x, dy, dx, dg)
    x2 = 2 * x.astype(np.float64)
    np.testing.assert_allclose(dx, x2 - x2.mean(1, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dg, (dy * x2).sum(0), rtol=1e-5, atol=1e-4)


@T.prim_func
def combine(Lse: T.Tensor((4, 128), "float32"), Part: T.Tensor((4, 128), "float32"), Out: T.Tensor((128,), "float32")):
    """GQA decoding's combine: per column j, the log-sum-exp of 4 split results and their weighted
    sum, with lse_local[k, j] read in a loop over j inside a serial loop over k."""
    with T.Kernel(1, threads=128):
        lse_local = T.alloc_fragment((4, 128), "float32")
        lse_max = T.alloc_fragment((128,), "float32")
        lse_sum = T.alloc_fragment((128,), "float32")
        acc = T.alloc_fragment((128,), "float32")
        for k, j in T.Parallel(4, 128):
            lse_local[k, j] = Lse[k, j]
        T.reduce_max(lse_local, lse_max, dim=0, clear=True)
        T.clear(lse_sum)
        T.clear(acc)
        for k in T.serial(4):
            for j in T.Parallel(128):
                lse_sum[j] += T.exp2(lse_local[k, j] - lse_max[j])
        for j in T.Parallel(128):
            lse_sum[j] = T.log2(lse_sum[j]) + lse_max[j]
        for k in T.serial(4):
            for j in T.Parallel(128):
                acc[j] += Part[k, j] * T.exp2(lse_local[k, j] - lse_sum[j])
        T.copy(acc, Out)


@on_both_interpreters
def test_slices_in_gqa_decoding_s_combine(run):
    rng = np.random.default_rng(13)
    lse, part = rng.standard_normal((4, 128)).astype(np.float32) * 3, rng.standard_normal((4, 128)).astype(np.float32)
    out = np.zeros(128, np.float32)
    run(combine, lse, part, out)
    l64 = lse.astype(np.float64)
    total = np.log2(np.exp2(l64 - l64.max(0)).sum(0)) + l64.max(0)
    np.testing.assert_allclose(out, (part * np.exp2(l64 - total)).sum(0), rtol=1e-5, atol=1e-6)


@T.prim_func
def slice_copies(Lse: T.Tensor((4, 128), "float32"), Out: T.Tensor((4, 128), "float32")):
    """``T.copy`` of one slice of a fragment to a whole one and back (MHA inference's
    ``T.copy(lse_local[k, :], lse_local_split)``)."""
    with T.Kernel(1, threads=128):
        lse_local = T.alloc_fragment((4, 128), "float32")
        split = T.alloc_fragment((128,), "float32")
        for k, j in T.Parallel(4, 128):
            lse_local[k, j] = Lse[k, j]
        for k in T.serial(4):
            T.copy(lse_local[3 - k, :], split)
            for j in T.Parallel(128):
                split[j] = split[j] * (k + 1)
            T.copy(split, lse_local[3 - k, :])
        T.copy(lse_local, Out)


@on_both_interpreters
def test_copies_of_a_slice_of_a_fragment(run):
    lse = np.random.default_rng(14).standard_normal((4, 128)).astype(np.float32)
    out = np.zeros_like(lse)
    run(slice_copies, lse, out)
    np.testing.assert_array_equal(out, lse * np.array([4, 3, 2, 1], np.float32)[:, None])


@T.prim_func
def rows_over_another_width(X: T.Tensor((16, 64), "float32"), S: T.Tensor((16, 40), "float32"),
                            Out: T.Tensor((16, 40), "float32")):
    """GQA decoding's logits: the rows of a (16, 64) fragment's maxima and sums read in a loop over a
    (16, 40) shared tile (``S_shared[h, k] = exp2(S_shared[h, k] - scores_max[h]) / logsum[h]``)."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((16, 64), "float32")
        row_max = T.alloc_fragment((16,), "float32")
        row_sum = T.alloc_fragment((16,), "float32")
        s_shared = T.alloc_shared((16, 40), "float32")
        T.copy(X, x)
        T.copy(S, s_shared)
        T.reduce_max(x, row_max, dim=1)
        T.reduce_sum(x, row_sum, dim=1)
        for h, k in T.Parallel(16, 40):
            s_shared[h, k] = (s_shared[h, k] - row_max[h]) / row_sum[h]
        T.copy(s_shared, Out)


@on_both_interpreters
def test_rows_of_a_fragment_over_a_tile_of_another_width(run):
    rng = np.random.default_rng(15)
    x, s = rng.random((16, 64)).astype(np.float32) + 0.5, rng.standard_normal((16, 40)).astype(np.float32)
    out = np.zeros_like(s)
    run(rows_over_another_width, x, s, out)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out, (s - x64.max(1, keepdims=True)) / x64.sum(1, keepdims=True), rtol=1e-5)


def test_each_row_s_holders_take_each_column_once():
    """``ProjectedLayout.sharer_index`` numbers the threads holding each row 0 .. sharers - 1, for
    every layout whose rows the compiler reads (so each (row, column) above runs exactly once)."""
    from tileworkbench.ir.layout import WgmmaAccumLayout
    from tileworkbench.ir.fragment_parts import project

    for base in (WgmmaAccumLayout((64, 128), 1, 2), WgmmaAccumLayout((128, 64), 2), BlockedLayout((16, 64), 128),
                 BlockedLayout((4, 1024), 128, 4), BlockedLayout((64, 128), 128, 4)):
        rows = project(base, (0,))
        holders = {}
        for tid in range(base.threads):
            for r in range(rows.local_size):
                (row,), guard = rows.forward(tid, r)
                if guard is None or guard.value:
                    holders.setdefault(int(ir.const_int(row)), []).append(ir.const_int(rows.sharer_index(tid)))
        assert sorted(holders) == list(range(base.shape[0]))
        assert all(sorted(v) == list(range(rows.sharers)) for v in holders.values()), base


def test_the_slices_are_each_thread_s_own_registers():
    code = tw.lower(combine, target="sm_90a").kernel_source.split('extern "C"')[1]
    assert "float lse_local[4];" in code and re.search(r"lse_local\[k(_\d+)?\]", code)  # slot k * 1 + 0


@pytest.mark.parametrize("statements, message", [
    # a loop past a fragment's end (TileLang's attention-sink backward writes sinks[i], heads long,
    # for i up to block_M): named, where TileLang writes past the fragment
    ("f = T.alloc_fragment((16,), 'float32')\n        for i in T.Parallel(128):\n            f[i] = A[0, i]\n"
     "        T.copy(f, B[0, 0:16])",
     "the T.Parallel variable i runs to 127, past the 16 elements of f's dimension 0"),
    # a row written in a loop over another width: every thread sharing the row would write it
    ("x = T.alloc_fragment((16, 64), 'float32')\n        m = T.alloc_fragment((16,), 'float32')\n"
     "        s = T.alloc_shared((16, 40), 'float32')\n        T.copy(A[0:8, 0:64], x[0:8, :])\n"
     "        T.reduce_max(x, m, dim=1)\n        for h, k in T.Parallel(16, 40):\n            m[h] = s[h, k]",
     "fragment m is written in a loop whose columns are not its own"),
    # a column where the loop's variable is no unit dimension: not the loop's elements
    ("f = T.alloc_fragment((2, 64), 'float32')\n        g = T.alloc_fragment((64,), 'float32')\n"
     "        for i, j in T.Parallel(2, 64):\n            f[i, j] = A[i, j]\n            g[j] = f[i, j]\n"
     "        T.copy(g, B[0, 0:64])",
     "fragment g"),
])
def test_what_stays_refused(statements, message, tmp_path):
    with pytest.raises(tw.CompileError, match=message):
        lower_main_with(tmp_path, 'A: T.Tensor((8, 128), "float32"), B: T.Tensor((8, 128), "float32")', statements)


def narrow_slices(M: int):
    """The slices ``lse[k, i]`` of a (4, M) float16 fragment copied from global memory, read in a
    loop over M < 128 threads' worth of elements: the fragment takes no runs and its rows are
    padded to whole sweeps of the threads, so every slice lies as the (M,) fragments do."""
    @T.prim_func
    def main(G: T.Tensor((4, M), "float16"), Out: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            lse = T.alloc_fragment((4, M), "float16")
            split = T.alloc_fragment((M,), "float32")
            top = T.alloc_fragment((M,), "float32")
            total = T.alloc_fragment((M,), "float32")
            T.copy(G, lse)
            T.reduce_max(lse, top, dim=0, clear=True)
            T.clear(total)
            for k in T.serial(4):
                for i in T.Parallel(M):
                    split[i] = lse[k, i]
                for i in T.Parallel(M):
                    total[i] += T.exp2(split[i] - top[i])
            T.copy(total, Out)
    return main


@on_both_interpreters
@pytest.mark.parametrize("M", [32, 64, 96])
def test_slices_of_rows_narrower_than_the_threads(run, M):
    g = np.random.default_rng(M).standard_normal((4, M)).astype(np.float16)
    out = np.zeros(M, np.float32)
    run(narrow_slices(M), g, out)
    g32 = g.astype(np.float32)
    np.testing.assert_allclose(out, np.exp2(g32 - g32.max(0)).sum(0), rtol=1e-6)


def test_narrow_slices_compile(nvrtc_check):
    for M in (32, 96):
        nvrtc_check(tw.lower(narrow_slices(M), target="sm_90a").device_source, "sm_90a")


def weighted_rows(threads: int, scoped: bool):
    """mHC's pre kernel's mix: ``ol[j] += pre * xl[h, j]`` over the 4 rows of a (4, 256) float32
    fragment, in the 64 threads of an ``else`` scope or in all ``threads``. Every thread holding all
    of ``xl`` would take 1024 registers; read only as slices, it stays a fragment whose slices lie
    over the threads as ``ol`` does."""

    @T.prim_func
    def main(R: T.Tensor((4, 256), "float32"), P: T.Tensor((4,), "float32"), O: T.Tensor((256,), "float32"),
             Flag: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads):
            if scoped and T.get_thread_binding() < 32:
                Flag[0] = 1.0
            else:
                xs = T.alloc_shared((4, 256), "float32")
                xl = T.alloc_fragment((4, 256), "float32")
                T.copy(R, xs)
                T.copy(xs, xl)
                ol = T.alloc_fragment(256, "float32")
                T.clear(ol)
                for h in T.serial(4):
                    pre = P[h]
                    for j in T.Parallel(256):
                        ol[j] += pre * xl[h, j]
                T.copy(ol, O)

    return main


@on_both_interpreters
@pytest.mark.parametrize("threads, scoped, per_thread", [(96, False, 12), (96, True, 16), (128, False, 8)])
def test_a_fragment_too_big_for_every_thread_read_as_slices_stays_one(run, threads, scoped, per_thread):
    kernel = weighted_rows(threads, scoped)
    assert f"float xl[{per_thread}];" in tw.lower(kernel, target="sm_90a").kernel_source  # not 1024 a thread
    rng = np.random.default_rng(threads)
    r, p = rng.standard_normal((4, 256)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    out, flag = np.zeros(256, np.float32), np.zeros(1, np.float32)
    run(kernel, r, p, out, flag)
    np.testing.assert_allclose(out, (p[:, None].astype(np.float64) * r).sum(0), rtol=1e-5, atol=1e-5)


def split_combine(splits=4, rows=128, dim=128):
    """MHA inference's combine step: each split's log-sum-exp ``lse[k, i]`` (a (splits, rows)
    fragment: its maximum over the splits, slices copied and read in loops whose rows are the
    output accumulator's) scales that split's partial output. The slices lie as the accumulator's
    rows (``ir.layout.StackedLayout`` of its ``ProjectedLayout``): no blocked layout gives them that."""

    @T.prim_func
    def main(Lse: T.Tensor((splits, rows), "float16"), Parts: T.Tensor((rows, splits, dim), "float16"),
             Out: T.Tensor((rows, dim), "float32")):
        with T.Kernel(1, threads=128):
            po = T.alloc_fragment((rows, dim), "float16")
            acc = T.alloc_fragment((rows, dim), "float32")
            lse = T.alloc_fragment((splits, rows), "float16")
            lse_split = T.alloc_fragment((rows,), "float32")
            logsum = T.alloc_fragment((rows,), "float32")
            top = T.alloc_fragment((rows,), "float32")
            scale = T.alloc_fragment((rows,), "float32")
            T.clear(logsum)
            T.clear(acc)
            T.copy(Lse, lse)
            T.reduce_max(lse, top, dim=0, clear=True)
            for k in T.Pipelined(splits):
                T.copy(lse[k, :], lse_split)
                for i in T.Parallel(rows):
                    logsum[i] += T.exp2(lse_split[i] - top[i])
            for i in T.Parallel(rows):
                logsum[i] = T.log2(logsum[i]) + top[i]
            for k in T.Pipelined(splits, num_stages=2):
                T.copy(Parts[0:rows, k, :], po)
                for i in T.Parallel(rows):
                    lse_split[i] = lse[k, i]
                for i in T.Parallel(rows):
                    scale[i] = T.exp2(lse_split[i] - logsum[i])
                for i, j in T.Parallel(rows, dim):
                    acc[i, j] += po[i, j] * scale[i]
            T.copy(acc, Out)

    return main


def split_combine_want(lse, parts):
    lse = lse.astype(np.float64)
    logsum = np.log2(np.exp2(lse - lse.max(0)).sum(0)) + lse.max(0)
    return (parts.astype(np.float64) * np.exp2(lse - logsum).T[:, :, None]).sum(1)


@on_both_interpreters
def test_slices_lie_as_the_rows_of_an_accumulator(run):
    kernel = split_combine()
    assert "tw::half lse[64];" in tw.lower(kernel, target="sm_90a").kernel_source  # 4 splits x 16 rows a thread
    rng = np.random.default_rng(4)
    lse, parts = rng.standard_normal((4, 128)).astype(np.float16), rng.standard_normal((128, 4, 128)).astype(np.float16)
    out = np.zeros((128, 128), np.float32)
    run(kernel, lse, parts, out)
    np.testing.assert_allclose(out, split_combine_want(lse, parts), rtol=1e-5, atol=1e-5)


def test_stacked_slices_hold_each_element_where_its_slice_layout_does():
    from tileworkbench.ir.fragment_parts import project
    from tileworkbench.ir.layout import StackedLayout, slice_layout, slice_slots, stacked_layout

    rows = project(BlockedLayout((128, 128), 128, 4), (0,))
    stacked = stacked_layout(rows, (4,))
    assert isinstance(stacked, StackedLayout) and slice_layout(stacked, 1) == rows
    per = slice_slots(stacked, 1)
    for tid in range(0, 128, 7):
        for k in range(4):
            for j in range(per):
                (kk, i), _ = stacked.forward(tid, k * per + j)
                assert (int(kk), int(i)) == (k, int(rows.forward(tid, j)[0][0]))
