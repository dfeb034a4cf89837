"""Warp specialisation of T.copy + T.gemm pipelines (passes/warp_specialize.py) and what follows
from it: the producer/consumer split in the IR and the CUDA, the simulated protocol, paired
epilogue stores, and every case where the pass stands aside (with its reason)."""

import re

import numpy as np

import pytest

import tileworkbench as tw
from tileworkbench.analysis import check, simulate
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples import matmul, matmul_tma_copy
from tileworkbench.examples.attention import mha_fwd
from tileworkbench.examples.edge_cases import scaled_batch_gemm
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import IRMutator

SM90 = {"kind": "cuda", "arch": "sm_90"}
# One block per tile: the structure these tests look at (tests/test_persistent.py has the tile loop)
ONE_BLOCK_PER_TILE = {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}


def gemm(stages=3, threads=256, block=(128, 256, 64), size=(1024, 1024, 1024), **kw):
    return matmul(*size, *block, "float16", "float16", stages, threads, **kw)


def ws_info(art):
    return art.func.attrs["warp_specialized"]


def test_golden_warp_specialize_3_stages():
    art = tw.lower(gemm(), target=SM90, pass_configs=ONE_BLOCK_PER_TILE)
    after = art.trace.ir_after("warp_specialize")
    assert "with T.Kernel(4, 8, threads=256) as (bx, by):  # + 128 producer threads" in after
    body = after[after.index("        stage_full"):]
    assert body == """\
        stage_full = T.alloc_barrier([32, 32, 32])  # counts=[32, 32, 32]
        stage_empty = T.alloc_barrier([256, 256, 256])  # counts=[256, 256, 256]
        with T.ws_producer(threads=range(256, 384)):
            # producer: one warp issues the TMA loads, up to 3 stages ahead
            tw::setmaxnreg_dec<24>()
            if tx < 288:
                for k in T.serial(16, num_stages=3, pipelined=True, ws_role='producer'):
                    T.barrier_wait(stage_empty[k % 3], (k // 3 + 1) % 2)
                    T.tma_copy(A[by * 128:by * 128 + 128, k * 64:k * 64 + 64], A_shared[k % 3, 0:128, 0:64], barrier=stage_full[k % 3], leader_scope_threads=32)
                    T.tma_copy(B[k * 64:k * 64 + 64, bx * 256:bx * 256 + 256], B_shared[k % 3, 0:64, 0:256], barrier=stage_full[k % 3], leader_scope_threads=32)
                    T.barrier_arrive(stage_full[k % 3])
        with T.ws_consumer(threads=range(0, 256)):
            tw::setmaxnreg_inc<240>()
            T.fill(C_local, 0.0)
            # consumer: wait for stage k, gemm, release the slot
            for k in T.serial(16, num_stages=3, pipelined=True, ws_role='consumer'):
                T.barrier_wait(stage_full[k % 3], k // 3 % 2)
                T.gemm(A_shared[k % 3, 0:128, 0:64], B_shared[k % 3, 0:64, 0:256], C_local, in_flight=1)
                if k > 0:
                    T.barrier_arrive(stage_empty[(k + 2) % 3])
            tw::wgmma_wait<0>()
            T.barrier_arrive(stage_empty[0])
            T.sync_threads()
            T.copy(C_local, C_local_out)
            T.tma_copy(C_local_out, C[by * 128:by * 128 + 128, bx * 256:bx * 256 + 256])
            T.tma_store_wait(read=True)
"""
    assert '        C_local_out = T.alloc_shared((128, 256), "float16")' in after
    assert ws_info(art) == {"applied": True, "stages": 3, "consumer_threads": 256, "producer_threads": 128,
                            "tiles": ["A_shared", "B_shared"], "barriers": ["stage_full", "stage_empty"],
                            "registers": {"producer": 24, "consumer": 240},
                            "epilogue": "shared memory + TMA store",
                            "persistent": {"applied": False, "reason": "tw.disable_persistent is set"},
                            "gemm_overlap": False, "shares_bytes": False}


