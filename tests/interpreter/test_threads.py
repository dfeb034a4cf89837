"""The thread-level interpreter (``interpreter.threads``): a kernel's final lowered IR, every pass
applied, run on the CPU with the block's threads in lockstep, against float64 numpy references on
random inputs, at sizes that are and are not multiples of the tiles; and the lowering bugs it
catches (a missing barrier, a wrong shuffle, a dropped guard), and what it refuses."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.examples import edge_cases, elementwise_add, row_sum
from tileworkbench.examples.tilelang_programs import elementwise, gemm, gemv, hadamard, norms, softmax, topk
from tileworkbench.frontend.eager import parse_eager
from tileworkbench.interpreter.threads import ThreadKernel, run_at_thread_level
from tileworkbench.interpreter.values import Unsupported, storage_dtype
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect

# largest error allowed, relative to the reference's largest magnitude, by the narrowest type involved
TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    """``.compile`` gives CPU kernels, whose sm_90a compile (``artifact``) ``ThreadKernel.of`` runs."""
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _randn(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(np.float32).astype(storage_dtype(getattr(T, dtype)))


def _f64(x):
    return np.asarray(x).astype(np.float64)


def _close(out, ref, dtype):
    assert out.shape == ref.shape
    err = np.abs(_f64(out) - ref).max() / np.abs(ref).max()
    assert err <= TOL[dtype], f"relative error {err:.3g} > {TOL[dtype]}"


def _threads(kernel, stage="lowered"):
    return ThreadKernel.of(kernel, stage=stage)


# ---- the families ---------------------------------------------------------------------------------

@pytest.mark.parametrize("M, N, bm, bn, threads, in_dt, out_dt", [
    (100, 72, 32, 32, 128, "float32", "float32"),  # partial tiles both ways: the TMA store clips them
    (33, 40, 16, 8, 64, "float16", "float32"),
    (64, 64, 32, 64, 128, "bfloat16", "bfloat16"),
])
def test_elementwise_add(rng, M, N, bm, bn, threads, in_dt, out_dt):
    kernel = elementwise.elementwise_add.compile(M=M, N=N, block_M=bm, block_N=bn, threads=threads,
                                                 in_dtype=getattr(T, in_dt), out_dtype=getattr(T, out_dt))
    a, b = _randn(rng, (M, N), in_dt), _randn(rng, (M, N), in_dt)
    _close(_threads(kernel)(a, b), _f64(a) + _f64(b), out_dt if out_dt != "float32" else in_dt)


@pytest.mark.parametrize("N, K, block_k, dtype", [(128, 256, 128, "float16"), (128, 24, 8, "float32")])
def test_naive_gemv(rng, N, K, block_k, dtype):
    a, b = _randn(rng, K, dtype), _randn(rng, (N, K), dtype)
    kernel = gemv.naive_gemv.compile(N=N, K=K, BLOCK_N=128, BLOCK_K=block_k, dtype=getattr(T, dtype))
    _close(_threads(kernel)(a, b), _f64(b) @ _f64(a), dtype)


@pytest.mark.parametrize("N, K, bn, bk, rt, dtype", [(64, 256, 32, 32, 8, "float16"), (24, 80, 8, 16, 2, "bfloat16"),
                                                     (96, 320, 32, 64, 32, "float32")])
def test_split_k_gemv(rng, N, K, bn, bk, rt, dtype):
    a, b = _randn(rng, K, dtype), _randn(rng, (N, K), dtype)
    kernel = gemv.splitk_gemv.compile(N=N, K=K, BLOCK_N=bn, BLOCK_K=bk, reduce_threads=rt, dtype=getattr(T, dtype))
    _close(_threads(kernel)(a, b), _f64(b) @ _f64(a), dtype)


def _rms(x):
    return _f64(x) / np.sqrt((_f64(x) ** 2).mean(1, keepdims=True) + 1e-12)


@pytest.mark.parametrize("blk_m", [1, 2])
def test_rms_norm_whole_row(rng, blk_m):
    x = _randn(rng, (100, 512))
    _close(_threads(norms.rms_norm.compile(M=100, N=512, blk_m=blk_m))(x), _rms(x), "float32")


@pytest.mark.parametrize("M, N, blk_m, blk_k", [(100, 500, 2, 128), (7, 64, 3, 32)])
def test_rms_norm_split_k(rng, M, N, blk_m, blk_k):
    x = _randn(rng, (M, N))
    _close(_threads(norms.rms_norm_splitk.compile(M=M, N=N, blk_m=blk_m, blk_k=blk_k))(x), _rms(x), "float32")


@pytest.mark.parametrize("rows, D, blk_m, in_dt, out_dt, configs", [
    (100, 256, 2, "float32", "float32", {}),
    (37, 128, 3, "bfloat16", "float32", {}),  # a partial last tile: the tensor map's TMA store clips it
    (37, 128, 3, "bfloat16", "float32", {"tl.disable_tma_lower": True}),  # the threads store it
    (16, 64, 1, "float16", "float16", {}),
])
def test_layernorm(rng, rows, D, blk_m, in_dt, out_dt, configs):
    from tileworkbench.target import PassContext

    with PassContext(config=configs):
        kernel = norms.layernorm_fwd(rows, D, blk_m=blk_m, threads=128, in_dtype=in_dt, out_dtype=out_dt)
    x, g, b = _randn(rng, (rows, D), in_dt), _randn(rng, D, in_dt), _randn(rng, D, in_dt)
    y, mean, rstd = _threads(kernel)(x, g, b)
    mu = _f64(x).mean(1)
    r = 1 / np.sqrt(((_f64(x) - mu[:, None]) ** 2).mean(1) + 1e-5)
    _close(y, (_f64(x) - mu[:, None]) * r[:, None] * _f64(g) + _f64(b), out_dt if out_dt != "float32" else in_dt)
    _close(mean, mu, "float16")  # E[x] in float32 of a bfloat16 row: absolute error ~1e-7, mean ~0.1
    _close(rstd, r, "float32" if in_dt == "float32" else "float16")


@pytest.mark.parametrize("M, N, bm, bn, dtype", [(10, 256, 2, 128, "float16"), (5, 64, 3, 64, "float32"),
                                                 (3, 96, 1, 32, "bfloat16")])
def test_softmax_over_blocks_of_the_row(rng, M, N, bm, bn, dtype):
    x = _randn(rng, (M, N), dtype)
    e = np.exp(_f64(x) - _f64(x).max(1, keepdims=True))
    kernel = softmax.softmax_kernel.compile(M=M, N=N, BLOCK_M=bm, BLOCK_N=bn, dtype=getattr(T, dtype))
    _close(_threads(kernel)(x), e / e.sum(1, keepdims=True), dtype)


@pytest.mark.parametrize("M, N, k, blk_m, threads", [(10, 64, 3, 2, 128), (9, 100, 5, 2, 32), (17, 8, 8, 16, 128)])
def test_top_k(rng, M, N, k, blk_m, threads):
    x = _randn(rng, (M, N))
    values, indices = _threads(topk.top_k_rows.compile(M=M, N=N, topk=k, blk_m=blk_m, threads=threads))(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :k]
    assert np.array_equal(indices, order) and np.array_equal(values, np.take_along_axis(x, order, 1))


def _walsh_hadamard(x):
    y, h = _f64(x), 1
    rows, n = y.shape
    while h < n:
        y = y.reshape(rows, -1, 2, h)
        a, c = y[:, :, 0].copy(), y[:, :, 1].copy()
        y[:, :, 0], y[:, :, 1] = a + c, a - c
        y, h = y.reshape(rows, n), h * 2
    return y


@pytest.mark.parametrize("b, n, dtype", [(3, 16, "float32"), (2, 1024, "float16"), (1, 16384, "float32")])
def test_hadamard_in_registers_shuffles_and_shared_memory(rng, b, n, dtype):
    x = _randn(rng, (b, n), dtype)
    _close(_threads(hadamard.hadamard.compile(b=b, n=n, dtype=getattr(T, dtype)))(x), _walsh_hadamard(x), dtype)


def test_the_examples_thread_level_kernels(rng):
    a = _randn(rng, (100, 70), "float16")
    _close(run_at_thread_level(elementwise_add(100, 70, 32, 64), a, a, out_idx=[2]), 2 * _f64(a), "float16")
    a = _randn(rng, (100, 96))
    _close(run_at_thread_level(row_sum(100, 96, 16), a, out_idx=[1]), _f64(a).sum(1), "float32")
    a = np.ascontiguousarray(a[:, :70])
    c, _ = run_at_thread_level(edge_cases.overhanging_tiles(100, 70, 64, 64), a, out_idx=[1, 2])
    _close(c, 2 * _f64(a) + 1, "float32")
    x = np.arange(1, 257, dtype=np.int32)
    steps = run_at_thread_level(edge_cases.collatz_steps(256), x, out_idx=[1])  # a while loop per thread

    def collatz(v):
        return 0 if v == 1 else 1 + collatz(v // 2 if v % 2 == 0 else 3 * v + 1)
    assert steps.tolist() == [collatz(int(v)) for v in x]


def test_the_codegen_phase_ir_computes_the_same(rng):
    """``stage="codegen"``: flat offsets, C division and loop forms give the very same bits."""
    x = _randn(rng, (7, 64))
    kernel = norms.rms_norm_splitk.compile(M=7, N=64, blk_m=3, blk_k=32)
    assert np.array_equal(_threads(kernel, "codegen")(x), _threads(kernel)(x))
    a, b = _randn(rng, (100, 72)), _randn(rng, (100, 72))
    kernel = elementwise.elementwise_add.compile(M=100, N=72, block_M=32, block_N=32, threads=128,
                                                 in_dtype=T.float32, out_dtype=T.float32)
    assert np.array_equal(_threads(kernel, "codegen")(a, b), a + b)


def test_eager_programs_lower_here_too(rng):
    x = _randn(rng, (8, 128))
    out = run_at_thread_level(parse_eager(norms.rms_norm.fn, dict(M=8, N=128, blk_m=2)), x,
                              pass_configs={"tl.disable_tma_lower": True})
    _close(out, _rms(x), "float32")


# ---- what it catches --------------------------------------------------------------------------------

def _mutated(kernel, change) -> ThreadKernel:
    """``kernel`` at the thread level with ``change`` applied to a copy of its lowered IR."""
    tk = _threads(kernel)
    func = copy.deepcopy(tk.func)
    change(func)
    return ThreadKernel(func, tk.out_idx, tk.name)


def _drop_first(kind):
    def change(func):
        for seq in collect(func.body, ir.SeqStmt):
            for i, s in enumerate(seq.stmts):
                if isinstance(s, kind):
                    del seq.stmts[i]
                    return
        raise AssertionError(f"no {kind.__name__}")
    return change


def test_a_missing_barrier_in_a_reduction_is_a_race(rng):
    kernel = norms.rms_norm.compile(M=8, N=512, blk_m=2)
    with pytest.raises(KernelRuntimeError, match=r"shared-memory race on A_powsum_warps .* thread 1 reads it"):
        _mutated(kernel, _drop_first(ir.SyncThreads))(_randn(rng, (8, 512)))


def test_a_wrong_shuffle_distance_gives_wrong_sums(rng):
    def change(func):
        for c in collect(func.body, ir.Call):
            if c.name == "__shfl_xor_sync" and ir.const_int(c.args[2]) == 16:
                object.__setattr__(c, "args", (c.args[0], c.args[1], ir.const(8)))

    x = _randn(rng, (8, 512))
    out = _mutated(norms.rms_norm.compile(M=8, N=512, blk_m=2), change)(x)
    assert np.abs(_f64(out) - _rms(x)).max() > 1e-2


def test_a_dropped_guard_of_a_partial_tile_reads_out_of_bounds(rng):
    def change(func):  # the first copy's guard (by * 32 + i0 < 100 and ...) taken as always true
        for s in collect(func.body, ir.IfThenElse):
            if s.else_body is not None:
                s.cond = ir.const(True)
                return

    kernel = elementwise.elementwise_add.compile(M=100, N=72, block_M=32, block_N=32, threads=128,
                                                 in_dtype=T.float32, out_dtype=T.float32)
    a = _randn(rng, (100, 72))
    with pytest.raises(KernelRuntimeError, match=r"reads A out of bounds: elements 72\.\.75 of dimension 1"):
        _mutated(kernel, change)(a, a)


def test_a_barrier_only_some_threads_reach_is_reported(rng):
    def change(func):  # the reduction's barrier under `if tx < 64`
        for seq in collect(func.body, ir.SeqStmt):
            for i, s in enumerate(seq.stmts):
                if isinstance(s, ir.SyncThreads):
                    seq.stmts[i] = ir.IfThenElse(ir.cmp("<", func.launch.thread_var, 64), s)
                    return

    with pytest.raises(KernelRuntimeError, match="reached by 64 of the block's 128 threads"):
        _mutated(norms.rms_norm.compile(M=8, N=512, blk_m=2), change)(_randn(rng, (8, 512)))


def test_overwriting_a_tile_a_tma_store_still_reads_is_a_race(rng):
    kernel = elementwise.elementwise_add.compile(M=64, N=64, block_M=32, block_N=32, threads=128,
                                                 in_dtype=T.float32, out_dtype=T.float32)

    def change(func):  # a store to the tile between the TMA store's issue and its wait
        seq = next(q for q in collect(func.body, ir.SeqStmt) if any(
            isinstance(s, ir.Evaluate) and s.call.name.startswith("tw::tma_store_wait") for s in q.stmts))
        at = next(i for i, s in enumerate(seq.stmts) if isinstance(s, ir.Evaluate)
                  and s.call.name.startswith("tw::tma_store_wait"))
        tile = next(s.buffer for s in collect(func.body, ir.Allocate) if s.buffer.name == "C_shared")
        seq.stmts.insert(at, ir.BufferStore(tile, (ir.const(0), ir.const(0)), ir.const(0.0)))

    a = _randn(rng, (64, 64))
    with pytest.raises(KernelRuntimeError, match="C_shared .* the TMA store issued by thread 0 still reads"):
        _mutated(kernel, change)(a, a)


def test_blocks_writing_one_element_are_a_race(rng):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), C: T.Tensor((32,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            tx = T.get_thread_binding()
            C[tx] = A[bx * 32 + tx]

    with pytest.raises(KernelRuntimeError, match=r"race between blocks on C \(element 0\): block 1"):
        run_at_thread_level(main, _randn(rng, 64), out_idx=[1])


@pytest.mark.parametrize("case", ["elementwise", "layernorm"])
def test_a_partial_last_tile_stored_by_tma(rng, case):
    # lower_tma stored such a tile with one bulk copy, which wrote past the tensor's end (found by
    # the thread-level sweep); a region not proven inside its tensor now takes the tensor map, which clips
    if case == "elementwise":
        kernel = elementwise.elementwise_add.compile(M=100, N=32, block_M=8, block_N=32, threads=32,
                                                     in_dtype=T.float32, out_dtype=T.float32)
        a = _randn(rng, (100, 32))
        _close(_threads(kernel)(a, a), 2 * _f64(a), "float32")
    else:
        kernel = norms.layernorm_fwd(17, 128, blk_m=3, threads=128, in_dtype="float32", out_dtype="float32")
        x = _randn(rng, (17, 128))
        y, _, _ = _threads(kernel)(x, x[0], x[1])
        mu = _f64(x).mean(1, keepdims=True)
        normed = (_f64(x) - mu) / np.sqrt(((_f64(x) - mu) ** 2).mean(1, keepdims=True) + 1e-5)
        _close(y, normed * _f64(x[0]) + _f64(x[1]), "float32")


def test_a_wgmma_gemm_is_refused_by_name():
    kernel = gemm.matmul.compile(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32)
    with pytest.raises(Unsupported, match=r"does not run .*wgmma \(tw::wgmma_gemm"):
        _threads(kernel)


def test_ieee_overflow_and_division_by_zero_give_inf_and_nan_without_warnings():
    """Past float32's range a result is infinity, x / 0 is +-inf and inf - inf NaN, as on the GPU;
    neither interpreter lets numpy warn about it (a user's notebook showed RuntimeWarnings)."""

    @T.prim_func
    def specials(A: T.Tensor((128,), "float32"), Z: T.Tensor((128,), "float32"), B: T.Tensor((4, 128), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[0, i] = A[i] * 1e30 * 1e30
                B[1, i] = A[i] / Z[i]
                B[2, i] = A[i] * 1e30 * 1e30 - A[i] * 1e30 * 1e30
                B[3, i] = A[i] + 1e30 * 1e30
    a = np.linspace(0.5, 2.0, 128, dtype=np.float32)
    a[::2] *= -1
    zeros = np.zeros(128, np.float32)
    expected = np.stack([np.sign(a) * np.inf, np.sign(a) * np.inf, np.full(128, np.nan), np.full(128, np.inf)])
    kernel = tw.compile(specials, target="cpu")
    for run in (kernel, _threads(kernel)):
        out = np.zeros((4, 128), np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            run(a, zeros, out)
        np.testing.assert_array_equal(out, expected.astype(np.float32))
