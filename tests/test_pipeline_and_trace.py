"""The pass pipeline, the trace, golden text of key passes, NVRTC on every example."""

import json
import re

import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples import ALL_EXAMPLES, matmul_tma_copy
from tileworkbench.passes.pipeline import CODEGEN, PIPELINE
from tileworkbench.trace import Trace

SM90 = {"kind": "cuda", "arch": "sm_90"}


def spec_gemm(stages):
    return matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, stages)


def test_trace_lists_every_pass_with_ir():
    trace = tw.lower(spec_gemm(2), target=SM90).trace
    assert trace.pass_names() == ["frontend"] + PIPELINE + CODEGEN
    for snap in trace.passes:
        assert snap.ir_after.startswith("@T.prim_func\ndef main(")
        assert snap.error is None
    changed = {p.name for p in trace.passes if p.changed}
    assert {"inject_software_pipeline", "lower_tma", "lower_tile_ops", "partition_parallel_loops",
            "linearize_accesses", "resolve_int_arithmetic"} <= changed
    # The codegen phase continues from the last lowering pass's IR.
    last = len(PIPELINE)
    assert trace.passes[last + 1].ir_before == trace.passes[last].ir_after
    assert "verify_tile_ops" not in changed


def test_trace_json_round_trip():
    trace = tw.lower(spec_gemm(3), target=SM90).trace
    doc = json.loads(trace.to_json())
    assert doc["schema"] == "tileworkbench.trace" and doc["version"] == 1
    assert Trace.from_dict(doc).to_dict() == doc
    assert doc["sources"]["device"].count("__global__") == 1
    # A and B loads, and the result's TMA store (stage_epilogue)
    assert [d["name"] for d in doc["tma_descriptors"]] == ["A_desc", "B_desc", "C_desc"]


def test_failed_pass_is_recorded_in_the_trace():
    import tileworkbench.language as T

    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((256, 256), "float32")
            T.clear(s)

    from tileworkbench.jit import lower as lower_mod

    trace_holder = {}
    original = lower_mod.run_pipeline

    def spy(func, names, ctx, trace):
        trace_holder["trace"] = trace
        return original(func, names, ctx, trace)

    lower_mod.run_pipeline = spy
    try:
        with pytest.raises(tw.CompileError):
            tw.lower(main, target=SM90)
    finally:
        lower_mod.run_pipeline = original
    last = trace_holder["trace"].passes[-1]
    assert last.name == "plan_shared_memory" and "shared memory" in last.error


GOLDEN_PIPELINE_3 = """\
        for k in T.serial(32, num_stages=3, pipelined=True):
            # steady state: issue iteration k + 2, compute iteration k
            tw::fence_proxy_async()
            T.sync_threads()
            if k + 2 < 32:
                T.tma_copy(A[by * 128:by * 128 + 128, (k + 2) * 32:(k + 2) * 32 + 32], A_shared[(k + 2) % 3, 0:128, 0:32], barrier=mbar_A[(k + 2) % 3])
                T.barrier_arrive(mbar_A[(k + 2) % 3])
                T.tma_copy(B[(k + 2) * 32:(k + 2) * 32 + 32, bx * 128:bx * 128 + 128], B_shared[(k + 2) % 3, 0:32, 0:128], barrier=mbar_B[(k + 2) % 3])
                T.barrier_arrive(mbar_B[(k + 2) % 3])
            T.barrier_wait(mbar_A[k % 3], k // 3 % 2)
            T.barrier_wait(mbar_B[k % 3], k // 3 % 2)
            T.gemm(A_shared[k % 3, 0:128, 0:32], B_shared[k % 3, 0:32, 0:128], C_local)
"""


def test_golden_software_pipeline_3_stages():
    ir_text = tw.lower(spec_gemm(3), target=SM90).trace.ir_after("inject_software_pipeline")
    assert GOLDEN_PIPELINE_3 in ir_text
    assert 'A_shared = T.alloc_shared((3, 128, 32), "float16")  # versions=3' in ir_text
    assert "mbar_A = T.alloc_barrier([128, 128, 128])" in ir_text


def test_generated_cuda_is_include_light():
    src = tw.lower(spec_gemm(2), target=SM90).device_source
    assert not re.search(r"#include", src)  # our headers are inlined; no toolkit headers
    assert "cutlass" not in src.lower() and "cuda/barrier" not in src


@pytest.mark.parametrize("name", sorted(ALL_EXAMPLES))
def test_every_example_compiles_with_nvrtc_for_sm90a(name):
    artifact = tw.lower(ALL_EXAMPLES[name](), target=SM90)
    result = compile_check(artifact.device_source, "sm_90a", f"{name}.cu")
    assert result.cubin and result.registers and result.spills_bytes is not None


def test_host_launcher_spells_out_descriptors():
    host = tw.lower(spec_gemm(2), target=SM90).host_source
    compile(host, "host", "exec")  # valid Python
    assert "swizzle=2,  # CU_TENSOR_MAP_SWIZZLE_64B" in host
    assert "box_dims=(32, 128)," in host and "global_strides_bytes=(2048,)," in host


