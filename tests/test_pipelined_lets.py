"""Pipelined copies whose addresses read names the loop body computes (TileLang's paged MLA decode:
``kv_start = block_table[...] * block_size`` read by the KV copy): the pipeline computes them again,
under new names, for the iteration it issues (``inject_software_pipeline``); where it cannot, the
loop runs unpipelined. The warp-specialised producer, which runs the loop alone, computes them too,
and the scalar work before the loop (a grouped GEMM's search for its group) runs on both roles
(``rules.warp_specialization``); where it cannot, the kernel keeps one role. Before, the issued
copies named a variable the generated CUDA did not declare, and a producer loaded group 0's tiles."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.edge_cases import paged_tiles_summed
from tileworkbench.interpreter.threads import run_at_thread_level


def _inputs(rng, pages=8, page_rows=32, cols=64):
    a = rng.standard_normal((pages * page_rows, cols)).astype(np.float32)
    table = rng.permutation(pages).astype(np.int32)
    return a, table


@pytest.mark.parametrize("run", [lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level],
                         ids=["tile level", "thread level"])
def test_the_paged_sum_computes_what_numpy_does(run):
    a, table = _inputs(np.random.default_rng(11))
    out = np.zeros((32, 64), np.float32)
    run(paged_tiles_summed(), a, table, out)
    np.testing.assert_allclose(out, a.reshape(8, 32, 64).sum(0), rtol=1e-5, atol=1e-5)


def test_each_issue_computes_the_name_for_its_own_iteration(nvrtc_check):
    art = tw.lower(paged_tiles_summed(), target="sm_90a")
    src = art.device_source
    assert "int start_prologue = (Table[7] * 32);" in src  # iteration 0 reads the last page
    assert "int start_ahead = (Table[((r * -1) + 6)] * 32);" in src  # iteration r + 1
    assert art.func.attrs["pipelines"][0]["mode"] == "cp_async"
    nvrtc_check(src, "sm_90a")


def test_a_name_read_from_a_fragment_leaves_the_loop_unpipelined(nvrtc_check):
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float32"), Out: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((32, 64), "float32")
            acc = T.alloc_fragment((32, 64), "float32")
            page = T.alloc_local((1,), "int32")
            T.clear(acc)
            page[0] = 0
            for r in T.Pipelined(8, num_stages=2):
                start = page[0] * 32
                T.copy(A[start:start + 32, :], a_s)
                for i, j in T.Parallel(32, 64):
                    acc[i, j] += a_s[i, j]
                page[0] = (page[0] + 3) % 8
            T.copy(acc, Out)

    art = tw.lower(main, target="sm_90a")
    kernel = art.device_source[art.device_source.index("__global__"):]
    assert "start_ahead" not in kernel and "tw::cp_async<" not in kernel  # one copy after another
    nvrtc_check(art.device_source, "sm_90a")
    a = np.random.default_rng(2).standard_normal((256, 64)).astype(np.float32)
    out = np.zeros((32, 64), np.float32)
    tw.compile(main, target="cpu")(a, out)
    np.testing.assert_allclose(out, sum(a[(3 * r % 8) * 32:(3 * r % 8) * 32 + 32] for r in range(8)), rtol=1e-5)


def _paged_gemm():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((512, 64), "float16"), Table: T.Tensor((4,), "int32"),
             C: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((64, 128), "float32")
            T.copy(A, a_s)
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                start = Table[k] * 128
                T.copy(B[start:start + 128, :], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
            T.copy(acc, C)

    return main


def test_the_producer_computes_the_names_its_loads_read(nvrtc_check):
    """The producer warpgroup runs the loop alone: it computes ``start`` (from the page table,
    which the kernel never writes) under a name of its own; the consumers keep theirs."""
    art = tw.lower(_paged_gemm(), target="sm_90a")
    assert art.func.attrs["warp_specialized"]["applied"]
    src = art.device_source
    producer = src[src.index("// producer warpgroup"):src.index("// consumer warpgroups")]
    assert "int start_producer = (Table[k] * 128);" in producer
    assert "tw::tma_load(B_desc, stage_full[(k % 2)]" in producer and producer.rstrip().count("start_producer") == 2
    nvrtc_check(src, "sm_90a")


def test_a_loop_name_the_producer_cannot_compute_keeps_one_role(nvrtc_check):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((512, 64), "float16"), C: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((64, 128), "float32")
            page = T.alloc_var("int32")
            T.copy(A, a_s)
            T.clear(acc)
            page = 0
            for k in T.Pipelined(4, num_stages=2):
                start = page * 128  # page changes in the loop: only the consumers know it
                T.copy(B[start:start + 128, :], b_s)
                T.gemm(a_s, b_s, acc, transpose_B=True)
                page = (page + 3) % 4
            T.copy(acc, C)

    art = tw.lower(main, target="sm_90a")
    reason = art.func.attrs["warp_specialized"]
    assert not reason["applied"]
    assert "reads start, which the loop body computes from what the producer cannot compute" in reason["reason"]
    nvrtc_check(art.device_source, "sm_90a")


def test_the_paged_gemm_on_the_interpreter():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((512, 64)).astype(np.float16)
    table = rng.permutation(4).astype(np.int32)
    c = np.zeros((64, 128), np.float32)
    tw.compile(_paged_gemm(), target="cpu")(a, b, table, c)
    want = sum(a.astype(np.float64) @ b[t * 128:(t + 1) * 128].astype(np.float64).T for t in table)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-2)


def _grouped_inputs(rng, group_rows=(64, 128, 64), K=128, N=128):
    a = rng.standard_normal((sum(group_rows), K)).astype(np.float16)
    b = rng.standard_normal((len(group_rows), K, N)).astype(np.float16)
    starts = np.cumsum([0, *group_rows[:-1]]).astype(np.int32)
    return a, b, starts


def grouped_expected(a, b, starts):
    out = np.zeros((a.shape[0], b.shape[2]))
    bounds = [*starts.tolist(), a.shape[0]]
    for g in range(len(starts)):
        out[bounds[g]:bounds[g + 1]] = a[bounds[g]:bounds[g + 1]].astype(np.float64) @ b[g].astype(np.float64)
    return out


def test_the_group_search_before_the_loop_runs_on_both_roles(nvrtc_check):
    """TileLang's grouped GEMM finds its group in a loop before the pipelined one; the producer's
    loads read it. That scalar work runs on every thread ahead of the split, so both roles know
    ``g`` (before, the producer loaded group 0's tiles: wrong, or one role only)."""
    from tileworkbench.examples.edge_cases import grouped_gemm_found_in_a_loop

    art = tw.lower(grouped_gemm_found_in_a_loop(), target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"]
    assert not ws["persistent"]["applied"] and "(g) are computed once per block" in ws["persistent"]["reason"]
    src = art.device_source
    search, split = src.index("Starts[i]"), src.index("// producer warpgroup")
    assert search < split  # every thread searches, ahead of the roles
    producer = src[split:src.index("// consumer warpgroups")]
    assert "tw::tma_load(B_desc" in producer and ", g[0]);" in producer  # B's tile of group g
    nvrtc_check(src, "sm_90a")
    a, b, starts = _grouped_inputs(np.random.default_rng(8))
    c = np.zeros((a.shape[0], 128), np.float16)
    tw.compile(grouped_gemm_found_in_a_loop(), target="cpu")(a, b, starts, c)
    np.testing.assert_allclose(c, grouped_expected(a, b, starts), rtol=1e-2, atol=0.1)


def _searched_in_shared(then_bind_shift: bool):
    @T.prim_func
    def main(A: T.Tensor((256, 128), "float16"), B: T.Tensor((2, 128, 128), "float16"), Starts: T.Tensor((2,), "int32"),
             C: T.Tensor((256, 128), "float16")):
        with T.Kernel(4, threads=128) as bx:
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 128), "float16")
            starts_s = T.alloc_shared((2,), "int32")
            acc = T.alloc_fragment((64, 128), "float32")
            g = T.alloc_var("int32")
            T.copy(Starts, starts_s)
            g = 0
            for i in range(2):  # reads a shared tile: consumer-side work, not the producer's
                g = T.if_then_else(bx * 64 >= starts_s[i], i, g)
            shift = Starts[g] if then_bind_shift else 0  # bound after the search
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[bx * 64:bx * 64 + 64, k * 64:(k + 1) * 64], a_s)
                T.copy(B[g * (1 - then_bind_shift), k * 64:(k + 1) * 64, :], b_s)
                T.gemm(a_s, b_s, acc)
            for i, j in T.Parallel(64, 128):
                C[bx * 64 + i, j] = acc[i, j] + shift

    return main


def test_a_group_searched_in_shared_memory_keeps_one_role(nvrtc_check):
    art = tw.lower(_searched_in_shared(False), target="sm_90a")
    reason = art.func.attrs["warp_specialized"]
    assert not reason["applied"] and "read g, which the kernel writes" in reason["reason"]
    nvrtc_check(art.device_source, "sm_90a")


def test_a_name_bound_after_the_consumers_search_is_not_moved_ahead_of_it():
    reason = tw.lower(_searched_in_shared(True), target="sm_90a").func.attrs["warp_specialized"]
    assert not reason["applied"] and "shift is computed after statements whose results it may read" in reason["reason"]
