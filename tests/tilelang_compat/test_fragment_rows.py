"""Rows of fragments (``ir.fragment_parts.ProjectedLayout``) and reductions that stay in registers, on the
CPU: the layout algebra the shuffles rely on, checked element by element against the base layout
for every thread; what the passes make of TileLang's norm, softmax and GEMM-epilogue programs; the
errors for what is not supported; NVRTC compiles the results for sm_90a."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.errors import CompileError
from tileworkbench.examples.tilelang_programs.norms import rms_norm
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import BlockedLayout, MmaAccumLayout, WgmmaAccumLayout
from tileworkbench.ir.fragment_parts import project
from tileworkbench.ir.visitor import collect

from .interpreters import on_both_interpreters

SM90 = "sm_90a"

LAYOUTS = [
    WgmmaAccumLayout((64, 64), 1), WgmmaAccumLayout((128, 128), 1), WgmmaAccumLayout((128, 256), 2),
    # warpgroups side by side along N (a 64-row tile on two or four warpgroups)
    WgmmaAccumLayout((64, 128), 1, 2), WgmmaAccumLayout((64, 256), 1, 4), WgmmaAccumLayout((128, 128), 2, 2),
    MmaAccumLayout((64, 64), 2, 2), MmaAccumLayout((128, 128), 2, 2), MmaAccumLayout((64, 128), 1, 4),
    BlockedLayout((1, 1024), 128), BlockedLayout((4, 1024), 128), BlockedLayout((8, 16), 128),
    BlockedLayout((128, 64), 128), BlockedLayout((2, 256), 256), BlockedLayout((16, 8), 32),
    BlockedLayout((4, 1024), 128, 4), BlockedLayout((1, 8192), 128, 8), BlockedLayout((2, 512), 64, 8),
    # rows shorter than a sweep of runs (TileLang's layout of top-k's 64 x 128 float32 logits: a
    # warp's runs of 4 per row, 4 rows a sweep), down to rows of one run
    BlockedLayout((64, 128), 128, 4), BlockedLayout((4, 256), 128, 4), BlockedLayout((32, 64), 128, 8),
    BlockedLayout((64, 8), 64, 8),
]


def _value(x):
    """A layout's index arithmetic on Python ints gives ints; guards are IR comparisons or None."""
    return x if isinstance(x, int) else None


def _holdings(layout, tid):
    """{row: slot} of the projected layout for one thread, and the rows the base gives it."""
    rows = {}
    for r in range(layout.local_size):
        (row,), guard = layout.forward(tid, r)
        assert guard is None or row < layout.base.shape[0]
        rows.setdefault(row, r)
    return rows


@pytest.mark.parametrize("base", LAYOUTS, ids=lambda b: f"{type(b).__name__}{b.shape}")
def test_each_element_finds_its_row_in_its_own_thread(base):
    rows = project(base, (0,))
    for tid in range(base.threads):
        held = _holdings(rows, tid)
        for j in range(base.local_size):
            (row, _col), guard = base.forward(tid, j)
            if guard is not None and not (row < base.shape[0]):
                continue
            slot = rows.slot_of(j)
            assert 0 <= slot < rows.local_size
            assert rows.forward(tid, slot)[0] == (row,), (tid, j)
            assert row in held


