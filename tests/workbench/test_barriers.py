"""The mbarrier protocol simulation against the generated CUDA, and its findings."""

import os
import sys

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.analysis import run_analyses, simulate

sys.path.insert(0, os.path.dirname(__file__))
import csource
from conftest import SM90

KIND_OF = {"arrive": "arrive", "wait": "wait", "expect_transaction": "expect_tx"}
N_ITER = 32  # K / block_K of the 1024^3 GEMM


def _sim_ops(sim):
    """The simulation's arrive/wait/expect_tx events inside the pipeline, comparable with the
    C interpreter's records."""
    out = []
    for e in sim.events:
        if e["kind"] in ("arrive", "wait", "expect_tx") and e["stage"] in ("prologue", "steady", "epilogue"):
            value = {"wait": e.get("parity"), "expect_tx": e.get("bytes"), "arrive": None}[e["kind"]]
            out.append((e["stage"], e["iteration"], e["barrier"], e["slot"], e["kind"], value))
    return out


def _c_ops(source, stages):
    records = []
    csource.run(csource.pipeline_lines(source), {}, records)
    out = []
    for env, name, slot, op, value in records:
        if "k" in env:
            stage = "epilogue" if env["k"] >= N_ITER - (stages - 1) else "steady"
            it = env["k"]
        else:
            stage, it = "prologue", env.get("k_prologue", 0)
        out.append((stage, it, name, slot, KIND_OF[op], value if op != "arrive" else None))
    return out


@pytest.mark.parametrize("builder", ["matmul_tma_copy", "matmul_tma_copy_store"])
@pytest.mark.parametrize("stages", [2, 3])
def test_simulation_matches_the_generated_source(gemm_artifact, builder, stages):
    art = gemm_artifact(builder, stages)
    expected = _c_ops(art.device_source, stages)
    sim = simulate(art)
    got = _sim_ops(sim)
    # the oracle saw the wait lines, e.g. mbar_A[(k % 3)].wait(((k / 3) % 2));
    assert sum(1 for x in expected if x[4] == "wait") == 2 * N_ITER
    assert got == expected


