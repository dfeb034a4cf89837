"""``if tx < C:`` (C whole warps, fewer than the block's threads), TileLang's way of giving part of
a kernel to the block's first warps (DeepSeek's mHC pre kernel, the v3.2 top-k selector): where
the branch holds tile operations, ``T.Parallel`` loops, barriers or shared-memory stores it is a
thread scope (``ir.ThreadScope``, as ``with T.ws(...)``), its tile operations spread over those
threads and its barriers theirs (``T.sync_threads(id, C)`` among them); an ``else`` is the scope of
the other threads. ``if tx >= C:`` is the scope of the last threads, its ``else`` the first C. Checked on both CPU interpreters against numpy and by NVRTC; the other
conditions on the thread stay refused for tile operations."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect

from .interpreters import on_both_interpreters


@T.prim_func
def first_warps_sum_rows(X: T.Tensor((4, 64), "float32"), Out: T.Tensor((64,), "float32")):
    """The first two warps sum the columns of a shared tile in a fragment of their own; the
    third warp does nothing."""
    with T.Kernel(1, threads=96):
        tx = T.get_thread_binding()
        xs = T.alloc_shared((4, 64), "float32")
        T.copy(X, xs)
        if tx < 64:
            acc = T.alloc_fragment((64,), "float32")
            for j in T.Parallel(64):
                acc[j] = xs[0, j] + xs[1, j] + xs[2, j] + xs[3, j]
            T.copy(acc, Out)


@T.macro
def doubled(xs, Y):
    for i in T.Parallel(128):
        Y[i] = xs[i] * 2.0


@T.macro
def filled_with_max(xs, Z):
    f = T.alloc_fragment((128,), "float32")
    m = T.alloc_fragment((1,), "float32")
    T.copy(xs, f)
    T.reduce_max(f, m, dim=0)
    for i in T.Parallel(128):
        Z[i] = m[0]


@T.prim_func
def split_by_warps(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32"), Z: T.Tensor((128,), "float32")):
    """`if tx < 32: ... else: ...`: the first warp doubles X into Y, the other three fill Z with
    X's maximum, each branch through tile operations of its own threads."""
    with T.Kernel(1, threads=128):
        xs = T.alloc_shared((128,), "float32")
        T.copy(X, xs)
        if T.get_thread_binding() < 32:
            doubled(xs, Y)
        else:
            filled_with_max(xs, Z)


