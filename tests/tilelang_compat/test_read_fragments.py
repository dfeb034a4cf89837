"""Fragments read where no thread is sure to hold the element (``passes/localize_read_fragments``):
written only whole (``T.copy``, ``T.fill``), such a fragment is a per-thread array holding all of
it: block-sparse attention's ``if block_mask[k] != 0:``, whose values are the same in every thread,
so the block barrier the ``if`` needs may stand inside it; GQA decoding's ``mask_local[j]`` in a
loop over ``(i, j)``. And copies to and from part of a fragment (``T.copy(acc_o[:valid_H, :],
O_shared)``: ``rules.copies.partial_fragment_copy``). Both CPU interpreters against numpy, NVRTC. What stays refused: such a fragment written element by element,
and an ``if`` on a local array each thread filled from its own row (``rules.uniformity`` follows
copies into local arrays now)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T

from .interpreters import on_both_interpreters
from .kernel_files import lower_main_with


@T.prim_func
def masked_rows(M: T.Tensor((8,), "int32"), A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    """Rows of A whose mask is set go to B through a shared tile; the others stay as B was."""
    with T.Kernel(1, threads=128):
        mask = T.alloc_fragment((8,), "int32")
        s = T.alloc_shared((64,), "float32")
        T.copy(M, mask)
        for k in T.serial(8):
            if mask[k] != 0:
                T.copy(A[k, :], s)
                for j in T.Parallel(64):
                    B[k, j] = s[63 - j] * 2  # other threads' elements: a barrier between


@on_both_interpreters
def test_a_mask_fragment_read_in_an_if(run):
    rng = np.random.default_rng(5)
    m = np.array([1, 0, 0, 1, 1, 0, 1, 0], np.int32)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = np.full((8, 64), -1.0, np.float32)
    run(masked_rows, m, a, b)
    want = np.where(m[:, None] != 0, a[:, ::-1] * 2, -1.0)
    assert np.array_equal(b, want)


def test_the_mask_is_a_per_thread_array_and_the_barrier_is_inside_the_if():
    code = tw.lower(masked_rows, target="sm_90a").kernel_source
    body = code.split('extern "C"')[1]
    assert "int mask[8];" in body and "mask[i0] = M[i0];" in body
    inside = body[body.index("if ((mask[k] != 0))"):]
    assert "__syncthreads();" in inside
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(code, "sm_90a")


@T.prim_func
def masked_scores(M: T.Tensor((32,), "uint8"), S: T.Tensor((16, 32), "float32"), Out: T.Tensor((16, 32), "float32")):
    """GQA decoding's mask: a row fragment read by the column variable of a loop over (i, j)."""
    with T.Kernel(1, threads=128):
        mask_local = T.alloc_fragment((32,), "uint8")
        scores = T.alloc_fragment((16, 32), "float32")
        T.copy(M, mask_local)
        T.copy(S, scores)
        for i, j in T.Parallel(16, 32):
            scores[i, j] = T.if_then_else(mask_local[j] != 0, scores[i, j], -1.0)
        T.copy(scores, Out)


@on_both_interpreters
def test_a_row_fragment_read_by_a_loop_s_column_variable(run):
    rng = np.random.default_rng(6)
    m = (rng.random(32) > 0.5).astype(np.uint8)
    s = rng.standard_normal((16, 32)).astype(np.float32)
    out = np.zeros((16, 32), np.float32)
    run(masked_scores, m, s, out)
    assert np.array_equal(out, np.where(m[None, :] != 0, s, -1.0))


@T.prim_func
def part_of_a_fragment(A: T.Tensor((64, 32), "float32"), Out: T.Tensor((20, 32), "float32"),
                       Back: T.Tensor((64, 32), "float32")):
    """GQA decoding's valid rows: the first 20 rows of an accumulator to a shared tile and out, and
    a global block into part of a fragment (the rest keeps what it held)."""
    with T.Kernel(1, threads=128):
        acc = T.alloc_fragment((64, 32), "float32")
        rows = T.alloc_shared((20, 32), "float32")
        T.copy(A, acc)
        for i, j in T.Parallel(64, 32):
            acc[i, j] = acc[i, j] * 2
        T.copy(acc[:20, :], rows)
        T.copy(rows, Out)
        T.copy(A[0:8, 0:32], acc[40:48, :])
        T.copy(acc, Back)


