"""The mbarrier-protocol checker: a corpus of buggy kernels, each diagnosed on the CPU, and the
spec's correct kernels, which must produce no finding at all."""

import os
import sys
import warnings

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench import CompileError, TileworkbenchWarning
from tileworkbench.analysis import checker, program
from tileworkbench.analysis.stage import check, run_analyses
from tileworkbench.analysis.lines import KernelLines
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import IRMutator
from tileworkbench.trace import Trace

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (HERE, os.path.join(HERE, "..", "spec")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import corpus
import test_tma_copy as spec

SM90 = {"kind": "cuda", "arch": "sm_90"}
SM100 = {"kind": "cuda", "arch": "sm_100"}
NO_WS = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
WARN = {"tw.barrier_check": "warn"}
OFF = {"tw.barrier_check": "off"}


def _text(func, line):
    lines = KernelLines(func)
    return lines.source[line - lines.first]


def _on_line(bug, text) -> bool:
    wanted = bug.line_text if isinstance(bug.line_text, tuple) else (bug.line_text,)
    return any(w in text for w in wanted)


def _lower_quietly(func, target=SM90, configs=WARN):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileworkbenchWarning)
        return tw.lower(func, target=target, pass_configs=configs)


def _expected(art, bug):
    return [f for f in art.trace.findings if f["code"] == bug.code and (bug.cause is None or f.get("cause") == bug.cause)]


# ---- the corpus: one kernel per kind of bug ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(corpus.BUGS))
def test_the_bug_is_found_where_it_is(name):
    bug = corpus.BUGS[name]
    art = _lower_quietly(bug.builder())
    found = _expected(art, bug)
    assert found, f"{name}: no {bug.code} ({bug.cause}) in {[(f['code'], f.get('cause')) for f in art.trace.findings]}"
    first = found[0]
    assert first["source"] in checker.CHECKED_SOURCES
    assert _on_line(bug, _text(art.func, first["line"]))
    if bug.severity == "error":  # "warn" downgraded it, and says so
        assert first["severity"] == "warning" and first["downgraded"] is True
    else:
        assert first["severity"] == "warning" and not first.get("downgraded")


@pytest.mark.parametrize("name", sorted(n for n, b in corpus.BUGS.items() if b.severity == "error"))
def test_definite_bugs_stop_compilation_at_the_kernel_line(name):
    bug = corpus.BUGS[name]
    func = bug.builder()
    with pytest.raises(CompileError) as info:
        tw.lower(func, target=SM90)
    err = info.value
    first = err.findings[0]
    assert first["severity"] == "error" and first["code"] == bug.code
    assert err.loc is not None and err.loc.line == first["line"] and err.loc.file == func.source_file
    assert _on_line(bug, err.loc.text)
    text = str(err)
    assert f"{func.source_file}:{first['line']}:" in text and "^" in text  # the kernel line, with a caret
    assert first["barrier"] in text and "tw.barrier_check" in text
    assert err.trace.findings and err.trace.barriers is not None


@pytest.mark.parametrize("name", sorted(n for n, b in corpus.BUGS.items() if b.severity == "warning"))
def test_suspicious_patterns_warn_and_compile(name):
    bug = corpus.BUGS[name]
    with pytest.warns(TileworkbenchWarning, match=bug.code) as record:
        art = tw.lower(bug.builder(), target=SM90)
    assert art.device_source
    assert any(w.filename == art.func.source_file and _on_line(bug, _text(art.func, w.lineno)) for w in record)


@pytest.mark.parametrize("name", sorted(corpus.BUGS))
def test_off_switches_the_checker_off(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileworkbenchWarning)
        art = tw.lower(corpus.BUGS[name].builder(), target=SM90, pass_configs=OFF)
    assert not [f for f in art.trace.findings if f.get("source") == checker.SOURCE]
    assert not [f for f in art.trace.findings if "cause" in f or f.get("downgraded")]


def test_the_corpus_covers_every_kind_of_bug():
    codes = {(b.code, b.cause) for b in corpus.BUGS.values()}
    assert len(corpus.BUGS) >= 12
    for cause in ("no_arrivals", "own_later_arrive", "wrong_parity", "arrive_count_unreachable"):
        assert ("wait_never_completes", cause) in codes
    # overwrite_in_use: no kernel written by hand makes it any more (insert_thread_syncs orders the
    # threads' reads before a reload); the edited-IR test below covers it
    for code in ("extra_arrivals", "read_before_landed", "overwrite_in_flight", "slot_reused_before_wait",
                 "uninitialized", "store_source_reused", "store_unwaited_at_exit"):
        assert code in {c for c, _ in codes}