@T.prim_func
def last_warps_first(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32"), Z: T.Tensor((128,), "float32")):
    """`if tx >= 96: ... else: ...` (MInference's vertical-slash kernel gives its last warpgroup the
    loads so): the last warp doubles X into Y, the first three fill Z with X's maximum; the gather
    into the shared tile asks for cp.async (``prefer_async``) and is committed and waited for."""
    with T.Kernel(1, threads=128):
        tid = T.get_thread_binding()
        xs = T.alloc_shared((128,), "float32")
        for i in T.Parallel(128, prefer_async=True):
            xs[i] = X[i]
        T.ptx_commit_group()
        T.ptx_wait_group(0)
        if tid >= 96:
            doubled(xs, Y)
        else:
            filled_with_max(xs, Z)


@T.prim_func
def scan_in_the_first_warps(X: T.Tensor((64,), "int32"), Out: T.Tensor((64,), "int32")):
    """The top-k selector's suffix-sum idiom: an in-place Hillis-Steele scan of a shared array by
    the first 64 threads, ordered by TileLang's named barrier for those threads."""
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        s = T.alloc_shared((65,), "int32")
        val = T.alloc_local((1,), "int32")
        if tx < 64:
            s[tx] = X[tx]
            if tx == 0:
                s[64] = 0
            for i in T.serial(6):
                offset = 1 << i
                T.sync_threads(3, 64)
                if tx < 64 - offset:
                    val[0] = s[tx] + s[tx + offset]
                T.sync_threads(3, 64)
                if tx < 64 - offset:
                    s[tx] = val[0]
            T.sync_threads(3, 64)
            Out[tx] = s[tx]


def _suffix_sums(x):
    return np.cumsum(x[::-1])[::-1]


@on_both_interpreters
def test_the_first_warps_do_their_tile_work(run):
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    out = np.zeros(64, np.float32)
    run(first_warps_sum_rows, x, out)
    np.testing.assert_allclose(out, x.sum(axis=0), rtol=1e-6, atol=1e-6)


@on_both_interpreters
def test_an_else_is_the_other_threads_scope(run):
    x = np.random.default_rng(2).standard_normal(128).astype(np.float32)
    y, z = np.zeros(128, np.float32), np.zeros(128, np.float32)
    run(split_by_warps, x, y, z)
    np.testing.assert_array_equal(y, x * 2)
    np.testing.assert_array_equal(z, np.full(128, x.max(), np.float32))


@on_both_interpreters
def test_tx_at_least_c_is_the_last_threads_scope_and_its_else_the_first(run):
    x = np.random.default_rng(5).standard_normal(128).astype(np.float32)
    y, z = np.zeros(128, np.float32), np.zeros(128, np.float32)
    run(last_warps_first, x, y, z)
    np.testing.assert_array_equal(y, x * 2)
    np.testing.assert_array_equal(z, np.full(128, x.max(), np.float32))


@on_both_interpreters
def test_a_named_barrier_of_the_scope_orders_a_shared_scan(run):
    x = np.random.default_rng(3).integers(-50, 50, 64).astype(np.int32)
    out = np.zeros(64, np.int32)
    run(scan_in_the_first_warps, x, out)
    np.testing.assert_array_equal(out, _suffix_sums(x))


@pytest.mark.parametrize("func, scopes", [(first_warps_sum_rows, [(0, 64)]),
                                          (split_by_warps, [(0, 32), (32, 96)]),
                                          (last_warps_first, [(96, 32), (0, 96)]),
                                          (scan_in_the_first_warps, [(0, 64)])],
                         ids=["first-warps", "if-else", "last-warps", "named-barrier"])
def test_they_are_thread_scopes_and_compile(func, scopes, nvrtc_check):
    art = tw.lower(func, target="cuda")
    assert [(s.first, s.count) for s in collect(art.func.body, ir.ThreadScope)] == scopes
    kernel = art.kernel_source.split('extern "C"')[1]
    assert [line.split("// ")[1] for line in kernel.splitlines() if "// threads" in line] == \
        [f"threads {first}..{first + count - 1}" for first, count in scopes]
    if func is scan_in_the_first_warps:  # the scope's barriers are its own: named, for its 64 threads
        assert "__syncthreads" not in kernel and kernel.count("tw::sync_consumers<64>();") >= 4
    nvrtc_check(art.kernel_source, "sm_90a")


def _guarded(condition: str):
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            xs = T.alloc_shared((128,), "float32")
            T.copy(X, xs)
            if (tx < 48) if condition == "part of a warp" else (tx % 2 == 0) if condition == "every other" else (tx < 128):
                for i in T.Parallel(128):
                    Y[i] = xs[i]

    return main


@pytest.mark.parametrize("condition", ["part of a warp", "every other"])
def test_other_thread_conditions_around_tile_work_stay_refused(condition):
    with pytest.raises(CompileError, match="may differ between the block's threads"):
        tw.lower(_guarded(condition), target="cuda")


def test_a_named_barrier_for_other_threads_than_the_scope_is_refused():
    with pytest.raises(CompileError, match=r"T.sync_threads\(3, 32\): a named barrier for 32 threads where the "
                                           "64 threads of its scope run it is not supported"):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                s = T.alloc_shared((64,), "float32")
                if tx < 64:
                    s[tx] = X[tx]
                    T.sync_threads(3, 32)
                    X[tx] = s[63 - tx]


def test_per_thread_code_under_tx_stays_a_plain_if():
    """Nothing shared inside: the `if` is not made a scope (the generated code is what it was)."""
    @T.prim_func
    def main(X: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 32:
                X[tx] = X[tx] * 2.0

    art = tw.lower(main, target="cuda")
    assert not collect(art.func.body, ir.ThreadScope) and collect(art.func.body, ir.IfThenElse)


def test_the_name_that_decided_the_scope_may_not_change():
    """In a loop, the second iteration's `t` would name other threads than the scope's."""
    with pytest.raises(CompileError, match=r"t is assigned again, but the `if` at line \d+ gives its branch to "
                                           "the threads t names there"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                t = T.get_thread_binding()
                s = T.alloc_shared((128,), "float32")
                for k in T.serial(2):
                    if t < 64:
                        T.fill(s, 1.0)
                    t = t + 64