@on_both_interpreters
def test_copies_to_and_from_part_of_a_fragment(run):
    a = np.random.default_rng(8).standard_normal((64, 32)).astype(np.float32)
    out, back = np.zeros((20, 32), np.float32), np.zeros((64, 32), np.float32)
    run(part_of_a_fragment, a, out, back)
    want_back = a * 2
    want_back[40:48] = a[0:8]
    assert np.array_equal(out, a[:20] * 2) and np.array_equal(back, want_back)


def test_part_of_a_fragment_is_a_loop_over_all_of_it_and_compiles():
    code = tw.lower(part_of_a_fragment, target="sm_90a").kernel_source
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(code, "sm_90a")


@T.prim_func
def scalar_fragments(D: T.Tensor((4,), "float32"), X: T.Tensor((4, 16, 32), "float32"),
                     Out: T.Tensor((4, 16, 32), "float32")):
    """Mamba's chunk scan: a one-element fragment set outside every T.Parallel loop (every thread
    stores it) and read at [0] in a loop over (i, j); a second one set under an if on the block."""
    with T.Kernel(4, threads=128) as bz:
        d_local = T.alloc_fragment((1,), "float32")
        bias = T.alloc_fragment((1,), "float32")
        x = T.alloc_fragment((16, 32), "float32")
        d_local[0] = D[bz]
        bias[0] = 0.0
        if bz % 2 == 1:
            bias[0] = d_local[0] * 10
        T.copy(X[bz, :, :], x)
        for i, j in T.Parallel(16, 32):
            x[i, j] = x[i, j] * d_local[0] + bias[0]
        T.copy(x, Out[bz, :, :])


@on_both_interpreters
def test_a_fragment_every_thread_stores_outside_parallel_loops_is_a_per_thread_value(run):
    rng = np.random.default_rng(10)
    d, x = rng.standard_normal(4).astype(np.float32), rng.standard_normal((4, 16, 32)).astype(np.float32)
    out = np.zeros_like(x)
    run(scalar_fragments, d, x, out)
    bias = np.where(np.arange(4) % 2 == 1, d * 10, 0).astype(np.float32)
    np.testing.assert_allclose(out, x * d[:, None, None] + bias[:, None, None], rtol=1e-6)
    code = tw.lower(scalar_fragments, target="sm_90a").kernel_source.split('extern "C"')[1]
    assert "float d_local[1];" in code and "d_local[0] = D[bz];" in code


@T.prim_func
def column_mask_and_full_max(Idx: T.Tensor((32,), "int32"), S: T.Tensor((16, 32), "float32"),
                             X: T.Tensor((64,), "float32"), Out: T.Tensor((16, 32), "float32"),
                             Y: T.Tensor((64,), "float32")):
    """Sparse attention's mask, computed in a T.Parallel loop over it and read by the column
    variable of a loop over (h, i) (every thread computes all of it); and top-k's maximum of a whole
    1-D fragment read at [0] in a loop over it (every thread reduces it)."""
    with T.Kernel(1, threads=128):
        mask = T.alloc_fragment((32,), "bool")
        scores = T.alloc_fragment((16, 32), "float32")
        x = T.alloc_fragment((64,), "float32")
        x_max = T.alloc_fragment((1,), "float32")
        for i in T.Parallel(32):
            index = Idx[i]
            mask[i] = index >= 0
        T.copy(S, scores)
        for h, i in T.Parallel(16, 32):
            scores[h, i] = T.if_then_else(mask[i], scores[h, i], -1.0)
        T.copy(scores, Out)
        T.copy(X, x)
        T.reduce_max(x, x_max, dim=0)
        for i in T.Parallel(64):
            x[i] = x[i] - x_max[0]
        T.copy(x, Y)


@on_both_interpreters
def test_a_mask_every_thread_computes_and_a_maximum_every_thread_reduces(run):
    rng = np.random.default_rng(18)
    idx = rng.integers(-3, 5, 32).astype(np.int32)
    s, x = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    out, y = np.zeros_like(s), np.zeros_like(x)
    run(column_mask_and_full_max, idx, s, x, out, y)
    assert np.array_equal(out, np.where(idx[None, :] >= 0, s, -1.0).astype(np.float32))
    assert np.array_equal(y, x - x.max())
    code = tw.lower(column_mask_and_full_max, target="sm_90a").kernel_source.split('extern "C"')[1]
    assert "bool mask[32];" in code and "float x_max[1];" in code