@pytest.mark.parametrize("base", LAYOUTS, ids=lambda b: f"{type(b).__name__}{b.shape}")
def test_the_threads_sharing_a_row_are_the_shuffle_lanes_and_the_warp_slots(base):
    rows = project(base, (0,))
    holders: dict = {}
    for tid, j in itertools.product(range(base.threads), range(base.local_size)):
        (row, _col), guard = base.forward(tid, j)
        if guard is None or row < base.shape[0]:
            holders.setdefault(row, set()).add(tid)
    assert sorted(holders) == list(range(base.shape[0]))  # every row is held
    lanes = 1 << len(rows.lane_masks)
    for row, threads in holders.items():
        assert len(threads) == lanes * rows.warp_sharers, row
        for tid in threads:
            for mask in rows.lane_masks:  # a shuffle partner holds the same row in the same slot
                partner = tid ^ mask
                assert partner in threads and partner // 32 == tid // 32
                assert _holdings(rows, partner)[row] == _holdings(rows, tid)[row]
        if rows.warp_sharers > 1:
            slots = {tid // 32: rows.warp_slot(tid) for tid in threads}
            assert sorted(slots.values()) == list(range(rows.warp_sharers))
        owners = [tid for tid in threads if rows.owner(tid) is None or _truth(rows.owner(tid))]
        assert len(owners) == 1, (row, owners)


def _truth(cond):
    """Evaluate an owner condition built from Python ints (``ir.cmp``/``and`` nodes)."""
    from tileworkbench.analysis.evaluate import evaluate

    return bool(evaluate(cond, {}))


@pytest.mark.parametrize("layout", [BlockedLayout((4, 1024), 128, 4), BlockedLayout((8192,), 128, 8),
                                    BlockedLayout((3, 512), 128, 4), BlockedLayout((16, 64), 128)])
def test_a_blocked_layout_holds_every_element_once_in_runs_of_neighbours(layout):
    seen = {}
    for tid, j in itertools.product(range(layout.threads), range(layout.local_size)):
        idx, guard = layout.forward(tid, j)
        flat = 0
        for i, n in zip(idx, layout.shape):
            flat = flat * n + i
        assert flat not in seen, (tid, j, seen.get(flat))
        seen[flat] = (tid, j)
        if j % layout.vec:  # the element after its run's previous one, in the same thread
            assert seen[flat - 1] == (tid, j - 1)
    assert sorted(seen) == list(range(layout.numel))


@pytest.mark.parametrize("layout, kept, message", [
    (BlockedLayout((4, 96), 32, 4), (0,), "over 32 threads in runs of 4 \\(neither divides"),
    (BlockedLayout((16, 24), 96, 4), (0,), "rows shared by 6 threads"),
    (BlockedLayout((16, 8), 64, 8), (0,), "leave a sweep part-filled"),
    (BlockedLayout((4, 96), 128), (0,), "neither divides the other"),
    (BlockedLayout((4, 48), 96), (0,), "power of two"),
    (BlockedLayout((2, 4, 8), 64), (0,), "only rows of 2-D fragments"),
    (WgmmaAccumLayout((64, 64), 1), (1,), "only rows of 2-D fragments"),
])
def test_unsupported_projections_say_why(layout, kept, message):
    with pytest.raises(ValueError, match=message):
        project(layout, kept)


@tilelang.jit(target=SM90)
def gemm_softmax_rows(A, B, block_M, block_N, block_K, threads=128):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        a = T.alloc_shared((block_M, block_K), T.float16)
        b = T.alloc_shared((block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        m = T.alloc_fragment((block_M,), T.float32)
        s = T.alloc_fragment((block_M,), T.float32)
        T.clear(acc)
        T.fill(m, -T.infinity(T.float32))
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], a)
            T.copy(B[bx * block_N, k * block_K], b)
            T.gemm(a, b, acc, transpose_B=True)
        T.reduce_max(acc, m, dim=1, clear=False)
        for i, j in T.Parallel(block_M, block_N):
            acc[i, j] = T.exp2(acc[i, j] - m[i])
        T.reduce_sum(acc, s, dim=1)
        for i, j in T.Parallel(block_M, block_N):
            acc[i, j] = acc[i, j] / s[i]
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


def _source(kernel):
    return kernel.get_kernel_source()


def test_a_norm_reduces_in_registers_with_shuffles_and_one_scratch_row_per_warp():
    src = _source(rms_norm.compile(M=512, N=1024, blk_m=1))
    assert src.count("__shfl_xor_sync") == 5  # lanes 1, 2, 4, 8, 16 of a row spread over 128 threads
    assert "A_powsum_warps" in src and "reduce_scratch" not in src
    # lane 0 of every warp writes its warp's partial (not only the row's one storing thread)
    write = src[:src.index("A_powsum_warps[((tx / 32)")].rsplit("if (", 1)[1]
    assert write.startswith("((tx % 32) == 0))") and "tx / 32" not in write, write


def test_a_gemm_accumulators_rows_reduce_within_the_four_lanes_that_hold_them():
    src = _source(gemm_softmax_rows.compile(M=256, N=256, K=256, block_M=64, block_N=64, block_K=64))
    body = src[src.find("consumer warpgroups"):]
    assert body.count("__shfl_xor_sync") == 4  # two reductions, lanes 1 and 2 each
    assert "_warps" not in body and "reduce_scratch" not in body  # a wgmma row never leaves its warp
    assert "fmaxf(m[" in body  # clear=False: the row max folds in what m held


def test_mma_sync_accumulators_combine_the_warps_side_by_side_through_shared_memory():
    on_mma_sync = tilelang.jit(target=SM90, pass_configs={tilelang.PassConfigKey.TW_DISABLE_WGMMA: True})(
        gemm_softmax_rows.fn)
    src = _source(on_mma_sync.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32))
    assert "tw::gemm_ss<" in src and "m_warps" in src and "s_warps" in src  # 2x2 warps: two share a row


