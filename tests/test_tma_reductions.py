"""``T.atomic_add(region, shared_tile, use_tma=True)``: a whole float32 shared tile added into a
region of a kernel's tensor is one TMA reduction (``cp.reduce.async.bulk``, ``tw::tma_store_add``):
through a tensor map (a head's rows of a ``(batch, seq, heads, dim)`` tensor, the last tile past the
tensor's end clipped) or as contiguous bytes; several blocks add into the same region. Both CPU
interpreters against float64, the generated code (the fence and barrier before the one thread's
issue, the wait: for the tile only when nothing else in the kernel touches the tensor), NVRTC,
and the forms that stay element atomics (GPU: tests/gpu/test_tma_reductions_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

RUNS = {"tile level": lambda f, *a: tw.compile(f, target="cpu")(*a), "thread level": run_at_thread_level}
SEQ, HEADS, DIM, ROWS, SPLITS = 100, 3, 64, 32, 3


def heads_kernel(read_after: bool = False):
    """Each block (row tile, head, split) scales its rows of X by ``split + 1`` and adds them into
    the head's rows of dQ; the splits add into the same region, the last row tile runs past row 100.
    ``read_after``: each block then copies its rows of dQ into Y (the tensor is touched again)."""

    @T.prim_func
    def kernel(X: T.Tensor((2, SEQ, HEADS, DIM), "float32"), dQ: T.Tensor((2, SEQ, HEADS, DIM), "float32"),
               Y: T.Tensor((2, SEQ, HEADS, DIM), "float32")):
        with T.Kernel(T.ceildiv(SEQ, ROWS), HEADS, 2 * SPLITS, threads=128) as (bx, by, bz):
            f = T.alloc_fragment((ROWS, DIM), "float32")
            s = T.alloc_shared((ROWS, DIM), "float32")
            T.copy(X[bz // SPLITS, bx * ROWS:(bx + 1) * ROWS, by, :], f)
            for i, j in T.Parallel(ROWS, DIM):
                f[i, j] = f[i, j] * (bz % SPLITS + 1)
            T.copy(f, s)
            T.atomic_add(dQ[bz // SPLITS, bx * ROWS:(bx + 1) * ROWS, by, :], s, use_tma=True)
            if read_after:
                T.copy(dQ[bz // SPLITS, bx * ROWS:(bx + 1) * ROWS, by, :], f)
                T.copy(f, Y[bz // SPLITS, bx * ROWS:(bx + 1) * ROWS, by, :])

    return kernel


def heads_want(x, dq):
    return dq.astype(np.float64) + x.astype(np.float64) * sum(range(1, SPLITS + 1))


@T.prim_func
def rows_in_turn(A: T.Tensor((256, 128), "float32"), C: T.Tensor((128, 128), "float32")):
    """Four blocks each add four 32-row tiles of A (times the iteration + 1) into C's rows in turn:
    whole rows, contiguous bytes inside C (a bulk reduction, no tensor map)."""
    with T.Kernel(4, threads=128) as bx:
        f = T.alloc_fragment((32, 128), "float32")
        s = T.alloc_shared((32, 128), "float32")
        for it in T.serial(4):
            T.copy(A[bx * 32 + it * 16:bx * 32 + it * 16 + 32, :], f)
            for i, j in T.Parallel(32, 128):
                f[i, j] = f[i, j] * (it + 1)
            T.copy(f, s)
            T.atomic_add(C[it * 32:it * 32 + 32, :], s, use_tma=True)


def rows_want(a, c):
    want = c.astype(np.float64)
    for bx in range(4):
        for it in range(4):
            want[it * 32:it * 32 + 32] += a[bx * 32 + it * 16:bx * 32 + it * 16 + 32].astype(np.float64) * (it + 1)
    return want


def _source(kernel) -> str:
    return tw.lower(kernel, target="cuda").kernel_source.split('extern "C"')[1]


@pytest.mark.parametrize("level", RUNS)
def test_a_head_tile_is_reduced_into_its_rows_by_every_block(level):
    rng = np.random.default_rng(42)
    x = rng.standard_normal((2, SEQ, HEADS, DIM)).astype(np.float32)
    dq = rng.standard_normal((2, SEQ, HEADS, DIM)).astype(np.float32)
    want = heads_want(x, dq)
    RUNS[level](heads_kernel(), x, dq, np.zeros_like(x))
    np.testing.assert_allclose(dq, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", RUNS)
def test_contiguous_rows_are_reduced_as_bytes(level):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    c = rng.standard_normal((128, 128)).astype(np.float32)
    want = rows_want(a, c)
    RUNS[level](rows_in_turn, a, c)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_one_thread_issues_the_reduction_after_the_fence_and_barrier():
    body = _source(heads_kernel())
    assert "atomicAdd(" not in body
    issue = body.index("tw::tma_store_add(dQ_desc")
    assert body.rindex("tw::fence_proxy_async();", 0, issue) < body.rindex("__syncthreads();", 0, issue)
    assert "if (tw::shuffle_elect<128>())" in body[:issue]
    # nothing else touches dQ: the issuer waits only until the tile may be written again
    assert body.count("tw::tma_store_wait<true>()") == 1 and "tma_store_wait<false>" not in body


def test_a_tensor_the_kernel_reads_again_waits_for_the_adds():
    body = _source(heads_kernel(read_after=True))
    assert "tw::tma_store_add(dQ_desc" in body and "tw::tma_store_wait<false>()" in body


def test_contiguous_rows_need_no_tensor_map():
    lowered = tw.lower(rows_in_turn, target="cuda")
    body = lowered.kernel_source.split('extern "C"')[1]
    assert "tw::tma_store_add((&C[(it * 4096)]), (&s[0]), 16384);" in body
    assert not lowered.tma_descriptors


def test_the_printed_ir_says_what_the_user_wrote():
    trace = tw.lower(rows_in_turn, target="cuda").trace
    frontend = next(s for s in trace.passes if s.name == "frontend")
    assert "T.atomic_add(C[it * 32:it * 32 + 32, 0:128], s, use_tma=True)" in frontend.ir_after


@pytest.mark.parametrize("kernel", [heads_kernel(), heads_kernel(read_after=True), rows_in_turn],
                         ids=["tensor map", "read again", "bytes"])
def test_the_reductions_compile_for_sm_90a(kernel):
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(tw.lower(kernel, target="cuda").kernel_source, "sm_90a")


def hinted(form):
    """A tile added with ``use_tma=True`` in a form no TMA reduction takes: element atomics."""

    @T.prim_func
    def kernel(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32"),
               H: T.Tensor((64, 64), "float16")):
        with T.Kernel(2, threads=128):
            s = T.alloc_shared((64, 64), "float32")
            h = T.alloc_shared((64, 64), "float16")
            f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, s)
            T.copy(A, f)
            T.copy(A, h)
            if form == "float16":
                T.atomic_add(H[0:64, 0:64], h, use_tma=True)
            elif form == "fragment":
                T.atomic_add(C[0:64, 0:64], f, use_tma=True)
            elif form == "part of a tile":
                T.atomic_add(C[0:32, 0:64], s[32:64, :], use_tma=True)
            else:  # rows of 8 floats: 32 bytes, but the region's columns start at 4
                T.atomic_add(C[0:64, 4:12], s[:, 0:8], use_tma=True)

    return kernel


@pytest.mark.parametrize("form", ["float16", "fragment", "part of a tile", "columns"])
def test_other_forms_take_the_hint_as_element_atomics(form):
    body = _source(hinted(form))
    assert "tma_store_add" not in body and "atomicAdd(" in body
