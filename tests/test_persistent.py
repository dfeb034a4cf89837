"""Persistent warp-specialised GEMMs: one block per multiprocessor walks the tiles (passes/rules/persistent.py)."""

import dataclasses

import pytest

import tileworkbench as tw
from tileworkbench.analysis import check, simulate
from tileworkbench.analysis.evaluate import evaluate
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.backend.occupancy import balanced_blocks
from tileworkbench.examples import lower_triangular_matmul, matmul
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import IRMutator, collect

SM90 = {"kind": "cuda", "arch": "sm_90"}


def gemm(size=(1024, 1024, 1024), block=(128, 256, 64), stages=3, threads=256):
    return matmul(*size, *block, "float16", "float16", stages, threads)


def persistent_info(art):
    return art.func.attrs["warp_specialized"]["persistent"]


def test_golden_tile_loops_carry_the_stage_counter_across_tiles():
    art = tw.lower(gemm(), target=SM90)
    assert persistent_info(art) == {"applied": True, "tiles": 32}
    after = art.trace.ir_after("warp_specialize")
    assert "# + 128 producer threads; persistent: balanced_blocks(32, resident blocks) blocks walk the tiles" in after
    consumer = after[after.index("        with T.ws_consumer"):]
    assert consumer == """\
        with T.ws_consumer(threads=range(0, 256)):
            tw::setmaxnreg_inc<240>()
            for tile_iter in T.serial((32 - (int)blockIdx.x + (int)gridDim.x - 1) // (int)gridDim.x, persistent_tiles=32):
                tile: int32 = (int)blockIdx.x + tile_iter * (int)gridDim.x
                bx: int32 = tile % 4
                by: int32 = tile // 4
                T.fill(C_local, 0.0)
                # consumer: wait for stage k, gemm, release the slot
                for k in T.serial(16, num_stages=3, pipelined=True, ws_role='consumer'):
                    T.barrier_wait(stage_full[(tile_iter * 16 + k) % 3], (tile_iter * 16 + k) // 3 % 2)
                    T.gemm(A_shared[(tile_iter * 16 + k) % 3, 0:128, 0:64], B_shared[(tile_iter * 16 + k) % 3, 0:64, 0:256], C_local, in_flight=1)
                    if k > 0:
                        T.barrier_arrive(stage_empty[(tile_iter * 16 + k + 2) % 3])
                tw::wgmma_wait<0>()
                T.barrier_arrive(stage_empty[tile_iter * 16 % 3])
                T.tma_store_wait(read=True)
                T.sync_threads()
                T.copy(C_local, C_local_out)
                T.tma_copy(C_local_out, C[by * 128:by * 128 + 128, bx * 256:bx * 256 + 256])
            T.tma_store_wait(read=True)
"""
    producer = after[after.index("        with T.ws_producer"):after.index("        with T.ws_consumer")]
    assert "for tile_iter in T.serial((32 - (int)blockIdx.x + (int)gridDim.x - 1) // (int)gridDim.x, persistent_tiles=32):" in producer
    assert "T.barrier_wait(stage_empty[(tile_iter * 16 + k) % 3], ((tile_iter * 16 + k) // 3 + 1) % 2)" in producer


def test_epilogue_tile_gets_its_own_bytes_and_the_launch_one_block_per_multiprocessor():
    art = tw.lower(gemm(), target=SM90)
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert "shares_with" not in plan["C_local_out"]  # the producer refills the pipeline's bytes meanwhile
    assert plan["C_local_out"]["offset"] >= 3 * (128 * 64 + 64 * 256) * 2
    assert "grid = (rt.persistent_blocks(KERNEL, 32, BLOCK, SMEM_BYTES), 1, 1)" in art.host_source
    body = art.device_source.split("// ---- kernel ----")[1]
    assert "blockIdx.y" not in body  # block indices come from the tile number only
    assert "for (int tile_iter = 0; tile_iter < " in body
    # thread 0 issues the store (an elect inside the tile loop costs the GEMM ~6%)
    assert "if ((tx == 0)) {\n        tw::tma_store(C_desc, " in body
    # the stage counter is non-negative: plain % and / (no floor helpers) in the ring's indices
    assert "int k_slot0_1 = ((tile_iter_1 * 16) % 3);" in body  # the ring's slot runs on from tile to tile
    assert "stage_full[k_slot0_1].wait(k_phase0_1);" in body
    result = compile_check(art.device_source, "sm_90a", "persistent.cu")
    assert result.spills_bytes == 0


def test_panel_order_is_the_same_bijection_as_one_block_per_tile():
    art = tw.lower(gemm(size=(4096, 4096, 1024)), target=SM90)
    launch = art.func.launch
    assert launch.raster_panel == 10 and launch.persistent_tiles == 16 * 32
    tile_loop = next(f for f in collect(art.func.body, ir.For) if f.annotations.get(ir.TILE_LOOP))
    lets = [s for s in tile_loop.body.stmts if isinstance(s, ir.LetStmt)]
    bx, by = launch.block_vars
    seen = []
    for tile in range(launch.persistent_tiles):
        env = {"(int)blockIdx.x": tile, "(int)gridDim.x": launch.persistent_tiles, tile_loop.var: 0}
        for let in lets:
            env[let.var] = evaluate(let.value, env)
        seen.append((env[bx], env[by]))
    assert sorted(seen) == [(x, y) for x in range(16) for y in range(32)]  # every tile once
    assert seen[:3] == [(0, 0), (0, 1), (0, 2)] and seen[10] == (1, 0)  # down a panel of 10 rows, then right