@T.prim_func
def column_vector_from_shared(K: T.Tensor((8, 64), "float32"), Beta: T.Tensor((8,), "float32"),
                              G: T.Tensor((16, 64), "float32"), Out: T.Tensor((16, 64), "float32")):
    """KDA backward's ``kbj[k] = kj_shared[k] * bj_local[0]``: a fragment computed from a shared tile
    and a per-thread value all threads share, then read by the column variable of a loop over
    (i, k): every thread computes all of it, each iteration of a serial loop."""
    with T.Kernel(1, threads=128):
        k_shared = T.alloc_shared((64,), "float32")
        b_local = T.alloc_local((1,), "float32")
        kb = T.alloc_fragment((64,), "float32")
        acc = T.alloc_fragment((16, 64), "float32")
        T.copy(G, acc)
        for j in T.serial(8):
            T.copy(K[j, :], k_shared)
            b_local[0] = Beta[j]
            for k in T.Parallel(64):
                kb[k] = k_shared[k] * b_local[0]
            for i, k in T.Parallel(16, 64):
                acc[i, k] += T.if_then_else(i <= j, kb[k], 0.0)
        T.copy(acc, Out)


@on_both_interpreters
def test_a_column_vector_every_thread_computes_from_shared_memory(run):
    rng = np.random.default_rng(19)
    k, beta, g = (rng.standard_normal(shape).astype(np.float32) for shape in ((8, 64), (8,), (16, 64)))
    out = np.zeros_like(g)
    run(column_vector_from_shared, k, beta, g, out)
    kb = k.astype(np.float64) * beta.astype(np.float64)[:, None]
    want = g + np.stack([kb[i:].sum(axis=0) for i in range(16)])  # rows i >= 8 take no j
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    code = tw.lower(column_vector_from_shared, target="sm_90a").kernel_source.split('extern "C"')[1]
    assert "float kb[64];" in code


@T.prim_func
def column_scale(X: T.Tensor((4, 32, 64), "float32"), D: T.Tensor((4, 32), "float32"),
                 Y: T.Tensor((4, 64, 32), "float32")):
    """Mamba's chunk state: ``scale[j]`` read in a loop over ``(i, j)`` (with ``x`` transposed),
    ``scale`` computed from another fragment in a loop of its own, so no thread can hold it whole:
    each loop reads it from a shared copy."""
    with T.Kernel(1, threads=128):
        d_shared = T.alloc_shared((32,), "float32")
        d_local = T.alloc_fragment((32,), "float32")
        scale = T.alloc_fragment((32,), "float32")
        x = T.alloc_fragment((32, 64), "float32")
        xt = T.alloc_fragment((64, 32), "float32")
        for k in T.Pipelined(4, num_stages=1):
            T.copy(D[k, :], d_shared)
            T.copy(d_shared, d_local)
            for i in T.Parallel(32):
                scale[i] = T.exp2(d_local[i]) * d_local[i]
            T.copy(X[k, :, :], x)
            for i, j in T.Parallel(64, 32):
                xt[i, j] = x[j, i] * scale[j]
            T.copy(xt, Y[k, :, :])


def column_scale_want(x, d):
    return np.transpose(x, (0, 2, 1)) * (np.exp2(d.astype(np.float64)) * d)[:, None, :]


@on_both_interpreters
def test_a_column_read_of_a_fragment_no_thread_holds_whole_goes_through_shared_memory(run, nvrtc_check):
    rng = np.random.default_rng(20)
    x, d = rng.standard_normal((4, 32, 64)).astype(np.float32), rng.standard_normal((4, 32)).astype(np.float32)
    y = np.zeros((4, 64, 32), np.float32)
    run(column_scale, x, d, y)
    np.testing.assert_allclose(y, column_scale_want(x, d), rtol=1e-6, atol=1e-6)
    with pytest.warns(tw.TileworkbenchWarning, match="reads scale at other indices than its loop variables or its rows"):
        source = tw.lower(column_scale, target="sm_90a").kernel_source
    assert "float* scale_shared = " in source
    assert nvrtc_check(source, "sm_90a").spills_bytes == 0