def test_gemm_blocks_are_rasterized_in_panels():
    from tileworkbench.examples import matmul

    per_tile = {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}  # a persistent kernel orders its tile loop alike
    big = tw.lower(matmul(1920, 1152, 256, 128, 128, 32), target=SM90, pass_configs=per_tile)
    assert big.func.launch.raster_panel == 10
    assert "T.use_swizzle(panel_size=10)" in big.trace.ir_after("rasterize_blocks")
    assert "const int tw_panel_rows = min(15 - tw_panel_first, 10);" in big.device_source
    small = tw.lower(matmul(1024, 1024, 256, 128, 128, 32), target=SM90, pass_configs=per_tile)  # 8 block rows
    assert small.func.launch.raster_panel == 0 and "blockIdx.y;" in small.device_source


def test_use_swizzle_controls_rasterization():
    import tileworkbench.language as T

    def kernel(enable):
        @T.prim_func
        def main(A: T.Tensor((4096, 64), "float32")):
            with T.Kernel(4, 64, threads=128) as (bx, by):
                T.use_swizzle(panel_size=4, enable=enable)
                A[by * 64 + bx, 0] = 1.0

        return main

    assert tw.lower(kernel(True), target=SM90).func.launch.raster_panel == 4
    assert tw.lower(kernel(False), target=SM90).func.launch.raster_panel == 0


def test_epilogue_tile_reuses_the_pipeline_tiles_after_a_block_barrier():
    from tileworkbench.examples import matmul_tma_copy_store

    art = tw.lower(matmul_tma_copy_store(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 3),
                   target=SM90, pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert plan["C_shared"]["offset"] == plan["A_shared"]["offset"] == 0
    assert art.func.attrs["smem_bytes"] == 3 * 2 * 128 * 32 * 2 + 2 * 3 * 8  # no room of its own for C_shared
    body = art.device_source.split("// ---- kernel ----")[1]
    after_loop = body[body.rindex("wgmma_gemm_ss"):]
    # every thread is past its last wgmma (and so past every TMA load) before C_shared is written
    barrier = after_loop.index("tw::fence_proxy_async();\n  __syncthreads();")
    assert barrier < after_loop.index("tw::store_matrix_x4((&tw::swizzled<tw::half, 128>(C_shared, ")
    # C_shared (256-byte rows) is stored as 128-byte panels with the 128B swizzle: one 3-D TMA map
    assert (art.tma_descriptors["C_desc"].rank, art.tma_descriptors["C_desc"].box_dims) == (3, (64, 128, 2))


@pytest.mark.parametrize("trans_B", [False, True])
def test_mma_sync_operand_tiles_are_never_paneled(trans_B):
    # B of 32 x 128 fp16 has 256-byte rows; tw::gemm_ss reads it with a plain row stride
    from tileworkbench.examples import matmul

    art = tw.lower(matmul(1024, 1024, 1024, 128, 128, 32, num_stages=2, trans_B=trans_B), target=SM90,
                   pass_configs={tw.PassConfigKey.TW_DISABLE_WGMMA: True})
    tiles = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert "tw::gemm_ss<" in art.device_source
    assert all(b.attrs.get("panel", 0) == 0 for b in (a.buffer for a in _allocations(art.func)) if b.name in tiles)


def _allocations(func):
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.visitor import collect

    return collect(func.body, ir.Allocate)


def _gemm_allocating(inside: bool, stages=3, threads=256, block_K=64):
    """A GEMM whose tiles are allocated inside its T.Pipelined body (as TileLang's mHC kernels do)
    or before it."""
    import tileworkbench.language as T

    M = N = K = 256

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 128, M // 128, threads=threads) as (bx, by):
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            if not inside:  # right before the loop, where the body's own are declared
                a = T.alloc_shared((128, block_K), "float16")
                b = T.alloc_shared((block_K, 128), "float16")
            for k in T.Pipelined(K // block_K, num_stages=stages):
                if inside:
                    a = T.alloc_shared((128, block_K), "float16")
                    b = T.alloc_shared((block_K, 128), "float16")
                T.copy(A[by * 128, k * block_K], a)
                T.copy(B[k * block_K, bx * 128], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * 128, bx * 128])

    return main


@pytest.mark.parametrize("stages, threads, block_K", [(3, 256, 64), (2, 128, 32)], ids=["warp-specialised", "cp.async"])
def test_tiles_a_pipelined_body_allocates_are_the_same_kernel_as_tiles_allocated_before(stages, threads, block_K):
    # the prologue fills them before the loop: allocated in the body, they were declared too late for it
    inside, before = (tw.lower(_gemm_allocating(x, stages, threads, block_K), target="sm_90a") for x in (True, False))
    assert inside.kernel_source.split('extern "C"')[1] == before.kernel_source.split('extern "C"')[1]
    assert inside.func.attrs["warp_specialized"]["applied"] == (stages == 3)
    compile_check(inside.kernel_source, "sm_90a")
