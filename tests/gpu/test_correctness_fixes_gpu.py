"""Issue 15's silent miscompiles, run on the GPU against float64 references on random data (their
CPU tests on the generated code are tests/test_correctness_fixes.py). Outputs are poisoned with NaN
before each launch, so an element the kernel does not write fails the check."""

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.examples.edge_cases import (big_tensor_copy, collatz_steps, long_vector_add, loop_temporaries, masked_block_gemm,
                                                masked_tma_copy,
                                                mixed_gemm_forms, overhanging_tiles, run_time_extent_copy, scaled_batch_gemm,
                                                triangular_tma_copy, two_gemm_forms)
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.fixture
def cupy():
    cp = pytest.importorskip("cupy")
    yield cp
    cp.get_default_memory_pool().free_all_blocks()


def test_a_run_time_extent_copies_exactly_its_elements(cupy):
    kernel = tw.compile(run_time_extent_copy(), out_idx=[1])
    a = cupy.random.standard_normal(1024, dtype=cupy.float32)
    b = cupy.full(1024, cupy.nan, dtype=cupy.float32)
    kernel(a, b)
    ref = np.full(1024, -1.0)
    host = cupy.asnumpy(a).astype(np.float64)
    for bx in range(8):
        n = 16 * bx + 8
        ref[bx * 128:bx * 128 + n] = host[bx * 128:bx * 128 + n]
    np.testing.assert_array_equal(cupy.asnumpy(b).astype(np.float64), ref)


def _gemm_check(cupy, program, inputs, ref):
    kernel = tw.compile(program, out_idx=[len(inputs)])
    out = cupy.full(ref.shape, cupy.nan, dtype=cupy.float32)
    kernel(*inputs, out)
    out = out.get().astype(np.float64)
    assert np.isfinite(out).all()
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err  # fp16 products summed in float32: far below this


def test_two_gemm_forms_into_one_accumulator(cupy):
    p, q, r = (cupy.random.standard_normal(s, dtype=cupy.float32).astype(cupy.float16)
               for s in ((128, 64), (64, 128), (128, 64)))
    P, Q, R = (x.get().astype(np.float64) for x in (p, q, r))
    _gemm_check(cupy, two_gemm_forms(), (p, q, r), P @ Q + P @ R.T)


def test_a_wgmma_and_an_mma_sync_gemm_into_one_accumulator(cupy):
    p, q, u, v = (cupy.random.standard_normal(s, dtype=cupy.float32).astype(cupy.float16)
                  for s in ((128, 64), (64, 64), (128, 48), (48, 64)))
    P, Q, U, V = (x.get().astype(np.float64) for x in (p, q, u, v))
    _gemm_check(cupy, mixed_gemm_forms(), (p, q, u, v), U @ V + P @ Q)


def _random_half(cupy, shape, rows_per_chunk):
    """A random float16 tensor filled a chunk of rows at a time (no 4-byte copy of 8 GiB at once)."""
    x = cupy.empty(shape, dtype=cupy.float16)
    for r in range(0, shape[0], rows_per_chunk):
        x[r:r + rows_per_chunk] = cupy.random.standard_normal((min(rows_per_chunk, shape[0] - r),) + shape[1:],
                                                              dtype=cupy.float32).astype(cupy.float16)
    return x


def test_a_tensor_of_2_to_the_32_elements_is_copied_whole(cupy):
    """65536 x 65536 float16 (8 GiB): with 32-bit offsets every tile past row 32768 would be read
    from and written to the wrong place (or fault)."""
    n = 65536
    kernel = tw.compile(big_tensor_copy(n), out_idx=[1])
    a = _random_half(cupy, (n, n), 4096)
    b = cupy.full((n, n), cupy.nan, dtype=cupy.float16)
    kernel(a, b)
    cupy.cuda.runtime.deviceSynchronize()
    # The copy must be exact; compare in float64 a band of rows at a time, the last ones included.
    for r in list(range(0, n, 8192)) + [n - 64]:
        band = slice(r, r + 64)
        np.testing.assert_array_equal(b[band].get().astype(np.float64), a[band].get().astype(np.float64))
    assert not bool(cupy.isnan(b).any())
    del a, b


def test_a_vector_past_2_to_the_31_elements(cupy):
    """Y = X + 1 over 2^31 + 1000 float16 elements: the guard and the index pass 2^31 for the last
    blocks, where 32-bit arithmetic would wrap to negative offsets."""
    n = 2**31 + 1000
    kernel = tw.compile(long_vector_add(n), out_idx=[1])
    x = _random_half(cupy, (n,), 2**28)
    y = cupy.full(n, cupy.nan, dtype=cupy.float16)
    kernel(x, y)
    cupy.cuda.runtime.deviceSynchronize()
    for start in (0, 2**30, 2**31 - 4096, n - 4096):
        part = slice(start, start + 4096)
        ref = (x[part].get().astype(np.float64) + 1.0).astype(np.float16).astype(np.float64)
        np.testing.assert_array_equal(y[part].get().astype(np.float64), ref)
    del x, y


def test_a_masked_block_gemm_adds_exactly_its_masked_tiles(cupy):
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((256, 256), (256, 256)))
    mask = (rng.random((2, 2, 8)) < 0.5).astype(np.int32)
    ref = np.zeros((256, 256))
    for by in range(2):
        for bx in range(2):
            for k in range(8):
                if mask[by, bx, k]:
                    ref[by * 128:(by + 1) * 128, bx * 128:(bx + 1) * 128] += (
                        a[by * 128:(by + 1) * 128, k * 32:(k + 1) * 32].astype(np.float64)
                        @ b[k * 32:(k + 1) * 32, bx * 128:(bx + 1) * 128].astype(np.float64))
    _gemm_check(cupy, masked_block_gemm(), (cupy.asarray(a), cupy.asarray(b), cupy.asarray(mask)), ref)