@pytest.mark.parametrize("tiles, resident, blocks", [
    (512, 132, 128),   # 4096^3 in 128x256 tiles: 4 rounds either way, 4 tiles on each of 128 blocks
    (2048, 132, 128),  # 8192^3: 16 rounds
    (1792, 132, 128),  # 4096x14336: 14 rounds
    (133, 132, 67),    # one tile over a full round: 2 rounds, so 67 blocks suffice
    (100, 132, 100),   # fewer tiles than multiprocessors: one block per tile
    (1, 132, 1), (264, 132, 132), (265, 264, 133)])
def test_persistent_grid_is_the_fewest_blocks_for_the_fewest_rounds(tiles, resident, blocks):
    assert balanced_blocks(tiles, resident) == blocks
    rounds = -(-tiles // resident)
    assert -(-tiles // blocks) == rounds and blocks <= resident
    assert blocks == 1 or -(-tiles // (blocks - 1)) > rounds


@pytest.mark.parametrize("resident", [132, 100, 7])
def test_tile_loop_on_the_balanced_grid_visits_every_tile_once(resident):
    art = tw.lower(gemm(size=(4096, 4096, 1024)), target=SM90)
    tile_loop = next(f for f in collect(art.func.body, ir.For) if f.annotations.get(ir.TILE_LOOP))
    ntiles = art.func.launch.persistent_tiles
    grid = balanced_blocks(ntiles, resident)
    visited = []
    for block in range(grid):
        env = {"(int)blockIdx.x": block, "(int)gridDim.x": grid}
        trips = evaluate(tile_loop.extent, env)
        assert trips <= -(-ntiles // grid)
        visited += [block + i * grid for i in range(trips)]
    assert sorted(visited) == list(range(ntiles))


def test_simulation_follows_the_ring_from_one_tile_into_the_next():
    art = tw.lower(gemm(stages=2), target=SM90)
    sim = simulate(art)
    assert sim.findings == [] and check(art) == []
    assert [lp["kind"] for lp in sim.loops[:2]] == ["tiles", "tiles"]
    waits = [(e["barrier"], e["iteration"], e["completes"]) for e in sim.events if e["kind"] == "wait"]
    assert len(waits) == 2 * 2 * 16 and all(done for *_, done in waits)  # two tiles, both roles, 16 stages


class _DropTileStoreWait(IRMutator):
    """Removes the wait for the previous tile's TMA store before the epilogue tile is rewritten."""

    def visit_For(self, node):
        if not node.annotations.get(ir.TILE_LOOP):
            return super().visit_For(node)
        body = [s for s in node.body.stmts
                if not (isinstance(s, ir.Evaluate) and s.call.name.startswith("tw::tma_store_wait"))]
        return dataclasses.replace(node, body=ir.seq(body))


def test_checker_reports_an_epilogue_tile_rewritten_under_the_previous_tiles_store():
    art = tw.lower(gemm(), target=SM90)
    broken = art.func.with_body(_DropTileStoreWait().visit(art.func.body))
    found = [f for f in check(broken) if f["code"] == "store_source_reused"]
    assert found and "C_local_out" in found[0]["message"]


def test_register_epilogue_is_persistent_too():
    art = tw.lower(gemm(), target=SM90, pass_configs={tw.PassConfigKey.TW_REGISTER_EPILOGUE: True})
    assert persistent_info(art)["applied"] and art.func.attrs["warp_specialized"]["epilogue"] == "stores from registers"
    assert "C_local_out" not in art.device_source and check(art) == []


@pytest.mark.parametrize("kw,configs,reason", [
    ({}, {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}, "tw.disable_persistent is set"),
    ({"stages": 4}, {}, "more than 232448"),
])
def test_one_block_per_tile_when_persistence_is_off_or_does_not_fit(kw, configs, reason):
    art = tw.lower(gemm(**kw), target=SM90, pass_configs=configs)
    info = persistent_info(art)
    assert info["applied"] is False and reason in info["reason"]
    assert art.func.launch.persistent_tiles == 0 and "rt.persistent_blocks" not in art.host_source
    assert not any(f.annotations.get(ir.TILE_LOOP) for f in collect(art.func.body, ir.For))


def test_a_trip_count_that_depends_on_the_block_keeps_one_block_per_tile():
    # The ring's stage counter runs on across tiles as tile_iter * extent + k: with an extent that
    # changes from tile to tile it would land on the wrong slots and parities (the barrier check
    # caught that as a deadlock before persistence learnt to stay off here).
    art = tw.lower(lower_triangular_matmul(1024, 1024), target=SM90)
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and not ws["persistent"]["applied"]
    assert "trip count (((by + 1) * 128 + 64 - 1) // 64) or start depends on the block index" in ws["persistent"]["reason"]
    assert "rt.persistent_blocks" not in art.host_source
    assert not [f for f in art.trace.to_dict()["findings"] if f.get("severity") == "error"]
    assert compile_check(art.device_source, "sm_90a").registers
