"""The pass ``stage_fragment_operands``: a gemm's A in a fragment that register-A wgmma cannot read
(two warpgroups side by side along N on 64 rows, as TileLang's MLA decode has it; fewer than 64 rows;
a target without wgmma) reads A from shared memory: from the tile A was just copied from, or from
a new tile with a warning. Each on the tile-level interpreter against numpy in float64, and the
generated code compiled for sm_90a; where register A applies nothing changes. Also a gemm's B in a
fragment, and T.Parallel loops that read or store a fragment transposed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import TileworkbenchWarning

from tilelang_compat.interpreters import on_both_interpreters


def p_times_v(from_shared: bool, rows=64, n=256, k=64, threads=256):
    """O = P @ V with P (rows x k) in a fragment: copied from a shared tile, or computed in registers
    (scaled by 0.5) from a float32 fragment."""

    @T.prim_func
    def main(P: T.Tensor((rows, k), "float16"), V: T.Tensor((k, n), "float16"), O: T.Tensor((rows, n), "float32")):
        with T.Kernel(1, threads=threads):
            p_shared = T.alloc_shared((rows, k), "float16")
            v_shared = T.alloc_shared((k, n), "float16")
            p = T.alloc_fragment((rows, k), "float16")
            scores = T.alloc_fragment((rows, k), "float32")
            o = T.alloc_fragment((rows, n), "float32")
            T.copy(P, p_shared)
            T.copy(V, v_shared)
            if from_shared:
                T.copy(p_shared, p)
            else:
                T.copy(p_shared, scores)
                for i, j in T.Parallel(rows, k):
                    p[i, j] = scores[i, j] * 0.5
            T.clear(o)
            T.gemm(p, v_shared, o)
            T.copy(o, O)

    return main


def _run(kernel, scale, rows=64, n=256, k=64):
    rng = np.random.default_rng(7)
    p = rng.standard_normal((rows, k)).astype(np.float16)
    v = rng.standard_normal((k, n)).astype(np.float16)
    o = np.zeros((rows, n), np.float32)
    tw.compile(kernel, target="cpu")(p, v, o)
    want = (p.astype(np.float64) * scale) @ v.astype(np.float64)
    np.testing.assert_allclose(o, want, rtol=2e-3, atol=2e-3)


def _lowered(kernel, target="sm_90a"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        artifact = tw.lower(kernel, target=target)
    staged = [w for w in caught if issubclass(w.category, TileworkbenchWarning) and "copied into a shared" in str(w.message)]
    return artifact, staged


def _compiles(source):
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(source, "sm_90a")


def test_a_fragment_copied_from_a_shared_tile_is_read_from_that_tile():
    kernel = p_times_v(from_shared=True)
    artifact, staged = _lowered(kernel)
    code = artifact.kernel_source.split('extern "C"')[1]
    assert not staged and "p_shared_1" not in code and "tw::wgmma_gemm_ss<" in code and "wgmma_gemm_rs" not in code
    assert " p[" not in code  # the fragment, read by nothing now, and its copy are gone
    _run(kernel, 1.0)
    _compiles(artifact.kernel_source)


def test_a_fragment_computed_in_registers_goes_through_a_new_shared_tile_with_a_warning():
    kernel = p_times_v(from_shared=False)
    artifact, staged = _lowered(kernel)
    assert len(staged) == 1 and "64 rows on 2 warpgroups, which share them side by side along N" in str(staged[0].message)
    code = artifact.kernel_source.split('extern "C"')[1]
    assert "(p_shared_1)" in str(staged[0].message)  # p_shared is the kernel's own tile
    assert "tw::half* p_shared_1 = " in code and "tw::wgmma_gemm_ss<" in code
    _run(kernel, 0.5)
    _compiles(artifact.kernel_source)


def test_fewer_than_64_rows_take_mma_sync_through_shared_memory():
    kernel = p_times_v(from_shared=False, rows=32, n=128, threads=128)
    artifact, staged = _lowered(kernel)
    assert len(staged) == 1 and "each warpgroup holds whole 64-row blocks" in str(staged[0].message)
    assert "tw::gemm_ss<" in artifact.kernel_source
    _run(kernel, 0.5, rows=32, n=128)


def test_where_register_a_applies_nothing_is_staged():
    kernel = p_times_v(from_shared=False, rows=128, n=128, threads=256)
    artifact, staged = _lowered(kernel)
    assert not staged and "tw::wgmma_gemm_rs<" in artifact.kernel_source


@T.prim_func
def transposed_fragment_a(P: T.Tensor((64, 128), "float16"), V: T.Tensor((64, 128), "float16"),
                          O: T.Tensor((128, 128), "float32")):
    """O = P^T @ V with P (K x M, TileLang's indexer backward: a gradient in a fragment used
    transposed): wgmma reads register A as M x K only, so P goes through a shared tile."""
    with T.Kernel(1, threads=128):
        p_shared = T.alloc_shared((64, 128), "float16")
        v_shared = T.alloc_shared((64, 128), "float16")
        scores = T.alloc_fragment((64, 128), "float32")
        p = T.alloc_fragment((64, 128), "float16")
        o = T.alloc_fragment((128, 128), "float32")
        T.copy(P, p_shared)
        T.copy(V, v_shared)
        T.copy(p_shared, scores)
        for i, j in T.Parallel(64, 128):
            p[i, j] = scores[i, j] * 2
        T.clear(o)
        T.gemm(p, v_shared, o, transpose_A=True)
        T.copy(o, O)


def test_a_transposed_fragment_a_goes_through_shared_memory():
    artifact, staged = _lowered(transposed_fragment_a)
    assert len(staged) == 1 and "A is transposed" in str(staged[0].message)
    rng = np.random.default_rng(8)
    p, v = rng.standard_normal((64, 128)).astype(np.float16), rng.standard_normal((64, 128)).astype(np.float16)
    o = np.zeros((128, 128), np.float32)
    tw.compile(transposed_fragment_a, target="cpu")(p, v, o)
    np.testing.assert_allclose(o, (2 * p.astype(np.float64)).T @ v.astype(np.float64), rtol=2e-3, atol=2e-3)
    _compiles(artifact.kernel_source)


def fragment_b(rows=128, n=64, k=64, threads=256, dtype="float16", a_in_fragment=False):
    """O = A @ (0.5 * V) with the scaled V (k x n) computed in a fragment, as TileLang's KDA backward
    computes its B (``kg_fragment``); A from shared memory, or itself a fragment copied from there."""

    @T.prim_func
    def main(A: T.Tensor((rows, k), dtype), V: T.Tensor((k, n), dtype), O: T.Tensor((rows, n), "float32")):
        with T.Kernel(1, threads=threads):
            a_shared = T.alloc_shared((rows, k), dtype)
            v_shared = T.alloc_shared((k, n), dtype)
            a = T.alloc_fragment((rows, k), dtype)
            v = T.alloc_fragment((k, n), dtype)
            o = T.alloc_fragment((rows, n), "float32")
            T.copy(A, a_shared)
            T.copy(V, v_shared)
            for i, j in T.Parallel(k, n):
                v[i, j] = v_shared[i, j] * 0.5
            T.clear(o)
            if a_in_fragment:
                for i, j in T.Parallel(rows, k):
                    a[i, j] = a_shared[i, j] * 1
                T.gemm(a, v, o)
            else:
                T.gemm(a_shared, v, o)
            T.copy(o, O)

    return main


@pytest.mark.parametrize("dtype, a_in_fragment, path", [("float16", False, "tw::wgmma_gemm_ss<"),
                                                         ("float16", True, "tw::wgmma_gemm_rs<"),
                                                         ("float32", False, "tw::gemm_ss_tf32<")],
                         ids=["wgmma", "register-a-wgmma", "tf32-mma-sync"])
def test_a_fragment_b_goes_through_a_new_shared_tile_with_a_warning(dtype, a_in_fragment, path):
    kernel = fragment_b(dtype=dtype, a_in_fragment=a_in_fragment)
    artifact, staged = _lowered(kernel)
    assert [str(w.message) for w in staged] == [
        "T.gemm: B (v) is a fragment and gemms read B from shared memory; it is copied into a shared tile "
        "(v_shared_1) for the gemm"]  # A, where a fragment, stays in registers: B is in shared memory now
    assert path in artifact.kernel_source
    rng = np.random.default_rng(9)
    a, v = rng.standard_normal((128, 64)).astype(dtype), rng.standard_normal((64, 64)).astype(dtype)
    o = np.zeros((128, 64), np.float32)
    tw.compile(kernel, target="cpu")(a, v, o)
    tolerance = 2e-3 if dtype == "float16" else 2e-2  # TF32's 10 mantissa bits
    np.testing.assert_allclose(o, a.astype(np.float64) @ (0.5 * v.astype(np.float64)), rtol=tolerance, atol=tolerance)
    _compiles(artifact.kernel_source)


@T.prim_func
def transposes(X: T.Tensor((32, 64), "float32"), Y: T.Tensor((64, 32), "float32"), Z: T.Tensor((64, 32), "float32")):
    """Mamba's chunk state reads a fragment transposed, ``xt[i, j] = x[j, i] * ...``; GDN's backward
    stores one so, ``zt[k, s] = x[s, k]`` in a loop over (s, k)."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((32, 64), "float32")
        xt = T.alloc_fragment((64, 32), "float32")
        zt = T.alloc_fragment((64, 32), "float32")
        T.copy(X, x)
        for i, j in T.Parallel(64, 32):
            xt[i, j] = x[j, i] + x[j, i]  # two reads, one copy (and one warning)
        T.copy(xt, Y)
        for s, k in T.Parallel(32, 64):
            zt[k, s] = x[s, k] + 1.0
        T.copy(zt, Z)