def test_a_masked_tma_copy_copies_exactly_its_masked_tiles(cupy):
    kernel = tw.compile(masked_tma_copy())
    a = cupy.random.standard_normal((1024, 64), dtype=cupy.float32).astype(cupy.float16)
    mask = cupy.asarray([1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 1], dtype=cupy.int32)
    y = cupy.random.standard_normal((1024, 64), dtype=cupy.float32).astype(cupy.float16)
    ref = y.get()
    for k in np.flatnonzero(mask.get()):
        ref[k * 64:(k + 1) * 64] = a.get()[k * 64:(k + 1) * 64]
    kernel(a, mask, y)
    np.testing.assert_array_equal(y.get(), ref)


def test_a_triangular_loop_of_tma_copies_copies_every_tile(cupy):
    kernel = tw.compile(triangular_tma_copy())
    a = cupy.random.standard_normal((512, 64), dtype=cupy.float32).astype(cupy.float16)
    y = cupy.full((512, 512), cupy.nan, dtype=cupy.float16)
    ref = np.full((512, 512), np.nan, dtype=np.float16)
    for i in range(8):
        for j in range(i):
            ref[i * 64:(i + 1) * 64, j * 64:(j + 1) * 64] = a.get()[(i - 1 - j) * 64:(i - j) * 64]
    kernel(a, y)
    np.testing.assert_array_equal(y.get(), ref)


@pytest.mark.parametrize("stages", [1, 2])
def test_a_batched_gemm_with_work_after_its_gemm(cupy, stages):
    kernel = tw.compile(scaled_batch_gemm(stages), out_idx=[2])
    assert "tw::tma_store(C_desc" in kernel.get_kernel_source()  # the epilogue through shared memory
    a, b = (cupy.random.standard_normal((4, 512, 512), dtype=cupy.float32).astype(cupy.float16) for _ in range(2))
    c = kernel(a, b).get().astype(np.float64)
    ref = 0.5 * np.matmul(a.get().astype(np.float64), b.get().astype(np.float64))
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 2e-3  # float16 results


def test_overhanging_tiles_read_zeros_outside_and_write_nothing_outside(cupy):
    M, N, block = 1000, 200, 64
    kernel = tw.compile(overhanging_tiles(M, N, block, block))
    a = cupy.random.standard_normal((M, N), dtype=cupy.float32)
    blocks_n = -(-N // block)
    # Each output is the front of a larger buffer whose tail holds a sentinel no store may touch.
    c_all = cupy.full(M * N + 4096, cupy.nan, dtype=cupy.float32)
    s_all = cupy.full(M * blocks_n + 4096, cupy.nan, dtype=cupy.float32)
    c, s = c_all[:M * N].reshape(M, N), s_all[:M * blocks_n].reshape(M, blocks_n)
    c_all[M * N:] = 7.0
    s_all[M * blocks_n:] = 7.0
    kernel(a, c, s)
    host = a.get().astype(np.float64)
    np.testing.assert_allclose(c.get(), 2 * host + 1, rtol=1e-6, atol=1e-6)
    sums = np.stack([2 * host[:, j * block:(j + 1) * block].sum(axis=1) for j in range(blocks_n)], axis=1)
    np.testing.assert_allclose(s.get(), sums, rtol=1e-5, atol=1e-4)
    assert (c_all[M * N:].get() == 7.0).all() and (s_all[M * blocks_n:].get() == 7.0).all()


def test_top_k_rows_on_a_ragged_last_block(torch):
    from tileworkbench.examples.tilelang_programs.topk import _distinct_logits, top_k_rows
    logits = _distinct_logits(torch, 300, 64)
    values, indices = top_k_rows(logits, 4, blk_m=16)
    want_values, want_indices = logits.topk(4, dim=1)
    torch.testing.assert_close(values, want_values, rtol=0, atol=0)
    torch.testing.assert_close(indices, want_indices.int(), rtol=0, atol=0)


def test_a_while_loop_runs_each_threads_own_trip_count(cupy):
    kernel = tw.compile(collatz_steps(1024), out_idx=[1])
    x = cupy.random.randint(1, 100000, size=1024, dtype=cupy.int32)
    steps = kernel(x).get()

    def count(v):
        n = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            n += 1
        return n

    np.testing.assert_array_equal(steps, [count(int(v)) for v in x.get()])


def test_loop_temporaries_become_scalars_that_hold_what_the_elements_held(cupy):
    """``scalarize_loop_temporaries``: the shuffled partner and the float16 array as scalars (the
    float16 rounding kept), the offsets filled by an earlier loop still an array."""
    kernel = tw.compile(loop_temporaries(), out_idx=[1])
    assert "partner[" not in kernel.get_kernel_source() and "offsets[" in kernel.get_kernel_source()
    x = cupy.random.standard_normal(4 * 128 * 8, dtype=cupy.float32)
    y = cupy.full_like(x, cupy.nan)
    kernel(x, y)
    host = cupy.asnumpy(x).reshape(-1, 8)  # one row per thread; float32 arithmetic, as the kernel's
    neighbour = host.reshape(-1, 2, 8)[:, ::-1].reshape(-1, 8)  # thread t ^ 1's row
    summed = (host + neighbour) + np.arange(8, dtype=np.float32) * np.float32(0.5)
    ref = (summed * np.float32(3)).astype(np.float16).astype(np.float32) + np.float32(1)
    np.testing.assert_array_equal(cupy.asnumpy(y).reshape(-1, 8), ref)