def test_the_message_names_barrier_slot_iteration_and_line():
    func = corpus.fixed_parity()
    with pytest.raises(CompileError) as info:
        tw.lower(func, target=SM90)
    err = info.value
    assert "mbar[0]" in err.message and "iteration 1" in err.message and "parity" in err.message
    assert "T.barrier_wait(mbar, 0)" in err.loc.text
    assert err.findings[0]["cause"] == "wrong_parity" and err.findings[0]["iteration"] == 1


def test_the_timeline_marks_the_offending_events():
    art = _lower_quietly(corpus.wait_parity_of_the_previous_phase())
    doc = art.trace.to_dict()
    marked = [e for e in doc["barriers"]["events"] if "finding" in e]
    assert marked
    (wait,) = [e for e in marked if e["kind"] == "wait"]
    finding = doc["findings"][wait["finding"]]
    assert finding["code"] == "read_before_landed" and finding["line"] == wait["line"]
    assert wait["completes"] is True and wait["phase"] == -1  # returned on the phase before phase 0

    art = _lower_quietly(corpus.duplicate_arrive_in_pipeline())
    doc = art.trace.to_dict()
    extra = [e for e in doc["barriers"]["events"] if "finding" in e and e["kind"] == "arrive"]
    assert extra and all(doc["findings"][e["finding"]]["code"] == "extra_arrivals" for e in extra)
    assert {e["stage"] for e in extra} <= {"prologue", "steady", "epilogue"}


def test_findings_follow_the_trace_schema():
    art = _lower_quietly(corpus.threads_write_while_loading())
    doc = Trace.from_dict(art.trace.to_dict()).to_dict()
    for f in doc["findings"]:
        assert {"severity", "message", "barrier", "slot", "iteration", "line", "code", "source"} <= set(f)
        assert f["severity"] in ("error", "warning")
    n = len(doc["findings"])
    assert all(0 <= e["finding"] < n for e in doc["barriers"]["events"] if "finding" in e)


def test_a_bad_mode_is_rejected():
    with pytest.raises(CompileError, match="tw.barrier_check must be 'error', 'warn' or 'off'"):
        tw.lower(corpus.missing_arrive(), target=SM90, pass_configs={"tw.barrier_check": "strict"})


def test_the_pass_context_carries_the_mode():
    with (tw.PassContext(config={tw.PassConfigKey.TW_BARRIER_CHECK: "warn"}),
          pytest.warns(TileworkbenchWarning, match="wait_never_completes")):
        tw.lower(corpus.missing_arrive(), target=SM90)


def test_compile_raises_too_and_caches_nothing():
    func = corpus.missing_arrive()
    for _ in range(2):  # a rejected kernel never lands in the compile cache
        with pytest.raises(CompileError, match="no_arrivals|no thread arrives"):
            tw.compile(func, target=SM90, load_device=False)


# ---- bugs a pass could make: edit the lowered IR -----------------------------------------------


def _lowered_off(func, target=SM90, configs=None):
    return tw.lower(func, target=target, pass_configs={**(configs or {}), **OFF})


def _calls(stmt, name):
    return [s for s in program.preorder(stmt)
            if isinstance(s, ir.Evaluate) and isinstance(s.call, ir.Call) and s.call.name == name]


def _set_expect(art, nbytes):
    for s in _calls(art.func.body, ".expect_transaction"):
        s.call = ir.Call(s.call.name, (s.call.args[0], ir.const(nbytes)), s.call.dtype)


def _recheck(art):
    """The artifact as if lowered with the checker on, its analyses not yet run."""
    art.pass_configs = {k: v for k, v in art.pass_configs.items() if k != checker.CONFIG}
    art.trace.barriers, art.trace.findings = None, []
    return art