def test_generated_cuda_splits_the_block_and_compiles():
    art = tw.lower(gemm(), target=SM90, pass_configs=ONE_BLOCK_PER_TILE)
    src = art.device_source
    assert "__launch_bounds__(384, 1)" in src
    assert "if (tx >= 256) {  // producer warpgroup" in src and "} else {  // consumer warpgroups" in src
    assert src.index("setmaxnreg_dec<24>") < src.index("setmaxnreg_inc<240>")
    # one lane of the producer warp issues both loads on the stage's full barrier
    assert len(re.findall(r"tw::tma_load\((A|B)_desc, stage_full\[", src)) == 2
    assert "stage_empty[k_slot0].wait((1 - k_phase0));" in src  # slot and phase carried (carry_stage_counters)
    assert "BLOCK = (384, 1, 1)" in art.host_source
    # the consumer leaves one wgmma group running and releases the previous stage's slot
    assert re.search(r"tw::wgmma_gemm_ss<128, 256, 64, 2, 128, 128, false, tw_wgmma_m64n256k16_f16_kn, 1>", src)
    assert "if ((k_1 > 0)) {\n        stage_empty[k_slot1].arrive();" in src
    result = compile_check(src, "sm_90a", "ws.cu")
    assert result.spills_bytes == 0 and "C7508" not in result.log  # setmaxnreg was not ignored


def test_one_warpgroup_needs_no_register_rebalancing():
    art = tw.lower(gemm(stages=4, threads=128, block=(128, 128, 64)), target=SM90)
    assert ws_info(art)["applied"] and ws_info(art)["registers"] is None
    assert "setmaxnreg" not in art.device_source.split("---- kernel ----")[1]
    assert "__launch_bounds__(256, 1)" in art.device_source


def test_simulated_protocol_interleaves_the_two_loops_without_findings():
    art = tw.lower(gemm(stages=2), target=SM90, pass_configs=ONE_BLOCK_PER_TILE)
    sim = simulate(art)
    assert sim.findings == [] and check(art) == []
    waits = [(e["barrier"], e["iteration"], e["completes"]) for e in sim.events if e["kind"] == "wait"]
    # producer iteration k waits on empty, consumer iteration k on full, both complete every time
    assert waits[:4] == [("stage_empty", 0, True), ("stage_full", 0, True), ("stage_empty", 1, True),
                         ("stage_full", 1, True)]
    assert len(waits) == 2 * 16 and all(done for *_, done in waits)
    roles = {lp.get("role") for lp in sim.loops}
    assert roles == {"producer", "consumer"}


class _DropArrives(IRMutator):
    """Removes the consumer's release of the slots (a protocol bug the compiler must never make)."""

    def visit_Evaluate(self, node):
        call = node.call
        if isinstance(call, ir.Call) and call.name == ".arrive" and call.args[0].buffer.name == "stage_empty":
            return ir.SeqStmt([])
        return node


def test_a_missing_release_is_a_deadlock_the_simulation_finds():
    art = tw.lower(gemm(stages=2), target=SM90, pass_configs=ONE_BLOCK_PER_TILE)
    broken = art.func.with_body(_DropArrives().visit(art.func.body))
    sim = simulate(broken)
    stuck = [f for f in sim.findings if f["code"] == "wait_never_completes"]
    assert stuck and stuck[0]["barrier"] == "stage_empty" and stuck[0]["iteration"] == 2


def test_epilogue_goes_through_the_pipeline_tiles_and_one_tma_store():
    art = tw.lower(gemm(stages=4), target=SM90)
    # four stages leave no room for an epilogue tile of its own: one block per tile
    assert "more than 232448" in ws_info(art)["persistent"]["reason"]
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    out = plan["C_local_out"]
    assert out["offset"] == 0 and out["shares_with"] == ["A_shared", "B_shared"]
    assert art.func.attrs["smem_bytes"] == 4 * (128 * 64 + 64 * 256) * 2 + 2 * 4 * 8  # no bytes of its own
    src = art.device_source.split("// ---- kernel ----")[1]
    drain = src.index("tw::wgmma_wait<0>();")
    # consumer barrier (all past the last wgmma), stmatrix stores into the swizzled panels, the store
    assert drain < src.index("tw::sync_consumers<256>();", drain) < src.index("tw::store_matrix_x4((&tw::swizzled<tw::half, 128>(C_local_out")
    assert re.search(r"if \(tw::shuffle_elect<256>\(\)\) \{\n\s+tw::tma_store\(C_desc, ", src)
    assert src.rstrip().endswith("tw::tma_store_wait<true>();\n  }\n}")
    assert (art.tma_descriptors["C_desc"].rank, art.tma_descriptors["C_desc"].box_dims) == (3, (64, 128, 4))
    assert check(art) == []


