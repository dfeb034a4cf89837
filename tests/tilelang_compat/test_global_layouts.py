"""``T.annotate_layout({A: T.Layout(A.shape, forward)})`` on a global tensor (TileLang's attention
backward keeps its float32 dQ so): element accesses and ``T.copy`` slices of ``A`` land where the
layout puts them in ``A``'s memory, on both CPU interpreters and in the generated code; what is
refused. GPU test: tests/gpu/test_global_layouts_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from .kernel_files import import_kernel_file

B, L, H, D = 1, 64, 2, 32


def dq_in_8x8_pieces(dQ):
    """TileLang's example's layout: dQ in 8 x 8 pieces, an element's place by its row and column."""
    return T.Layout(dQ.shape, lambda b, l, h, d: [b, l // 8, h, d // 8, (d % 2), 4 * (l % 8) + (d % 8) // 2])


def layout_place(b, l, h, d):  # noqa: E741
    """Where ``dq_in_8x8_pieces`` puts element (b, l, h, d), as a flat offset (numpy's model)."""
    return np.ravel_multi_index([b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2],
                                [B, L // 8, H, D // 8, 2, 32])


@T.prim_func
def scatter_doubled(X: T.Tensor((B, L, H, D), "float32"), dQ: T.Tensor((B, L, H, D), "float32")):
    """dQ (laid out) += 2 X, by atomic adds from a fragment, as the backward kernel adds its dQ."""
    with T.Kernel(L // 16, H, B, threads=128) as (bx, by, bz):
        T.annotate_layout({dQ: dq_in_8x8_pieces(dQ)})
        f = T.alloc_fragment((16, D), "float32")
        T.copy(X[bz, bx * 16:(bx + 1) * 16, by, :], f)
        for i, j in T.Parallel(16, D):
            T.atomic_add(dQ[bz, bx * 16 + i, by, j], f[i, j] * 2)


@T.prim_func
def gather_to_half(dQ: T.Tensor((B, L, H, D), "float32"), out: T.Tensor((B, L, H, D), "float16")):
    """The example's post-processing: a T.copy of each laid-out slice into a row-major tensor."""
    with T.Kernel(L // 16, H, B, threads=128) as (bx, by, bz):
        T.annotate_layout({dQ: dq_in_8x8_pieces(dQ)})
        T.copy(dQ[bz, bx * 16:(bx + 1) * 16, by, :], out[bz, bx * 16:(bx + 1) * 16, by, :])


def swap(i, j):
    return [j, i]


RUNS = {"tile level": lambda f, *a: tw.compile(f, target="cpu")(*a), "thread level": run_at_thread_level}


@T.prim_func
def transposed_by_layout(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4, 8), "float32"),
                         Z: T.Tensor((4, 8), "float32")):
    """Plain stores into a tensor laid out transposed, and plain loads of it back."""
    with T.Kernel(1, threads=32):
        T.annotate_layout({Y: T.Layout(Y.shape, swap)})
        for i, j in T.Parallel(4, 8):
            Y[i, j] = X[i, j] + 1
        for i, j in T.Parallel(4, 8):
            Z[i, j] = Y[i, j] * 2


@pytest.mark.parametrize("level", ["tile level", "thread level"])
def test_plain_stores_and_loads_follow_the_layout(level):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    y, z = np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32)
    RUNS[level](transposed_by_layout, x, y, z)
    assert np.array_equal(y.ravel(), (x + 1).T.ravel())  # element (i, j) at place (j, i) of an 8 x 4 array
    assert np.array_equal(z, (x + 1) * 2)


def expected_memory(x: np.ndarray) -> np.ndarray:
    memory = np.zeros(x.size, np.float32)
    for index in np.ndindex(*x.shape):
        memory[layout_place(*index)] = 2 * x[index]
    return memory


@pytest.mark.parametrize("level", RUNS)
def test_elements_land_where_the_layout_puts_them_and_copies_read_them_back(level):
    x = np.random.default_rng(3).standard_normal((B, L, H, D)).astype(np.float32)
    dq, out = np.zeros((B, L, H, D), np.float32), np.zeros((B, L, H, D), np.float16)
    RUNS[level](scatter_doubled, x, dq)
    assert np.array_equal(dq.ravel(), expected_memory(x))  # not row-major: the layout's order
    RUNS[level](gather_to_half, dq, out)
    assert np.array_equal(out, (2 * x).astype(np.float16))


def test_the_generated_code_indexes_the_memory_through_the_layout_and_compiles():
    code = tw.lower(scatter_doubled, target="cuda").kernel_source.split('extern "C"')[1]
    assert "float* dQ_memory = reinterpret_cast<float*>((&dQ[0]));" in code
    assert "atomicAdd((&dQ_memory[" in code and "% 2) * 32)" in code and "dQ[(" not in code
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    for kernel in (scatter_doubled, gather_to_half):
        compile_check(tw.lower(kernel, target="cuda").kernel_source, "sm_90a")


@pytest.mark.parametrize("statements, message", [
    ("T.annotate_layout({A: T.Layout((8, 4), swap)})", "the layout is for shape \\(8, 4\\), but A is \\(4, 8\\)"),
    ("T.annotate_layout({A: T.Layout(A.shape, shifted)})", "must lie in a known range from 0"),
    ("T.annotate_layout({A: T.Layout(A.shape, spread)})", "over 60 places .* more than its memory"),
    ("A[0, 0] = 1.0\n        T.annotate_layout({A: T.Layout(A.shape, swap)})", "A is used before its layout is given"),
    ("T.annotate_layout({A: T.Layout(A.shape, swap)})\n        T.fill(A, 0)", "T.fill destination: A has a layout"),
    ("T.annotate_layout({A: T.Layout(A.shape, swap)})\n        T.copy(A[0, 0], s)", "a copy of it takes a slice"),
    ("T.annotate_layout({f: T.Layout(f.shape, swap)})", "which thread holds each element"),
    ("T.annotate_layout({A: T.Layout(A.shape, swap)})\n        T.annotate_layout({A: T.Layout(A.shape, swap)})",
     "A already has a layout"),
    ("T.annotate_layout({A: T.Layout(A.shape, one_index)})", "the layout's function of A's indices failed"),
    ("T.annotate_layout({A: T.Layout(A.shape, swap)})\n        T.reshape(A, (32,))",
     "T.reshape of A, which has a layout .* is not supported"),
])
def test_what_is_refused(statements, message, tmp_path):
    source = f'''import tileworkbench.language as T


def swap(i, j):
    return [j, i]


def shifted(i, j):
    return [i - 1, j]


def spread(i, j):
    return [i, j * 2]


def one_index(i):
    return [i]


@T.prim_func
def main(A: T.Tensor((4, 8), "float32")):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((4, 8), "float32")
        f = T.alloc_fragment((4, 8), "float32")
        {statements}
'''
    with pytest.raises(tw.CompileError, match=message):
        import_kernel_file(tmp_path, source)


def flattened(i, j):
    return [i * 8 + j]


@T.prim_func
def overhanging_rows(C: T.Tensor((4, 8), "float32")):
    """A loop over 16 columns of an 8-column tensor laid out flat: columns 8..15 lie outside it, and
    their flat places (row i, column 9 -> row i + 1, column 1) belong to other elements."""
    with T.Kernel(1, threads=64):
        T.annotate_layout({C: T.Layout(C.shape, flattened)})
        for i, j in T.Parallel(4, 16):
            C[i, j] = i * 100 + j


@pytest.mark.parametrize("level", ["tile level", "thread level"])
def test_an_index_outside_the_tensor_is_outside_its_memory_view_too(level):
    c = np.full((4, 8), -1.0, np.float32)
    RUNS[level](overhanging_rows, c)
    want = np.arange(4)[:, None] * 100 + np.arange(8)[None, :]
    assert np.array_equal(c, want.astype(np.float32))  # nothing past column 7 landed anywhere