def test_expect_tx_more_than_delivered():
    # The classic FP4 mistake: announce the unpacked shared bytes (8192), not the payload (4096).
    art = _lowered_off(spec.fp4_tma_copy_unpacked_smem_load(), SM100, NO_WS)
    _set_expect(art, 8192)
    codes = {f["code"]: f for f in check(art.func)}
    tx = codes["tx_mismatch"]
    assert tx["severity"] == "error" and "8192" in tx["message"] and "4096" in tx["message"]
    assert codes["wait_never_completes"]["cause"] == "tx_mismatch"
    with pytest.raises(CompileError, match="expect_tx announces 8192 bytes on mbar\\[0\\]") as info:
        run_analyses(_recheck(art))
    assert "barrier=mbar" in info.value.loc.text  # the T.tma_copy line


def test_expect_tx_fewer_than_delivered():
    art = _lowered_off(spec.matmul_tma_copy(256, 256, 256, 128, 128, 32, T.float16, T.float16, T.float32, 128, 2),
                       configs=NO_WS)
    _set_expect(art, 4096)  # each tile is 8192 bytes
    found = check(art.func)
    tx = [f for f in found if f["code"] == "tx_mismatch"]
    assert tx and "deliver 8192" in tx[0]["message"] and "fewer expected" in tx[0]["message"]
    assert tx[0]["barrier"] in ("mbar_A", "mbar_B") and tx[0]["iteration"] is not None


def test_a_reload_inside_an_if_gets_its_barrier_and_without_it_the_checker_finds_the_race():
    art = _lowered_off(corpus.reload_while_threads_read())
    assert check(art.func) == []  # the block barrier insert_thread_syncs put before the reload orders them
    last_sync = [s for s in program.preorder(art.func.body) if isinstance(s, ir.SyncThreads)][-1]

    class DropIt(IRMutator):  # the kernel as a pass that forgot that barrier would leave it
        def visit_SyncThreads(self, node):
            return ir.Comment("barrier dropped") if node is last_sync else node

    art.func = art.func.with_body(DropIt().visit(art.func.body))
    race = [f for f in check(art.func) if f["code"] == "overwrite_in_use"]
    assert race and race[0]["severity"] == "error"
    assert "T.tma_copy(A[128, 0], A_shared" in _text(art.func, race[0]["line"])


def test_barrier_used_before_its_init():
    art = _lowered_off(spec.block_tma_copy_kernel())
    inits = [s for s in program.preorder(art.func.body) if isinstance(s, ir.IfThenElse)
             and _calls(s, ".init")]
    for s in inits:  # the kernel as a pass that forgot the initialisation would leave it
        s.then_body = ir.Comment("init dropped")
    codes = [f["code"] for f in check(art.func) if f["severity"] == "error"]
    assert "uninitialized" in codes


# ---- correct kernels: no finding at all -----------------------------------------------------------


def _gemm(builder, stages):
    return builder(1024, 1024, 1024, 128, 128, 32, T.float16, T.float16, T.float32, 128, stages)


def _correct_kernels():
    load, store = spec._padded_programs()
    out = [(f"{b.__name__}_{s}", lambda b=b, s=s: _gemm(b, s), SM90, NO_WS)
           for b in (spec.matmul_tma_copy, spec.matmul_tma_copy_store) for s in (2, 3, 4)]
    out += [("per_warp", spec.per_warp_tma_copy_kernel, SM90, {}),
            ("block", spec.block_tma_copy_kernel, SM90, {}),
            ("strided_row", spec._strided_row_program, SM90, {}),
            ("padded_load", lambda: load, SM90, {}),
            ("padded_store", lambda: store, SM90, {}),
            ("fp4_roundtrip", spec.fp4_tma_copy_roundtrip, SM100, NO_WS),
            ("fp4_unpacked_load", spec.fp4_tma_copy_unpacked_smem_load, SM100, NO_WS)]
    return out


@pytest.mark.parametrize("name,build,target,configs", _correct_kernels(), ids=[k[0] for k in _correct_kernels()])
def test_correct_spec_kernels_have_no_finding(name, build, target, configs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileworkbenchWarning)
        art = tw.lower(build(), target=target, pass_configs=configs)
    assert art.trace.findings == []
    assert check(art.func) == []
    assert all("finding" not in e for e in art.trace.barriers["events"])


def test_examples_have_no_finding():
    from tileworkbench.examples import ALL_EXAMPLES

    for name, builder in ALL_EXAMPLES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error", TileworkbenchWarning)
            art = tw.lower(builder(), target=SM90)
        assert art.trace.findings == [], name