def test_one_stage_counts_its_tiles_for_the_epilogue():
    # One stage has no versions, but its tiles (2 x 16 KB) are the ring's all the same: the 32 KB
    # result tile fits the budget and leaves through shared memory and a TMA store.
    art = tw.lower(scaled_batch_gemm(1), target=SM90)
    assert ws_info(art)["applied"] and ws_info(art)["epilogue"] == "shared memory + TMA store"
    assert art.func.attrs["pipelines"][0]["buffers"] == ["A_s", "B_s"]
    assert "acc_out" in {e["name"] for e in art.func.attrs["smem_plan"]}
    assert "tw::tma_store(C_desc" in art.device_source
    assert check(art) == []


def test_without_warp_specialisation_the_result_still_leaves_through_a_tma_store():
    art = tw.lower(gemm(), target=SM90, pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert art.func.attrs["staged_epilogue"] == "C_local_out"  # stage_epilogue
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert plan["C_local_out"]["offset"] == 0 and plan["C_local_out"]["shares_with"] == ["A_shared", "B_shared"]
    body = art.device_source.split("---- kernel ----")[1]
    assert "tw::store_matrix_x4((&tw::swizzled<tw::half, 128>(C_local_out" in body and "tw::tma_store(C_desc" in body
    assert check(art) == []


def test_register_epilogue_stores_fp16_results_in_pairs():
    art = tw.lower(gemm(), target=SM90, pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
                                                      tw.PassConfigKey.TW_REGISTER_EPILOGUE: True})
    assert art.func.attrs["staged_epilogue"] is None
    # the loop-invariant part of the address is a pointer declared before the loop (codegen)
    src = art.device_source
    assert "tw::half* C_pairs = &C[" in src and "tw::store_pair((&C_pairs[" in src
    assert re.search(r"C = rt\.tensor\('C'.*align=4\)", art.host_source)


def test_ragged_edges_are_clipped_by_the_tma_store_or_guarded():
    ragged = matmul(1000, 1024, 776, 128, 128, 64, "float16", "float16", 3, 128)
    art = tw.lower(ragged, target=SM90)
    assert ws_info(art)["applied"] and ws_info(art)["epilogue"] == "shared memory + TMA store"
    plain = tw.lower(matmul(1000, 1024, 776, 128, 128, 64, "float16", "float16", 3, 128), target=SM90,
                     pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
                                   tw.PassConfigKey.TW_REGISTER_EPILOGUE: True})
    body = plain.device_source.split("---- kernel ----")[1]
    # rows past M: each pair of a row behind the row's guard, from a base pointer set before the loop
    assert re.search(r"if \(\(+\(by \* 128\)[^\n]*< 1000\)\) \{\n\s*tw::store_pair\(\(&C_pairs\[", body)
    assert re.search(r"C = rt\.tensor\('C'.*align=4\)", plain.host_source)


