"""``T.view`` of a shared tile in another shape and dtype (DeepSeek's sparse MLA backward stages its
float32 results in its bf16 key tile): checked as a tile of its own (``ir.records.SharedView``), the
same program wherever no value passes between the two names, which ``verify_shared_views`` checks,
and laid over the tile's bytes as in TileLang where the sync pass orders the two names
(``share_view_storage``)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect


def _staged_in_the_key_tile(rounds: int = 3):
    """Each round: a bf16 tile loaded and read (into a fragment), then its bytes reused for float32
    rows that are written and read back, as the sparse MLA backward does per key block."""

    @T.prim_func
    def main(A: T.Tensor((rounds * 64, 64), "bfloat16"), Out: T.Tensor((rounds * 32, 64), "float32"),
             Total: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "bfloat16")
            rows = T.view(s, shape=[32, 64], dtype="float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for r in T.serial(rounds):
                T.copy(A[r * 64:(r + 1) * 64, :], s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += s[i, j]
                for i, j in T.Parallel(64, 64):
                    if i < 32:
                        rows[i, j] = acc[i, j] * 2.0
                for i, j in T.Parallel(32, 64):
                    Out[r * 32 + i, j] = rows[i, j]
            T.copy(acc, Total)

    return main


def _inputs(rounds=3):
    a = np.random.default_rng(5).standard_normal((rounds * 64, 64)).astype(np.float32)
    import ml_dtypes
    return a.astype(ml_dtypes.bfloat16)


def _expected(a):
    a = a.astype(np.float64).reshape(-1, 64, 64)
    sums = np.cumsum(a, axis=0)
    return (2.0 * sums[:, :32, :]).reshape(-1, 64), sums[-1]


@pytest.mark.parametrize("run", [lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level],
                         ids=["tile level", "thread level"])
def test_a_view_that_reuses_a_tiles_bytes_computes_what_numpy_does(run):
    a = _inputs()
    out, total = np.zeros((96, 64), np.float32), np.zeros((64, 64), np.float32)
    run(_staged_in_the_key_tile(), a, out, total)
    want_out, want_total = _expected(a)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(total, want_total, rtol=1e-5, atol=1e-4)


def test_the_view_lies_over_the_tiles_bytes_in_the_generated_cuda(nvrtc_check):
    art = tw.lower(_staged_in_the_key_tile(), target="sm_90a")
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert {"s", "rows"} <= set(plan)
    assert plan["rows"]["size_bytes"] == 32 * 64 * 4 and plan["rows"]["dtype"] == "float32"
    assert plan["rows"]["offset"] == plan["s"]["offset"] and plan["rows"]["shares_with"] == ["s"]
    assert art.func.attrs["smem_bytes"] == plan["s"]["offset"] + plan["s"]["size_bytes"]  # no bytes of its own
    nvrtc_check(art.device_source, "sm_90a")


def test_the_sync_pass_orders_the_two_names_or_the_thread_level_interpreter_sees_a_race(monkeypatch):
    """The view's writes follow the tile's reads with no other reason for a barrier between them:
    counted as accesses of one tile they get one; counted as two tiles' (the pass not told), the
    thread-level interpreter, which lays the view over the tile's bytes as the plan says, reports
    the race."""
    from tileworkbench.errors import KernelRuntimeError
    from tileworkbench.passes import insert_thread_syncs as syncs

    a = _inputs()
    out, total = np.zeros((96, 64), np.float32), np.zeros((64, 64), np.float32)
    run_at_thread_level(_staged_in_the_key_tile(), a, out, total)  # ordered: no race
    touch = syncs._Accesses._touch

    def as_two_tiles(self, kind, buf, first_index):
        {"r": self.reads, "w": self.writes, "a": self.adds, "t": self.tma_writes}[kind].add(buf.name)
        self.parts.setdefault((kind, buf.name), []).append(syncs.WHOLE)

    monkeypatch.setattr(syncs._Accesses, "_touch", as_two_tiles)
    with pytest.raises(KernelRuntimeError, match="race"):
        run_at_thread_level(_staged_in_the_key_tile(), a, out, total)
    monkeypatch.setattr(syncs._Accesses, "_touch", touch)


def test_a_view_of_a_tile_tma_fills_keeps_bytes_of_its_own():
    """TMA writes through the async proxy, ordered by mbarriers, not by the block barriers the sync
    pass places between two names: such a view is not laid over the tile."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((32, 64), "float32"), Sums: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            v = T.view(s, shape=[32, 64], dtype="float32")
            bar = T.alloc_barrier(128)
            T.tma_copy(A, s, barrier=bar)
            T.barrier_arrive(bar)
            T.mbarrier_wait_parity(bar, 0)
            T.copy(s, Sums)
            T.fill(v, 1.0)
            T.copy(v, Out)

    art = tw.lower(main, target="sm_90a")
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    assert plan["v"]["offset"] >= plan["s"]["offset"] + plan["s"]["size_bytes"] and "shares_with" not in plan["v"]