@pytest.mark.parametrize("builder", ["matmul_tma_copy", "matmul_tma_copy_store"])
@pytest.mark.parametrize("stages", [2, 3])
def test_slots_rotate_and_parities_flip(gemm_artifact, builder, stages):
    sim = simulate(gemm_artifact(builder, stages))
    assert not sim.findings, sim.findings
    assert [(b["name"], b["slots"], b["init_count"]) for b in sim.barriers] == \
        [("mbar_A", stages, 128), ("mbar_B", stages, 128)]
    assert sim.iterations == N_ITER
    for bar in ("mbar_A", "mbar_B"):
        waits = [e for e in sim.waits() if e["barrier"] == bar]
        assert [e["iteration"] for e in waits] == list(range(N_ITER))
        assert [e["slot"] for e in waits] == [k % stages for k in range(N_ITER)]
        assert [e["parity"] for e in waits] == [(k // stages) % 2 for k in range(N_ITER)]
        assert all(e["completes"] for e in waits)
        assert [e["phase"] for e in waits] == [k // stages for k in range(N_ITER)]
        assert [e["stage"] for e in waits] == ["steady"] * (N_ITER - stages + 1) + ["epilogue"] * (stages - 1)
        inits = [e for e in sim.events if e["barrier"] == bar and e["kind"] == "init"]
        assert [(e["slot"], e["count"], e["stage"], e["scope"]) for e in inits] == \
            [(s, 128, "setup", "one thread") for s in range(stages)]
        loads = [e for e in sim.events if e["barrier"] == bar and e["kind"] == "tma_load"]
        assert len(loads) == N_ITER and all(e["bytes"] == 8192 and e["scope"] == "elected of 128" for e in loads)
        prologue = [e for e in loads if e["stage"] == "prologue"]
        assert [e["iteration"] for e in prologue] == list(range(stages - 1))
        arrives = [e for e in sim.events if e["barrier"] == bar and e["kind"] == "arrive"]
        assert all(e["count"] == 128 and e["scope"] == "all 128 threads" for e in arrives)
        completes = [e for e in sim.events if e["barrier"] == bar and e["kind"] == "phase_complete"]
        assert len(completes) == N_ITER
        for slot in range(stages):
            assert [e["phase"] for e in completes if e["slot"] == slot] == \
                list(range(len([k for k in range(N_ITER) if k % stages == slot])))


def test_events_follow_the_schema(gemm_artifact):
    art = gemm_artifact("matmul_tma_copy", 2)
    doc = art.trace.to_dict()["barriers"]
    assert set(doc) >= {"barriers", "iterations", "events"}
    kinds = {"init", "expect_tx", "tma_load", "arrive", "phase_complete", "wait"}
    stages = {"setup", "prologue", "steady", "epilogue", "body"}
    for i, e in enumerate(doc["events"]):
        assert e["seq"] == i and e["kind"] in kinds and e["stage"] in stages
        assert {"barrier", "slot", "iteration", "scope", "line"} <= set(e)
    # kernel lines: waits point at the T.barrier_wait lines of examples/gemm.py
    src = art.func.attrs["source_lines"]
    first = art.func.source_line - next(i for i, t in enumerate(src) if t.lstrip().startswith("def "))
    for e in doc["events"]:
        if e["kind"] == "wait":
            assert f"T.barrier_wait({e['barrier']}" in src[e["line"] - first]
        if e["kind"] in ("expect_tx", "tma_load"):
            assert f"barrier={e['barrier']}" in src[e["line"] - first]


# ---- kernels with protocol bugs and other shapes ---------------------------------------------


def missing_arrive():
    @T.prim_func
    def main(A: T.Tensor((128, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            A_shared = T.alloc_shared((128, 32), "float16")
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_wait(mbar, 0)

    return main


def fixed_parity_in_a_loop():
    @T.prim_func
    def main(A: T.Tensor((512, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            A_shared = T.alloc_shared((128, 32), "float16")
            mbar = T.alloc_barrier(128)
            for k in T.serial(4):
                T.tma_copy(A[k * 128, 0], A_shared, barrier=mbar)
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, 0)

    return main


def flipping_parity_in_a_loop():
    @T.prim_func
    def main(A: T.Tensor((512, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            A_shared = T.alloc_shared((128, 32), "float16")
            mbar = T.alloc_barrier(128)
            for k in T.serial(4):
                T.tma_copy(A[k * 128, 0], A_shared, barrier=mbar)
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, k % 2)

    return main


def count_one_arrived_by_all():
    @T.prim_func
    def main(A: T.Tensor((128, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            A_shared = T.alloc_shared((128, 32), "float16")
            mbar = T.alloc_barrier(1)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_arrive(mbar)
            T.barrier_wait(mbar, 0)

    return main


def per_warp_barriers():
    @T.prim_func
    def main(A: T.Tensor((32, 1024), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(4, threads=256) as pid:
            tid = T.get_thread_binding()
            warp_idx = tid // 32
            row = pid * 8 + warp_idx
            a_shared = T.alloc_shared((8, 1024), dtype=T.float32)
            mbars = T.alloc_barrier([32] * 8)
            T.tma_copy(A[row, 0:1024], a_shared[warp_idx, 0:1024], barrier=mbars[warp_idx], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=mbars[warp_idx])
            T.mbarrier_wait_parity(mbarrier=mbars[warp_idx], parity=0)
            if tid % 32 == 0:
                B[row] = a_shared[warp_idx, 0]

    return main


def synchronous_tma_copies():
    @T.prim_func
    def main(A: T.Tensor((512, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            A_shared = T.alloc_shared((128, 32), "float16")
            for k in T.serial(4):
                T.copy(A[k * 128, 0], A_shared, prefer_instruction="tma")

    return main


def _lower(builder):
    # Several of these kernels are wrong on purpose; these tests look at the simulation alone, so
    # the protocol checker (tests/checker), which would reject them, is switched off.
    return tw.lower(builder(), target=SM90, pass_configs={"tw.barrier_check": "off"})


def test_wait_without_arrivals_never_completes():
    art = _lower(missing_arrive)
    sim = simulate(art)
    (wait,) = sim.waits()
    assert wait["completes"] is False and "finding" in wait
    finding = sim.findings[wait["finding"]]
    assert finding["severity"] == "error" and finding["code"] == "wait_never_completes"
    assert (finding["barrier"], finding["slot"]) == ("mbar", 0)
    assert "0 of 128 arrivals" in finding["message"]
    assert "T.barrier_wait(mbar, 0)" in art.func.attrs["source_lines"][wait["line"] - art.func.source_line + 1]
    assert sim.deadlocked


def test_fixed_parity_deadlocks_in_the_second_iteration():
    sim = simulate(_lower(fixed_parity_in_a_loop))
    waits = sim.waits()
    assert [w["completes"] for w in waits] == [True, False, True, False]
    assert [w["parity"] for w in waits] == [0, 0, 0, 0]
    (finding,) = [f for f in sim.findings if f["code"] == "wait_never_completes"]
    assert finding["iteration"] == 1
    assert all(w["finding"] == sim.findings.index(finding) for w in waits if not w["completes"])


def test_flipping_parity_is_clean():
    sim = simulate(_lower(flipping_parity_in_a_loop))
    assert not sim.findings
    assert [w["parity"] for w in sim.waits()] == [0, 1, 0, 1]
    assert [w["phase"] for w in sim.waits()] == [0, 1, 2, 3]


def test_per_warp_barriers_elect_one_thread_per_warp():
    art = _lower(per_warp_barriers)
    sim = simulate(art)
    assert not sim.findings
    waits = {e["line"] for e in sim.events if e["kind"] == "wait"}
    assert waits == {_kernel_line(art, "T.mbarrier_wait_parity(")}
    loads = [e for e in sim.events if e["kind"] == "tma_load"]
    assert [e["slot"] for e in loads] == list(range(8))
    assert all(e["scope"] == "elected of 32" and e["count"] == 1 and e["bytes"] == 4096 for e in loads)
    arrives = [e for e in sim.events if e["kind"] == "arrive"]
    assert [(e["slot"], e["count"]) for e in arrives] == [(s, 32) for s in range(8)]
    assert [(w["slot"], w["completes"]) for w in sim.waits()] == [(s, True) for s in range(8)]


def _kernel_line(art, text: str) -> int:
    src = art.func.attrs["source_lines"]
    first = art.func.source_line - next(i for i, t in enumerate(src) if t.lstrip().startswith("def "))
    (hit,) = [i for i, t in enumerate(src) if text in t]
    return first + hit


def test_synchronous_tma_copy_waits_on_each_iterations_parity():
    art = _lower(synchronous_tma_copies)
    sim = simulate(art)
    assert {e["line"] for e in sim.events} == {_kernel_line(art, 'prefer_instruction="tma"')}
    assert not sim.findings
    (bar,) = sim.barriers
    assert bar["name"] == "A_to_A_shared_mbarrier" and bar["init_count"] == 1
    assert [w["parity"] for w in sim.waits()] == [0, 1, 0, 1]
    assert [w["iteration"] for w in sim.waits()] == [0, 1, 2, 3]
    arrives = [e for e in sim.events if e["kind"] == "arrive"]
    assert all(e["count"] == 1 and e["scope"] == "elected of 128" for e in arrives)


def test_the_analysis_stage_links_events_to_trace_findings_and_is_idempotent():
    art = _lower(fixed_parity_in_a_loop)
    art.trace.findings.append({"severity": "warning", "message": "from a pass", "barrier": None, "slot": None,
                               "iteration": None, "line": None})
    run_analyses(art)
    run_analyses(art)
    findings = art.trace.findings
    assert findings[0]["message"] == "from a pass"
    assert sum(1 for f in findings if f.get("code") == "wait_never_completes") == 1
    blocked = [e for e in art.trace.barriers["events"] if e["kind"] == "wait" and not e["completes"]]
    assert blocked and all(findings[e["finding"]]["code"] == "wait_never_completes" for e in blocked)


@pytest.mark.parametrize("name", sorted(__import__("tileworkbench.examples", fromlist=["x"]).ALL_EXAMPLES))
def test_every_example_simulates_without_errors(name):
    from tileworkbench.examples import ALL_EXAMPLES

    art = tw.lower(ALL_EXAMPLES[name](), target=SM90)  # lower runs the analysis stage
    assert not [f for f in art.trace.findings if f["severity"] == "error"], art.trace.findings
    doc = art.trace.to_dict()
    assert doc["smem"]["total_bytes"] <= doc["smem"]["limit_bytes"]
    if name.startswith("matmul_tma"):
        assert doc["barriers"]["events"] and doc["barriers"]["iterations"] == N_ITER
    waits = [e for e in doc["barriers"]["events"] if e["kind"] == "wait"]
    assert all(e["completes"] for e in waits)


def test_more_arrivals_than_the_init_count():
    art = _lower(count_one_arrived_by_all)
    sim = simulate(art)
    codes = {f["code"]: f for f in sim.findings}
    overflow = codes["arrive_overflow"]
    assert overflow["severity"] == "warning" and overflow["line"] == _kernel_line(art, "T.barrier_arrive(mbar)")
    # each of the 128 arrivals completes a phase of a count-1 barrier: phase 128 is even, so
    # wait(0) waits for a phase nobody will complete
    assert len([e for e in sim.events if e["kind"] == "phase_complete"]) == 128
    assert codes["wait_never_completes"]["line"] == _kernel_line(art, "T.barrier_wait(mbar, 0)")