@pytest.mark.parametrize("build,configs,reason", [
    (lambda: gemm(), {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}, "tl.disable_warp_specialized is set"),
    (lambda: gemm(), {tw.PassConfigKey.TL_DISABLE_TMA_LOWER: True}, "tl.disable_tma_lower is set"),
    (lambda: gemm(), {tw.PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT: 2.0}, "debug mode"),
    (lambda: gemm(stages=1), {}, "num_stages < 2"),
    (lambda: gemm(block=(128, 128, 32)), {}, "too little work per stage"),
    (lambda: matmul(1000, 1030, 770, 128, 128, 32, "bfloat16"), {}, "cannot be a TMA copy"),
    # a two-gemm loop at num_stages=0 had been split with no stage to fill: `k % 0` and no line
    (lambda: mha_fwd(1, 2, 256, 64, False, block_M=128, block_N=64, num_stages=0), {}, "num_stages=0"),
    (lambda: matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 2), {},
     "barriers of its own"),
])
def test_the_pass_stands_aside_and_says_why(build, configs, reason):
    art = tw.lower(build(), target=SM90, pass_configs=configs)
    info = ws_info(art)
    assert info["applied"] is False and reason in info["reason"]
    assert art.func.launch.producer_threads == 0 and "ws_producer" not in art.trace.ir_after("simplify")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_a_two_gemm_loop_without_stages_runs_its_copies_and_gemms_in_turn(causal):
    """Attention at num_stages=0 (TileLang's spelling of no pipelining): not warp-specialised, its
    CUDA compiles, and the CPU interpreter's run of its tile program matches float64."""
    program = mha_fwd(1, 1, 128, 64, causal, block_M=64, block_N=64, num_stages=0, threads=128)
    compile_check(tw.lower(program, target=SM90).device_source, "sm_90a")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 128, 64)).astype(np.float16) for _ in range(3))
    out = np.asarray(tw.compile(program, out_idx=[3], target="cpu")(q, k, v), dtype=np.float64)[0, 0]
    scores = q[0, 0].astype(np.float64) @ k[0, 0].astype(np.float64).T / 8.0
    if causal:
        scores = np.where(np.tri(128) > 0, scores, -np.inf)
    p = np.exp(scores - scores.max(1, keepdims=True))
    want = (p / p.sum(1, keepdims=True)) @ v[0, 0].astype(np.float64)
    np.testing.assert_allclose(out, want, atol=5e-3)  # P rounded to float16 for P @ V, as on the GPU


def test_other_targets_are_left_alone():
    art = tw.lower(gemm(), target={"kind": "cuda", "arch": "sm_80"})
    assert ws_info(art) == {"applied": False, "reason": "target sm_80 (warp specialisation is for sm_90a)"}


@pytest.mark.parametrize("block, threads, box", [((128, 256, 64), 256, (64, 64, 2)), ((64, 128, 64), 128, (64, 64))])
def test_transpose_a_takes_the_wgmma_path_with_an_m_major_a(block, threads, box):
    art = tw.lower(matmul(1024, 1024, 1024, *block, "float16", "float16", 3, threads, trans_A=True), target=SM90)
    assert ws_info(art)["applied"]
    src = art.device_source
    assert f"tw_wgmma_m64n{block[1]}k16_f16_mn" in src and ", 1, 1, 1, 1;" in src  # imm-trans-a and -b set
    assert re.search(rf"tw::wgmma_gemm_ss<{block[0]}, {block[1]}, 64, {threads // 128}, 128, .*_mn, 1, false>", src)
    # A's tile is K x M in 128-byte panels of 64 M-columns: a 3-D TMA box (64, K, panels), or a
    # plain 2-D one where M is one panel
    assert art.tma_descriptors["A_desc"].box_dims == box


def test_transpose_a_rows_that_are_not_whole_panels_take_one_tma_copy_per_panel():
    """A^T rows of 1000 elements cannot be cut into 64-element panels by one 3-D TMA map: each
    128-byte panel of the A tile is a 2-D copy of its own, and the kernel stays warp-specialised."""
    art = tw.lower(matmul(1000, 1024, 776, 128, 128, 64, "float16", "float16", 2, 128, trans_A=True), target=SM90)
    assert ws_info(art)["applied"]
    assert "wgmma_gemm_ss<128, 128, 64, 1, 128, 128, false, tw_wgmma_m64n128k16_f16_mn" in art.device_source
    desc = art.tma_descriptors["A_desc"]
    assert (desc.rank, desc.global_dims, desc.box_dims) == (2, (1000, 776), (64, 64))
    body = art.device_source.split("// ---- kernel ----")[1]
    assert body.count("tw::tma_load(A_desc") == 2  # two panels of 64 columns of M per stage


