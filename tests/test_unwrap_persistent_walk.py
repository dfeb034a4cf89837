"""unwrap_persistent_walk: a user's ``T.Persistent`` GEMM walk becomes a grid, which warp
specialisation makes persistent in its own way; a walk whose tiles could see each other's data
keeps its waves."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples import matmul
from tileworkbench.examples.edge_cases import persistent_walk_gemm
from tileworkbench.examples.tilelang_programs.gemm import matmul_persistent
from tileworkbench.ir import nodes as ir
from tileworkbench.passes.unwrap_persistent_walk import stale_read


def kernel_code(source: str) -> str:
    return source.split("// ---- kernel ----")[1]


def test_tilelangs_persistent_gemm_lowers_to_our_own_persistent_gemm():
    kernel = matmul_persistent.compile(M=4096, N=4096, K=4096, block_M=128, block_N=256, block_K=64, threads=256,
                                       num_stages=3, sm_num=132)
    after = kernel.trace.ir_after("unwrap_persistent_walk")
    assert "with T.Kernel(16, 32, threads=256) as (by, bx):" in after  # N's blocks along x, as TileLang launches GEMMs
    assert "T.Persistent" not in after and "for w in" not in after
    ours = tw.lower(matmul(4096, 4096, 4096, 128, 256, 64, num_stages=3, threads=256), target="sm_90a")
    # the same kernel as our plain GEMM's (persistent, warp-specialised, the result staged through
    # shared memory by one TMA store), up to its name and which of bx, by is the row
    theirs = kernel_code(kernel.get_kernel_source()).replace("matmul_persistent_kernel", "main_kernel")
    swapped = kernel_code(ours.device_source).replace("bx", "@").replace("by", "bx").replace("@", "by")
    assert theirs == swapped
    assert "C_shared" not in theirs  # the user's staging tile gave way to the compiler's


def test_a_walk_becomes_the_domain_grid_and_keeps_the_persistence_of_warp_specialisation():
    art = tw.lower(persistent_walk_gemm(), target="sm_90a")
    assert art.func.attrs["persistent_walk"] == {"applied": True, "grid": [4, 2]}
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and ws["persistent"] == {"applied": True, "tiles": 8}
    assert ws["epilogue"] == "shared memory + TMA store"


@pytest.mark.parametrize("knobs, reason", [
    (dict(sm_num=3, clear=False), "C_local may be read before the tile writes it"),
    (dict(sm_num=6, wave_size=3), "as many blocks as a wave"),
])
def test_a_walk_whose_tiles_could_differ_as_a_grid_keeps_its_waves(knobs, reason):
    art = tw.lower(persistent_walk_gemm(**knobs), target="sm_90a")
    info = art.func.attrs["persistent_walk"]
    assert not info["applied"] and reason in info["reason"]
    assert "for (int w = 0; w < 3; ++w) {" in kernel_code(art.device_source)  # 8 tiles, 3 waves of 3


def test_a_walk_without_a_pipelined_loop_keeps_its_waves():
    @T.prim_func
    def scale(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(3, threads=128) as b:
            for t in T.Persistent([8], 3, b):
                for i in T.Parallel(128):
                    B[t * 128 + i] = A[t * 128 + i] * 2.0

    art = tw.lower(scale, target="sm_90a")
    assert art.func.attrs["persistent_walk"]["reason"] == "the body has no T.Pipelined loop at its top level"


def test_a_staging_tile_of_another_type_stays_the_users():
    # only a tile of the tensor's type folds into one copy (through float16 to a float32 tensor the
    # values would round where one copy does not): this one stays, and with it the user's epilogue
    art = tw.lower(persistent_walk_gemm(stage_type="float32"), target="sm_90a")
    assert art.func.attrs["persistent_walk"]["applied"]
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and not ws["persistent"]["applied"]
    assert "C_shared" in kernel_code(art.device_source)


def _buffers(*names, scope="fragment"):
    return {n: ir.Buffer(n, (ir.const(16), ir.const(16)), ir.dtypes.float32, scope) for n in names}


def test_stale_read_counts_only_whole_unconditional_writes():
    b = _buffers("acc", "tile")
    acc, tile = b["acc"], b["tile"]
    full = ir.Region.full
    fill = ir.Fill(full(acc), ir.const(0.0))
    use = ir.Copy(full(acc), full(tile))
    k = ir.Var("k")
    carried = {id(acc), id(tile)}
    assert stale_read([fill, use], carried) is None
    assert stale_read([use], carried) is acc  # read before any write
    assert stale_read([ir.IfThenElse(ir.cmp("<", k, 1), fill), use], carried) is acc  # a branch may not run
    assert stale_read([ir.For(k, ir.const(4), fill), use], carried) is acc  # nor a loop
    # a loop body reading what its later statements write: the first iteration sees the last tile's
    assert stale_read([ir.For(k, ir.const(4), ir.seq([use, fill]))], carried) is acc
    part = ir.Fill(ir.Region(acc, (ir.const(0), ir.const(0)), (ir.const(8), ir.const(16))), ir.const(0.0))
    assert stale_read([part, use], carried) is acc  # half a tile written leaves the other half stale
    assert stale_read([use], {id(tile)}) is None  # what is not carried across tiles may be read


def test_a_walk_run_on_the_cpu_matches_numpy_as_a_grid_and_as_waves():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128)).astype(np.float16)
    b = rng.standard_normal((128, 512)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for knobs, applied in ((dict(sm_num=3), True), (dict(sm_num=6, wave_size=3), False)):
        func = persistent_walk_gemm(**knobs)
        assert tw.lower(func, target="sm_90a").func.attrs["persistent_walk"]["applied"] is applied
        c, d = np.zeros((256, 512), np.float16), np.zeros((256, 512), np.float16)
        tw.compile(func, target="cpu")(a, b, c, d)
        np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_a_walk_reading_the_block_index_itself_keeps_its_waves():
    info = tw.lower(persistent_walk_gemm(extra="block_ids"), target="sm_90a").func.attrs["persistent_walk"]
    assert not info["applied"] and "block index" in info["reason"]


def test_a_staging_tile_read_elsewhere_stays_the_users():
    art = tw.lower(persistent_walk_gemm(extra="second_reader"), target="sm_90a")
    assert art.func.attrs["persistent_walk"]["applied"]
    assert "C_shared" in kernel_code(art.device_source)  # a second reader: no single copy stands for these
    assert not art.func.attrs["warp_specialized"]["persistent"]["applied"]


def test_a_float32_result_staged_by_the_user_keeps_the_users_tile():
    # our staging takes 16-bit (and FP8) results only: a float32 one keeps the user's shared round trip
    M, N, K = 256, 256, 128

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 128, M // 128, threads=256) as (bx, by):
            A_shared = T.alloc_shared((128, 64), "float16")
            B_shared = T.alloc_shared((64, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            C_shared = T.alloc_shared((128, 128), "float32")
            T.clear(C_local)
            for k in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[by * 128, k * 64], A_shared)
                T.copy(B[k * 64, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * 128, bx * 128])

    art = tw.lower(main, target="sm_90a")
    assert art.func.attrs["warp_specialized"]["applied"]
    assert "C_shared" in kernel_code(art.device_source)