def test_pipelined_gemm_at_8192_checks_fast():
    import time

    func = spec.matmul_tma_copy(8192, 8192, 8192, 128, 128, 32, T.float16, T.float16, T.float32, 128, 2)
    art = _lowered_off(func, configs=NO_WS)
    start = time.perf_counter()
    assert check(art.func) == []
    assert time.perf_counter() - start < 5.0  # 256 iterations, every event simulated


def _first_threads_wait(waiting: int):
    """Threads ``0 .. waiting - 1`` of 64 wait on an mbarrier the others arrive on."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tid = T.get_thread_binding()
            mbar = T.alloc_barrier(64 - waiting)
            if tid < waiting:
                T.barrier_wait(mbar, 0)
            else:
                T.barrier_arrive(mbar)

    return main


def test_arrivals_later_in_program_order_by_other_threads_are_not_a_definite_deadlock():
    # Threads 0-15 wait while the others arrive: correct on the GPU (the arriving threads are not
    # blocked), though the lockstep simulation meets the wait first (half a warp: no T.ws scope).
    # A warning, never an error.
    with pytest.warns(TileworkbenchWarning, match="lockstep"):
        art = tw.lower(_first_threads_wait(16), target=SM90)
    (finding,) = [f for f in art.trace.findings if f["code"] == "wait_never_completes"]
    assert finding["severity"] == "warning" and finding["cause"] == "may_complete_later"


def test_whole_warps_that_wait_and_arrive_are_scopes_side_by_side():
    # Warp 0 waits while warp 1 arrives: branches on whole warps that use mbarriers are T.ws scopes
    # (frontend/thread_splits.py), which the checker runs side by side: nothing to report.
    art = tw.lower(_first_threads_wait(32), target=SM90)
    assert not [f for f in art.trace.findings if f["code"] == "wait_never_completes"]
    assert "// threads 0..31" in art.device_source and "// threads 32..63" in art.device_source


def test_an_arrive_wait_pair_orders_reads_before_a_reload():
    # No __syncthreads inside the if: the readers' arrive on `empty` and everyone's wait on it
    # order the copy-out before the TMA reload (the consumer-release pattern). No finding.
    @T.prim_func
    def main(A: T.Tensor((256, 32), "float16"), B: T.Tensor((256, 32), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((128, 32), "float16")
            full = T.alloc_barrier(128)
            empty = T.alloc_barrier(128)
            if bx == 0:
                T.tma_copy(A[0, 0], A_shared, barrier=full)
                T.barrier_arrive(full)
                T.barrier_wait(full, 0)
                T.copy(A_shared, B[0, 0])
                T.barrier_arrive(empty)
                T.barrier_wait(empty, 0)
                T.tma_copy(A[128, 0], A_shared, barrier=full)
                T.barrier_arrive(full)
                T.barrier_wait(full, 1)
                T.copy(A_shared, B[128, 0])

    with warnings.catch_warnings():
        warnings.simplefilter("error", TileworkbenchWarning)
        art = tw.lower(main, target=SM90)
    assert art.trace.findings == []


@pytest.mark.parametrize("configs, store", [({}, "tw::store_matrix_x4"),
                                            ({"tw.disable_matrix_stores": True}, "tw::store_pair")])
def test_paired_epilogue_stores_count_as_writes(configs, store):
    """The fragment -> shared copy becomes stmatrix (tw::store_matrix_x4) or tw::store_pair calls;
    refilling the tile while the previous TMA store may still read it is the same bug as with any
    other thread write."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 128), "float16"),
             C: T.Tensor((256, 128), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            C_s = T.alloc_shared((128, 128), "float16")
            T.copy(B[0, 0], B_s)
            for i in T.serial(2):
                T.copy(A[i * 128, 0], A_s)
                T.gemm(A_s, B_s, C_l, clear_accum=True)
                T.copy(C_l, C_s)  # BUG: the previous store may still read C_s
                T.tma_copy(C_s, C[i * 128, 0])
            T.tma_store_wait(read=False)

    with pytest.warns(TileworkbenchWarning, match=r"store_source_reused.*threads overwrite C_s at line \d+"):
        art = tw.lower(main, target={"kind": "cuda", "arch": "sm_90"}, pass_configs=configs)
    assert f"{store}(" in art.device_source.split("---- kernel ----")[1]
    codes = [f["code"] for f in art.trace.to_dict()["findings"]]
    assert codes == ["store_source_reused"]