def test_a_row_fragment_written_in_a_loop_over_the_whole_is_refused_with_its_line():
    @tilelang.jit(target=SM90)
    def bad(A, blk_m):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), T.float32)
            s = T.alloc_fragment((blk_m,), T.float32)
            T.copy(A[bx * blk_m, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(blk_m, N):
                s[i] = x[i, j]
            T.copy(s, B[bx * blk_m])
        return B

    with pytest.raises(CompileError, match="every thread holding a row would write it") as info:
        bad.compile(M=256, N=256, blk_m=2)
    assert "s[i] = x[i, j]" in str(info.value)


def test_a_row_store_to_memory_is_made_by_one_thread_of_those_that_hold_it():
    from tileworkbench.examples import row_sum

    src = tilelang.compile(row_sum(1024, 512, 16), out_idx=[1], target=SM90).get_kernel_source()
    store = src[src.rfind("B[("):]
    guard = src[:src.rfind("B[(")].rsplit("if (", 1)[1]
    assert "tx % 32) == 0" in guard and "tx / 32) == 0" in guard, guard
    assert store.startswith("B[((bx * 16)")


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
@pytest.mark.parametrize("make", [
    lambda: rms_norm.compile(M=512, N=1024, blk_m=4),
    lambda: gemm_softmax_rows.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=64),
])
def test_nvrtc_compiles_them_for_sm90a(make):
    kernel = make()
    nvrtc.compile_check(kernel.get_kernel_source(), SM90)


def test_fragments_computed_in_registers_move_in_16_byte_runs():
    from tileworkbench.examples.tilelang_programs.softmax import softmax_kernel

    src = _source(softmax_kernel.compile(M=256, N=8192))
    assert "alignas(16) tw::half x[64];" in src  # runs of 8 halves a thread
    assert "tw::copy_vec<16>((&x[(jv * 8)]), (&X[" in src and "tw::copy_vec<16>((&Y[" in src


def test_fragments_that_meet_shared_memory_in_a_loop_keep_one_element_a_thread():
    from tileworkbench.examples.tilelang_programs.norms import layernorm_fwd

    src = _source(layernorm_fwd(256, 1024, threads=128))
    body = src[src.find('extern "C"'):]
    assert "float X_local[8];" in body and "alignas" not in body  # read from X_smem one by one: no strided banks


def test_a_fragment_read_by_row_in_a_loop_over_a_shared_tile_needs_rows_to_come_from_somewhere():
    @tilelang.jit(target=SM90)
    def scale_rows(A):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B = T.empty((M, N), T.float32)
        with T.Kernel(1, threads=128):
            s = T.alloc_fragment((4,), T.float32)
            sh = T.alloc_shared((4, 64), T.float32)
            T.fill(s, 2.0)
            T.copy(A[0, 0], sh)
            for i, j in T.Parallel(4, 64):
                sh[i, j] = sh[i, j] * s[i]
            T.copy(sh, B[0, 0])
        return B

    with pytest.raises(CompileError, match="no fragment here gives s its rows") as info:
        scale_rows.compile(M=4, N=64)
    assert "for i, j in T.Parallel(4, 64)" in str(info.value)


@T.prim_func
def row_vector_computed_first(G: T.Tensor((64,), "float32"), Q: T.Tensor((64, 32), "float32"),
                              Out: T.Tensor((64, 32), "float32")):
    """GDN backward's ``G_fragment_exp[i] = T.exp(G_shared[i])`` in a loop of its own, allocated and
    computed before the fragment whose rows it then scales, ``Q_fragment[i, k] * G_fragment_exp[i]``:
    nothing else decides either layout, and the row vector takes the rows of the other (decided first)."""
    with T.Kernel(1, threads=128):
        g_shared = T.alloc_shared((64,), "float32")
        g_exp = T.alloc_fragment((64,), "float32")
        q = T.alloc_fragment((64, 32), "float32")
        T.copy(G, g_shared)
        for i in T.Parallel(64):
            g_exp[i] = T.exp(g_shared[i])
        T.copy(Q, q)
        for i, k in T.Parallel(64, 32):
            q[i, k] = q[i, k] * g_exp[i]
        T.copy(q, Out)


@on_both_interpreters
def test_a_row_vector_computed_before_the_fragment_it_scales(run):
    rng = np.random.default_rng(21)
    g, q = rng.standard_normal(64).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
    out = np.zeros_like(q)
    run(row_vector_computed_first, g, q, out)
    np.testing.assert_allclose(out, q * np.exp(g.astype(np.float64))[:, None], rtol=1e-5)
    artifact = tilelang.lower(row_vector_computed_first, target=SM90)
    layouts = {a.buffer.name: a.buffer.attrs.get("layout") for a in collect(artifact.func.body, ir.Allocate)}
    assert layouts["g_exp"] == project(layouts["q"], (0,))
