"""A ``T.Parallel`` access of a tensor whose size is known only at launch is checked against it
(``guard_global_accesses``) unless the grid proves it inside: a block index runs below its grid
extent, so with ``T.Kernel(rows * 2)`` the row ``bx // 2`` is below ``rows`` (sparse MLA's
``Indices[b_i, s_i, ...]`` on a grid of ``seq_len * 2`` blocks, whose check had each gathered row
branch three times). A grid that overhangs the tensor (``T.ceildiv(rows, 4)`` blocks of 4 rows)
keeps its check. The CUDA, and both kernels on the CPU interpreter against numpy at sizes that
leave a partial block."""

from __future__ import annotations

import numpy as np

import tileworkbench as tilelang
import tileworkbench.language as T


def halves(target="auto"):
    @tilelang.jit(target=target)
    def scaled_halves(X):
        """Y = 2 X, two blocks a row, each taking half of it."""
        rows, cols = T.dynamic("rows"), T.const("cols")
        X: T.Tensor[(rows, cols), T.float32]
        Y = T.empty((rows, cols), T.float32)
        with T.Kernel(rows * 2, threads=32) as bx:
            r = bx // 2
            for j in T.Parallel(cols // 2):
                Y[r, (bx % 2) * (cols // 2) + j] = X[r, (bx % 2) * (cols // 2) + j] * 2
        return Y
    return scaled_halves


def quads(target="auto"):
    @tilelang.jit(target=target)
    def scaled_quads(X):
        """Y = 2 X, four rows a block: the last block hangs over the end where rows % 4 != 0."""
        rows, cols = T.dynamic("rows"), T.const("cols")
        X: T.Tensor[(rows, cols), T.float32]
        Y = T.empty((rows, cols), T.float32)
        with T.Kernel(T.ceildiv(rows, 4), threads=32) as bx:
            for i, j in T.Parallel(4, cols):
                Y[bx * 4 + i, j] = X[bx * 4 + i, j] * 2
        return Y
    return scaled_quads


def _kernel_text(jitted) -> str:
    return jitted.compile(cols=64).get_kernel_source().split("// ---- kernel ----")[1]


def test_a_row_the_grid_keeps_inside_needs_no_check():
    text = _kernel_text(halves())
    assert "< rows" not in text and "X[" in text


def test_a_grid_that_overhangs_the_tensor_keeps_its_check():
    assert "< rows" in _kernel_text(quads())


def test_both_compute_2x_at_a_size_that_leaves_a_partial_block():
    x = np.random.default_rng(0).standard_normal((10, 64)).astype(np.float32)
    for make in (halves, quads):
        np.testing.assert_array_equal(np.asarray(make("cpu")(x)), x * 2)
