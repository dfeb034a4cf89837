"""Rows gathered by an index into a shared tile, as DeepSeek's sparse MLA gathers its KV rows
(``KV_shared[i, d] = KV[Indices[i], d]``): the bounds check ``guard_global_accesses`` puts on each
load is the same for a row's neighbours, so they move 16 bytes at a time under it
(``rules.vector_runs``), a row out of range read as zeros; and a tile in 128-byte panels (a gemm's
operand wider than 128 bytes) takes such runs too. A run that only copies moves whole: copied where
its check holds, zeroed where not. Both CPU interpreters against numpy (the thread level checks every
access is in bounds), the CUDA's runs, NVRTC."""

from __future__ import annotations

import re

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T

from .interpreters import on_both_interpreters

ROWS, SOURCE_ROWS, COLS, N = 64, 100, 256, 64


@T.prim_func
def gather(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((ROWS,), "int32"),
           Y: T.Tensor((ROWS, COLS), "float16")):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((ROWS, COLS), "float16")
        for i, j in T.Parallel(ROWS, COLS):
            s[i, j] = X[Idx[i], j]
        for i, j in T.Parallel(ROWS, COLS):
            Y[i, j] = s[i, j]


@T.prim_func
def gather_gemm(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((ROWS,), "int32"),
                W: T.Tensor((N, COLS), "float16"), Y: T.Tensor((ROWS, N), "float32")):
    """The gathered tile is a gemm's A, wider than 128 bytes: laid out in panels."""
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((ROWS, COLS), "float16")
        w = T.alloc_shared((N, COLS), "float16")
        acc = T.alloc_fragment((ROWS, N), "float32")
        for i, j in T.Parallel(ROWS, COLS):
            s[i, j] = X[Idx[i], j]
        T.copy(W, w)
        T.clear(acc)
        T.gemm(s, w, acc, transpose_B=True)
        T.copy(acc, Y)


def indices(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, SOURCE_ROWS, ROWS).astype(np.int32)
    idx[[3, 17]] = [SOURCE_ROWS, -1]  # out of range: read as zeros
    return idx


def gathered(x, idx):
    inside = (idx >= 0) & (idx < SOURCE_ROWS)
    return np.where(inside[:, None], x[np.clip(idx, 0, SOURCE_ROWS - 1)], 0)


@on_both_interpreters
def test_rows_gathered_by_an_index_out_of_range_read_as_zeros(run):
    x = np.random.default_rng(1).standard_normal((SOURCE_ROWS, COLS)).astype(np.float16)
    idx = indices()
    y = np.zeros((ROWS, COLS), np.float16)
    run(gather, x, idx, y)
    np.testing.assert_array_equal(y, gathered(x, idx))


def _kernel_text(func) -> str:
    return tw.lower(func, target="sm_90a").device_source.split("// ---- kernel ----")[1]


_GUARDED_RUN = re.compile(r"int Idx_at = Idx\[i\];\s*"
                          r"if \(\(\(Idx_at >= 0\) && \(Idx_at < 100\)\)\) \{\s*"
                          r"tw::copy_vec<16>\(\(&(?P<dst>[^;]*)\), \(&X\[\(\(Idx_at \* 256\) \+ j0\)\]\)\);\s*"
                          r"\} else \{\s*tw::zero_vec<16>\(\(&(?P=dst)\)\);\s*\}")


def test_a_gathered_row_moves_16_bytes_at_a_time_under_its_check(nvrtc_check):
    """Straight from the tensor into the tile where the row is in range, zeros where not: no
    local array, no choice per element (TileLang's CUDA moves such rows so); the row's index read
    once, for both sides of its check and the address (three reads, each behind a branch of its
    own, were what NVCC made of it in the sparse MLA backward)."""
    for func in (gather, gather_gemm):
        source = _kernel_text(func)
        assert _GUARDED_RUN.search(source), source
        assert "X_run0" not in source and source.count("Idx[") == 1
        nvrtc_check(tw.lower(func, target="sm_90a").device_source, "sm_90a")


def test_a_tile_in_panels_takes_the_runs():
    source = _kernel_text(gather_gemm)
    assert "tw::copy_vec<16>((&tw::swizzled<tw::half, 128>(s, " in source


def _choose(other: float):
    @T.prim_func
    def choose(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((ROWS,), "int32"),
               Y: T.Tensor((ROWS, COLS), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((ROWS, COLS), "float16")
            for i, j in T.Parallel(ROWS, COLS):
                s[i, j] = T.if_then_else(Idx[i] >= 0, X[i, j], T.float16(other))
            for i, j in T.Parallel(ROWS, COLS):
                Y[i, j] = s[i, j]
    return choose


@on_both_interpreters
def test_a_run_chosen_against_a_constant_other_than_zero_bits(run):
    """Only a choice against +0.0 moves whole with a zero fill: 1.0, and -0.0 (equal to zero, not
    its bits), are chosen element by element, and the interpreters keep -0.0's sign."""
    x = np.random.default_rng(2).standard_normal((SOURCE_ROWS, COLS)).astype(np.float16)
    idx = indices()
    for other in (1.0, -0.0):
        y = np.zeros((ROWS, COLS), np.float16)
        run(_choose(other), x, idx, y)
        want = np.where((idx >= 0)[:, None], x[:ROWS], np.float16(other))
        np.testing.assert_array_equal(y, want)
        assert (np.signbit(y) == np.signbit(want)).all()


def test_a_chosen_element_is_chosen_as_bits_not_through_float32():
    """Where a run is not a plain copy, each element is its loaded value or the constant of its own
    type: a choice between two half values, with no conversion to float32 and back."""
    for other, bits in ((1.0, "0x3c00"), (-0.0, "0x8000")):
        source = _kernel_text(_choose(other))
        run = source[source.find("X_run0[8];"):]
        run = run[:run.find("tw::copy_vec<16>((&", run.find("s_run"))]
        assert f": tw::half{{{bits}}})" in run and "to_float" not in run and "from_float" not in run
        assert "zero_vec" not in source


def test_the_bits_of_a_constant_a_16_bit_type_holds_exactly():
    from tileworkbench.codegen.cuda import exact_bits
    from tileworkbench.dtypes import bfloat16, float16

    assert [exact_bits(float16, v) for v in (0.0, -0.0, 1.0, -2.5, 65504.0, float("inf"))] == [
        0x0000, 0x8000, 0x3C00, 0xC100, 0x7BFF, 0x7C00]
    assert [exact_bits(bfloat16, v) for v in (0.0, 1.0, -2.5, 1.5)] == [
        0x0000, 0x3F80, 0xC020, 0x3FC0]
    # not held exactly (or NaN, whose bits the conversion chooses): the store converts as before
    assert exact_bits(float16, 0.1) is None and exact_bits(bfloat16, 1.0 + 2**-10) is None
    assert exact_bits(float16, float("nan")) is None and exact_bits(float16, 1e6) is None