@on_both_interpreters
def test_a_fragment_read_or_stored_transposed_goes_through_shared_memory(run):
    x = np.random.default_rng(10).standard_normal((32, 64)).astype(np.float32)
    y, z = np.zeros((64, 32), np.float32), np.zeros((64, 32), np.float32)
    run(transposes, x, y, z)
    assert np.array_equal(y, x.T * 2) and np.array_equal(z, x.T + 1)
    artifact, staged = _lowered(transposes)
    assert [str(w.message).split(":")[0] for w in staged] == [
        "T.Parallel reads x at its loop variables in another order",
        "T.Parallel stores a fragment and reads x at its loop variables in different orders"]
    assert "float* x_shared = " in artifact.kernel_source
    _compiles(artifact.kernel_source)


@T.prim_func
def stored_transposed(X: T.Tensor((32, 64), "float32"), S: T.Tensor((32,), "float32"), Y: T.Tensor((64, 32), "float32")):
    """An indexer's logits: a fragment stored to memory transposed, ``Y[i, j] = x[j, i]`` in a loop
    over (i, j), with a fragment of its rows read beside it."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((32, 64), "float32")
        s = T.alloc_fragment((32,), "float32")
        T.copy(X, x)
        T.reduce_max(x, s, dim=1)
        for i, j in T.Parallel(64, 32):
            Y[i, j] = x[j, i] * 2.0 - s[j]


@on_both_interpreters
def test_a_fragment_stored_transposed_runs_in_its_own_order_without_a_shared_copy(run):
    x = np.random.default_rng(11).standard_normal((32, 64)).astype(np.float32)
    s, y = np.zeros(32, np.float32), np.zeros((64, 32), np.float32)
    run(stored_transposed, x, s, y)
    assert np.array_equal(y, (x * 2 - x.max(axis=1, keepdims=True)).T)
    artifact, staged = _lowered(stored_transposed)
    assert staged == [] and "x_shared" not in artifact.kernel_source
    _compiles(artifact.kernel_source)