def _reads_across(read_view_after_tile_write: bool):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            v = T.view(s, shape=[32, 64], dtype="float32")
            T.fill(v, 1.0)
            T.copy(A, s)
            if read_view_after_tile_write:
                T.copy(v, Out)
            else:
                for i, j in T.Parallel(32, 64):
                    Out[i, j] = s[i, j]

    return main


def test_reading_the_view_after_writing_the_tile_is_refused():
    with pytest.raises(CompileError) as err:
        tw.lower(_reads_across(True), target="sm_90a")
    msg = str(err.value)
    assert "v is read here" in msg and "written last through s" in msg and "T.view" in msg


def test_reading_the_tile_after_its_own_write_is_allowed():
    tw.lower(_reads_across(False), target="sm_90a")  # s was written last through s


def test_a_write_in_one_branch_or_a_previous_iteration_counts():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((64, 64), "float16"), flag: T.int32):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            v = T.view(s, shape=[32, 64], dtype="float32")
            for r in T.serial(2):
                T.copy(A, s)
                T.copy(s, Out)
                if flag > 0:
                    T.fill(v, 0.0)
                T.copy(s, Out)  # after the branch: v may have written last

    with pytest.raises(CompileError, match="s is read here"):
        tw.lower(main, target="sm_90a")

    @T.prim_func
    def looped(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            v = T.view(s, shape=[32, 64], dtype="float32")
            T.copy(A, s)
            for r in T.serial(2):
                T.copy(s, Out)  # the second iteration reads what v wrote in the first
                T.fill(v, 0.0)

    with pytest.raises(CompileError, match="s is read here"):
        tw.lower(looped, target="sm_90a")


def test_a_view_larger_than_its_tile_is_refused():
    with pytest.raises(CompileError, match="more than the tile's 8192"):
        @T.prim_func
        def main(Out: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((64, 64), "float16")
                v = T.view(s, shape=[64, 64], dtype="float32")
                T.fill(v, 0.0)
                T.copy(v, Out)


def test_a_view_of_a_pipelined_tile_keeps_bytes_of_its_own():
    """A software pipeline writes a tile's next stages ahead of the reads of its current one: the
    view's writes would not wait for them, so it is not laid over the tile."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), Out: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            v = T.view(s, shape=[32, 64], dtype="float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[k * 64:(k + 1) * 64, :], s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += s[i, j]
            for i, j in T.Parallel(64, 64):
                if i < 32:
                    v[i, j] = acc[i, j]
            T.copy(v, Out)

    art = tw.lower(main, target="sm_90a")
    (view,) = [a.buffer for a in collect(art.func.body, ir.Allocate) if a.buffer.name == "v"]
    assert not view.attrs[ir.SHARED_VIEW].shares_bytes
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    # first used after the pipeline, it is placed over the pipeline's tiles as any such tile is
    # (plan_shared_memory's reuse, with its barrier), not as a view over its tile
    assert plan["s"]["versions"] == 2 and plan["v"]["shares_with"] == ["s"]
