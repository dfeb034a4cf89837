"""``warp_specialize`` on a loop whose work besides its gemms reads a tile the loop loads (an
attention backward's ``exp2(s * scale - lse_shared[j])``): the read is of the stage's version, the
stage's full barrier (or with one stage the tile's own) is waited for before it and released after
it, and the loop takes no overlapped schedule; writing such a tile keeps the loop to one role.
And shared memory placed by lifetime in a warp-specialised kernel: the split's tiles, which would
not fit side by side, share bytes (the loop's tiles with the epilogue's), with a consumers' barrier
before the first write of reused bytes; and where the plan then does not fit after all, the kernel
is compiled again without the split. The tile-level interpreter against float64, the generated
code, NVRTC (GPU: tests/gpu/test_ws_reads_loaded_tiles_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T

SCALE = 0.125


def scored_sum(n=256, bm=128, bn=64, d=64, stages=2, write_loaded=False, epilogue_tiles=0, threads=256):
    """O = sum over column blocks k of exp2(K Q_k^T * SCALE - L_k) Q_k, for each row block of K:
    the loop loads Q_k and L_k (L_k read only by the work between the gemms). ``epilogue_tiles``:
    that many (at most 3) float32 (bm x d) tiles the result passes through after the loop, each
    adding 1 (allocated, unused, when fewer)."""

    @T.prim_func
    def kernel(K: T.Tensor((n, d), "float16"), Q: T.Tensor((n, d), "float16"), L: T.Tensor((n,), "float32"),
               O: T.Tensor((n, d), "float32")):
        with T.Kernel(n // bm, threads=threads) as bx:
            k_s = T.alloc_shared((bm, d), "float16")
            q = T.alloc_shared((bn, d), "float16")
            l_s = T.alloc_shared((bn,), "float32")
            s = T.alloc_fragment((bm, bn), "float32")
            p = T.alloc_fragment((bm, bn), "float16")
            acc = T.alloc_fragment((bm, d), "float32")
            out1 = T.alloc_shared((bm, d), "float32")
            out2 = T.alloc_shared((bm, d), "float32")
            out3 = T.alloc_shared((bm, d), "float32")
            T.copy(K[bx * bm:(bx + 1) * bm, :], k_s)
            T.clear(acc)
            for k in T.Pipelined(n // bn, num_stages=stages):
                T.copy(Q[k * bn:(k + 1) * bn, :], q)
                T.copy(L[k * bn:(k + 1) * bn], l_s)
                T.clear(s)
                T.gemm(k_s, q, s, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * SCALE - l_s[j])
                if write_loaded:
                    for j in T.Parallel(bn):
                        l_s[j] = 0
                T.copy(s, p)
                T.gemm(p, q, acc)
            if epilogue_tiles >= 1:
                T.copy(acc, out1)
                for i, j in T.Parallel(bm, d):
                    acc[i, j] = out1[i, j] + 1
            if epilogue_tiles >= 2:
                T.copy(acc, out2)
                for i, j in T.Parallel(bm, d):
                    acc[i, j] = out2[i, j] + 1
            if epilogue_tiles >= 3:
                T.copy(acc, out3)
                for i, j in T.Parallel(bm, d):
                    acc[i, j] = out3[i, j] + 1
            T.copy(acc, O[bx * bm:(bx + 1) * bm, :])

    return kernel


def scored_sum_want(k, q, lse, bm=128, epilogue_tiles=0):
    k64, q64 = k.astype(np.float64), q.astype(np.float64)
    p = np.exp2(k64 @ q64.T * SCALE - lse.astype(np.float64)[None, :])
    p = p.astype(np.float16).astype(np.float64)  # P as the gemm reads it
    return p @ q64 + epilogue_tiles


def _inputs(n=256, d=64, seed=0):
    rng = np.random.default_rng(seed)
    k = (rng.standard_normal((n, d)) * 0.5).astype(np.float16)
    q = (rng.standard_normal((n, d)) * 0.5).astype(np.float16)
    lse = (rng.standard_normal(n) + 4).astype(np.float32)
    return k, q, lse


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_work_reading_a_loaded_tile_is_warp_specialised_and_right(stages):
    kernel = scored_sum(stages=stages)
    art = tw.lower(kernel, target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and ws["tiles"] == ["q", "l_s"] and not ws["gemm_overlap"], ws
    k, q, lse = _inputs()
    o = np.zeros((256, 64), np.float32)
    tw.compile(kernel, target="cpu")(k, q, lse, o)
    np.testing.assert_allclose(o, scored_sum_want(k, q, lse), rtol=2e-3, atol=2e-3)


def test_with_a_barrier_pair_per_tile_and_two_stages_it_is_right_too():
    configs = {"tw.ws_tile_barriers": True}
    src = tw.lower(scored_sum(stages=2), target="sm_90a", pass_configs=configs).device_source
    consumer = src[src.index("// consumer"):]
    wait, read = consumer.index("l_s_full[(k_1 % 2)].wait"), consumer.index("l_s[(((k_1 % 2) * 64) +")
    assert wait < read < consumer.index("l_s_empty[(k_1 % 2)].arrive()")
    k, q, lse = _inputs(seed=1)
    o = np.zeros((256, 64), np.float32)
    tw.compile(scored_sum(stages=2), target="cpu", pass_configs=configs)(k, q, lse, o)
    np.testing.assert_allclose(o, scored_sum_want(k, q, lse), rtol=2e-3, atol=2e-3)


def test_the_read_is_of_the_stage_version_between_its_wait_and_release():
    src = tw.lower(scored_sum(stages=2), target="sm_90a").device_source
    consumer = src[src.index("// consumer"):]
    wait, read = consumer.index("stage_full[(k_1 % 2)].wait"), consumer.index("l_s[(((k_1 % 2) * 64) +")
    release = consumer.index("stage_empty[(k_1 % 2)].arrive()")
    assert wait < read < release


def test_with_one_stage_the_tile_is_waited_for_before_its_first_read():
    src = tw.lower(scored_sum(stages=1), target="sm_90a").device_source
    consumer = src[src.index("// consumer"):]
    wait, read, release = (consumer.index(x) for x in ("l_s_full[0].wait", "l_s[", "l_s_empty[0].arrive()"))
    assert wait < read < release


def test_writing_a_loaded_tile_keeps_one_role():
    ws = tw.lower(scored_sum(write_loaded=True), target="sm_90a").func.attrs["warp_specialized"]
    assert not ws["applied"] and ws["reason"] == ("a statement besides the T.copy loads and T.gemm writes l_s, "
                                                  "a tile the loop loads")


def test_with_one_consumer_warpgroup_the_loop_keeps_one_role():
    ws = tw.lower(scored_sum(threads=128), target="sm_90a").func.attrs["warp_specialized"]
    assert not ws["applied"] and "no register hand-over" in ws["reason"]


@pytest.mark.parametrize("stages", [1, 2])
def test_the_work_compiles_for_sm_90a(nvrtc_check, stages):
    nvrtc_check(tw.lower(scored_sum(stages=stages), target="sm_90a").device_source, "sm_90a")


# ---- shared memory by lifetime in the split ---------------------------------------------------------

BIG = dict(n=512, bm=128, bn=64, d=128, stages=3, epilogue_tiles=3)  # 3 x 64 KB after the loop


def test_the_split_fits_by_sharing_bytes_with_a_consumers_barrier():
    art = tw.lower(scored_sum(**BIG), target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and ws["shares_bytes"], ws
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert art.func.attrs["smem_bytes"] <= art.func.attrs["smem_limit"] < sum(e["size_bytes"] for e in plan.values())
    assert any(e.get("shares_with") for name, e in plan.items() if name.startswith("out"))
    src = art.device_source
    consumer = src[src.index("// consumer"):]
    loop_end = consumer.index("stage_empty[k_slot0_1].arrive()")
    first_out = consumer.index("out1", loop_end)
    assert "tw::sync_consumers<256>();" in consumer[loop_end:first_out]
    assert "__syncthreads" not in consumer  # a block barrier there would wait for the producer forever


def test_the_split_that_shares_bytes_computes_the_same():
    k, q, lse = _inputs(n=512, d=128, seed=3)
    o = np.zeros((512, 128), np.float32)
    tw.compile(scored_sum(**BIG), target="cpu")(k, q, lse, o)
    np.testing.assert_allclose(o, scored_sum_want(k, q, lse, epilogue_tiles=3), rtol=2e-3, atol=2e-3)


def test_the_shared_split_compiles_for_sm_90a(nvrtc_check):
    nvrtc_check(tw.lower(scored_sum(**BIG), target="sm_90a").device_source, "sm_90a")


def test_a_split_whose_plan_does_not_fit_is_compiled_again_with_one_role(monkeypatch):
    from tileworkbench.passes import plan_shared_memory

    by_lifetime = plan_shared_memory._plan_by_lifetime

    def no_plan_for_the_split(func, buffers):  # as if the plan came out larger than warp_specialize's sizing
        return None if func.attrs["warp_specialized"]["applied"] else by_lifetime(func, buffers)

    monkeypatch.setattr(plan_shared_memory, "_plan_by_lifetime", no_plan_for_the_split)
    art = tw.lower(scored_sum(**BIG), target="sm_90a")
    assert art.trace.resources["warp_specialization"] == {
        "applied": False, "retried": True,
        "reason": "split, its shared tiles placed by lifetime did not fit after all: compiled again with one role"}


def test_the_trace_and_the_report_say_what_became_of_the_loop():
    from tileworkbench.report.html import describe_split

    split = tw.lower(scored_sum(**BIG), target="sm_90a").trace.resources["warp_specialization"]
    assert split == {"applied": True, "stages": 3, "consumer_threads": 256, "producer_threads": 128,
                     "shares_bytes": True}
    assert describe_split(split) == ("a producer warpgroup and 256 consumer threads, 3 stage(s); shared tiles "
                                     "placed by lifetime")
    one_role = tw.lower(scored_sum(threads=128), target="sm_90a").trace.resources["warp_specialization"]
    assert not one_role["applied"] and describe_split(one_role).startswith("one role: work besides the gemms")


def test_a_kernel_without_a_pipelined_loop_has_no_such_record():
    @T.prim_func
    def copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]

    assert "warp_specialization" not in tw.lower(copy, target="sm_90a").trace.resources


def test_bytes_all_threads_used_before_the_split_get_the_block_barrier_before_it():
    """A tile every thread writes before the split whose bytes a consumer tile takes inside it: the
    barrier between them is the block's, before the split (the consumers' own barrier inside it
    would not wait for the producer's threads)."""
    from tileworkbench.ir import nodes as ir
    from tileworkbench.passes.manager import LowerContext
    from tileworkbench.passes.plan_shared_memory import plan_shared_memory
    from tileworkbench.target import Target

    func = tw.lower(scored_sum(**BIG), target="sm_90a").func
    top = ir.statements(func.body)
    at = next(i for i, x in enumerate(top) if isinstance(x, ir.WarpSpecialize))
    pre = ir.Buffer("pre", (ir.const(48 * 1024),), ir.dtypes.float32, "shared")  # 192 KB: only over others
    write = ir.BufferStore(pre, (func.launch.thread_var,), ir.const(1.0, ir.dtypes.float32))
    body = ir.seq(top[:at] + [ir.Allocate(pre), write] + top[at:])
    planned = plan_shared_memory(func.with_body(body), LowerContext(Target.of("sm_90a"), {}))
    plan = {e["name"]: e for e in planned.attrs["smem_plan"]}
    assert plan["pre"].get("shares_with")  # its bytes are taken again inside the split
    stmts = ir.statements(planned.body)
    split = next(i for i, x in enumerate(stmts) if isinstance(x, ir.WarpSpecialize))
    assert isinstance(stmts[split - 1], ir.SyncThreads) and stmts[split - 1].threads is None
