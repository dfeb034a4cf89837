"""prefetch_gather_indices: a pipelined gather's row indices come from a thread array filled an
iteration ahead, where that is safe and the kernel has registers to spare. What the kernels
compute is checked on the thread-level interpreter (tests/tilelang_compat/test_pipelined_gathers.py
runs the gather copy, whose refill a mutant reading the wrong iteration fails) and on the GPU."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from tilelang_compat.test_pipelined_gathers import (BI, CHUNKS, COLS, SOURCE_ROWS, gather_gemm, gathered, indices,
                                                   pipelined_gather_copy, pipelined_gather_gemm)


def kernel_of(program) -> str:
    return tw.lower(program, target="sm_90a").device_source.split("// ---- kernel ----")[1]


def test_the_issue_reads_the_array_the_iteration_before_filled():
    kernel = kernel_of(pipelined_gather_gemm)
    lines = [line.strip() for line in kernel.splitlines()]
    gemm = next(i for i, line in enumerate(lines) if line.startswith("tw::wgmma_gemm_ss<"))
    refill = next(i for i, line in enumerate(lines) if line.startswith("Idx_at_ahead[") and "(k * 64)" in line)
    issue = next(i for i, line in enumerate(lines) if line.startswith("int Idx_at_1 = Idx_at_ahead["))
    assert issue < refill < gemm  # read at the iteration's top, refilled for the next one before its gemm
    assert lines[refill].endswith("= Idx[(((k * 64) + i_3) + 128)];")  # iteration k + 1's issue: rows of k + 2
    assert "if ((((k + 1) + 1) < 4))" in kernel or "if (((k + 2) < 4))" in kernel


def test_a_kernel_short_of_registers_reads_the_indices_at_the_issue():
    kernel = kernel_of(gather_gemm(512))  # the accumulator alone: 256 registers a thread
    assert "_ahead" not in kernel and "int Idx_at_1 = Idx[(((k * 64) + i_1) + 64)];" in kernel


def test_three_stages_on_the_thread_level_interpreter():
    # the copy program issues two iterations ahead: the array holds rows of k + 2, refilled with k + 3's
    assert "Idx_at_ahead" in kernel_of(pipelined_gather_copy)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((SOURCE_ROWS, COLS)).astype(np.float16)
    idx = indices(4)
    y = np.zeros((CHUNKS, BI, COLS), np.float16)
    run_at_thread_level(pipelined_gather_copy, x, idx, y)
    np.testing.assert_array_equal(y, (gathered(x, idx).reshape(CHUNKS, BI, COLS) * 2)[:, :, ::-1])


@T.prim_func
def two_pipelined_gathers(X: T.Tensor((SOURCE_ROWS, COLS), "float16"), Idx: T.Tensor((CHUNKS * BI,), "int32"),
                          Y: T.Tensor((CHUNKS, BI, COLS), "float16"), Z: T.Tensor((CHUNKS, BI, COLS), "float16")):
    with T.Kernel(1, threads=128):
        s = T.alloc_shared((BI, COLS), "float16")
        t = T.alloc_shared((BI, COLS), "float16")
        for k in T.Pipelined(CHUNKS, num_stages=2):
            for i, d in T.Parallel(BI, COLS):
                s[i, d] = X[Idx[k * BI + i], d]
            for i, d in T.Parallel(BI, COLS):
                Y[k, i, d] = s[i, d]
        for k in T.Pipelined(CHUNKS, num_stages=3):
            for i, d in T.Parallel(BI, COLS):
                t[i, d] = X[Idx[k * BI + i], d]
            for i, d in T.Parallel(BI, COLS):
                Z[k, i, d] = t[i, d] * 2


def test_two_pipelined_loops_keep_arrays_of_their_own(nvrtc_check):
    source = tw.lower(two_pipelined_gathers, target="sm_90a").device_source
    kernel = source.split("// ---- kernel ----")[1]
    assert "int Idx_at_ahead[4];" in kernel and "int Idx_at_ahead_1[4];" in kernel
    nvrtc_check(source, "sm_90a")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((SOURCE_ROWS, COLS)).astype(np.float16)
    idx = indices(5)
    y, z = np.zeros((CHUNKS, BI, COLS), np.float16), np.zeros((CHUNKS, BI, COLS), np.float16)
    run_at_thread_level(two_pipelined_gathers, x, idx, y, z)
    rows = gathered(x, idx).reshape(CHUNKS, BI, COLS)
    np.testing.assert_array_equal(y, rows)
    np.testing.assert_array_equal(z, rows * 2)