@pytest.mark.parametrize("statements, message", [
    # stored by one thread only (an if on the thread index): other threads' copies would differ
    ("v = T.alloc_fragment((1,), 'float32')\n        tx = T.get_thread_binding()\n        v[0] = 0.0\n"
     "        if tx == 0:\n            v[0] = A[0, 0]\n        for j in T.Parallel(64):\n            B[0, j] = v[0]",
     "fragment v is \\(1,\\)"),
    # written element by element in a T.Parallel loop that also stores elsewhere: no thread could run
    # it whole (its other stores would be each thread's), so its elements are spread over the threads
    ("mask = T.alloc_fragment((8,), 'int32')\n        for i in T.Parallel(8):\n            mask[i] = M[i]\n"
     "            B[7, i] = 1.0\n"
     "        for k in T.serial(8):\n            if mask[k] != 0:\n                B[k, 0] = 1.0",
     "fragment mask can only be accessed inside a T.Parallel loop"),
    # a scalar set in the loop computing it: were every thread to run the loop, each would set it
    # for every element; so the loop stays spread over the threads, and the read is refused
    ("mask = T.alloc_fragment((8,), 'int32')\n        last = M[0]\n        for i in T.Parallel(8):\n"
     "            mask[i] = M[i]\n            last = M[i]\n"
     "        for k in T.serial(8):\n            if mask[k] != 0:\n                B[k, 0] = 1.0",
     "fragment mask can only be accessed inside a T.Parallel loop"),
    # computed from a per-thread value that differs between threads: each thread's whole copy
    # would differ, so the loop stays spread over the threads, and the read is refused
    ("s = T.alloc_shared((8,), 'float32')\n        own = T.alloc_local((1,), 'float32')\n"
     "        tx = T.get_thread_binding()\n        T.copy(A[0, 0:8], s)\n        own[0] = A[1, tx % 8]\n"
     "        v = T.alloc_fragment((8,), 'float32')\n        for i in T.Parallel(8):\n            v[i] = s[i] * own[0]\n"
     "        for k in T.serial(8):\n            B[k, 0] = v[k]",
     "fragment v can only be accessed inside a T.Parallel loop"),
    # each thread's own row: the values differ between threads, no barrier may go inside the if
    ("row = T.alloc_local((4,), 'int32')\n        tx = T.get_thread_binding()\n        T.copy(M[tx % 2 * 4:tx % 2 * 4 + 4], row)\n"
     "        s = T.alloc_shared((64,), 'float32')\n        if row[0] != 0:\n            T.copy(A[0, :], s)\n"
     "            for j in T.Parallel(64):\n                B[0, j] = s[63 - j]",
     "may differ between the block's threads"),
])
def test_what_is_refused(statements, message, tmp_path):
    with pytest.raises(tw.CompileError, match=message):
        lower_main_with(tmp_path, 'M: T.Tensor((8,), "int32"), A: T.Tensor((8, 64), "float32"), '
                                  'B: T.Tensor((8, 64), "float32")', statements)


@T.prim_func
def squares_by_groups(X: T.Tensor((32, 512), "float32"), S: T.Tensor((32, 4), "float32")):
    """mHC pre's sum of squares: ``x[i, jj * 4 + j]`` in a loop over ``(i, j)`` inside a serial loop
    over ``jj``; ``x`` (32 x 512 floats) is more than every thread should hold, so it is read from
    one shared copy made before the ``jj`` loop (which does not write it)."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((32, 512), "float32")
        part = T.alloc_fragment((32, 4), "float32")
        T.copy(X, x)
        T.clear(part)
        for jj in T.serial(128):
            for i, j in T.Parallel(32, 4):
                part[i, j] += x[i, jj * 4 + j] * x[i, jj * 4 + j]
        T.copy(part, S)


@on_both_interpreters
def test_a_large_fragment_read_at_computed_indices_is_copied_to_shared_memory_once(run, nvrtc_check):
    x = np.random.default_rng(22).standard_normal((32, 512)).astype(np.float32)
    s = np.zeros((32, 4), np.float32)
    run(squares_by_groups, x, s)
    want = (x.astype(np.float64) ** 2).reshape(32, 128, 4).sum(axis=1)
    np.testing.assert_allclose(s, want, rtol=1e-5)
    with pytest.warns(tw.TileworkbenchWarning, match="reads x at other indices than its loop variables or its rows"):
        artifact = tw.lower(squares_by_groups, target="sm_90a")
    code = artifact.kernel_source.split('extern "C"')[1]
    assert "float* x_shared = " in code
    # the copy is made once, ahead of the jj loop: the store into x_shared precedes it
    assert code.index("x_shared[") < code.index("for (int jj = 0;")
    assert nvrtc_check(artifact.kernel_source, "sm_90a").spills_bytes == 0