def test_transpose_a_rows_off_16_byte_boundaries_keep_wgmma_but_not_tma():
    """A^T rows of 1001 halves start 2002 bytes apart: TMA cannot read them (strides must be
    multiples of 16 bytes), so no warp specialisation, and the threads' copies fill the panels."""
    art = tw.lower(matmul(1001, 1024, 776, 128, 128, 64, "float16", "float16", 2, 128, trans_A=True), target=SM90)
    assert "strides that are multiples of 16 bytes; A has a stride of 2002 bytes" in ws_info(art)["reason"]
    assert "wgmma_gemm_ss<128, 128, 64, 1, 128, 128, false, tw_wgmma_m64n128k16_f16_mn, 0, false>" in art.device_source
    assert "A_desc" not in art.tma_descriptors


def b_loaded_once(rescale_b: bool = False, k: int = 64):
    """An indexer's shape: B (the query block) loaded once before the loop, A's tiles in it, each
    step's scores stored (work besides the gemm); with ``rescale_b`` the loop also writes B."""
    import tileworkbench.language as T

    @T.prim_func
    def scores(A: T.Tensor((512, k), "float16"), B: T.Tensor((128, k), "float16"), C: T.Tensor((512, 128), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, k), "float16")
            b_s = T.alloc_shared((128, k), "float16")
            acc = T.alloc_fragment((64, 128), "float32")
            T.copy(B, b_s)
            for t in T.Pipelined(8, num_stages=2):
                T.copy(A[t * 64, 0], a_s)
                T.gemm(a_s, b_s, acc, transpose_B=True, clear_accum=True)
                T.copy(acc, C[t * 64, 0])
                if rescale_b:
                    for i, j in T.Parallel(128, k):
                        b_s[i, j] = b_s[i, j] * 0.5

    return scores


@pytest.mark.parametrize("k", [64, 32], ids=["k-step 128 bytes", "k-step 64 bytes"])
def test_a_b_tile_loaded_before_the_loop_stays_where_it_is_for_the_consumers(k):
    """Split at either k-step: the minimum (``MIN_K_STEP_BYTES``) is for loops of gemms alone."""
    art = tw.lower(b_loaded_once(k=k), target=SM90)
    assert ws_info(art)["applied"] is True and ws_info(art)["tiles"] == ["a_s"]  # the producer refills A only
    compile_check(art.device_source, "sm_90a")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((512, k)).astype(np.float16), rng.standard_normal((128, k)).astype(np.float16)
    c = np.zeros((512, 128), np.float32)
    tw.compile(b_loaded_once(k=k), target="cpu")(a, b, c)  # the tile level: the split's barriers and races
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-3, atol=1e-3)


def test_a_b_tile_the_consumers_write_in_the_loop_stays_theirs(nvrtc_check):
    """The consumers rescale B after each gemm, which completes before they do: the split keeps
    B out of the producer's ring, and the next gemm reads it after every consumer's write."""
    art = tw.lower(b_loaded_once(rescale_b=True), target=SM90)
    info = ws_info(art)
    assert info["applied"] is True and info["tiles"] == ["a_s"]
    consumer = art.device_source[art.device_source.index("// consumer warpgroups"):]
    loop = consumer[consumer.index("for (int t"):]
    # the last iteration's rescale reaches the async proxy, and every consumer's, before the gemm
    top = loop[:loop.index("tw::wgmma_gemm_ss")]
    assert "tw::fence_proxy_async();\n      tw::sync_consumers<128>();" in top, top
    nvrtc_check(art.device_source, "sm_90a")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((512, 64)).astype(np.float16), rng.standard_normal((128, 64)).astype(np.float16)
    c = np.zeros((512, 128), np.float32)
    tw.compile(b_loaded_once(rescale_b=True), target="cpu")(a, b, c)
    want = np.concatenate([a[t * 64:(t + 1) * 64].astype(np.float64) @ (b.astype(np.float64) * 0.5 ** t).T
                           for t in range(8)])
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3)
