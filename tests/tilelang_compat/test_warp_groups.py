"""``with T.ws(g):`` -- warp specialisation written by the user (TileLang's warp-specialised GEMM
examples): the scope, the threads its tile operations are spread over, the block barriers the
compiler puts inside and around it, the versions ``T.Pipelined`` gives its tiles and barriers,
what is refused, and what the barrier checker says of a wrong protocol."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.examples.tilelang_programs.warp_specialize import CASES
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect

SM90 = "sm_90a"


def kernel_part(src: str) -> str:
    return src.split("// ---- kernel ----")[1]


def _next_phase(ko):
    return (ko + 1) % 2


def _this_phase(ko):  # the loader waiting for the gemm of this very iteration: wrong
    return ko % 2


def loader_and_gemm(stages=0, loader_waits=_next_phase, threads=256, groups=(0, 1), on_own_barrier=False):
    """A GEMM tile loop: warpgroup ``groups[0]`` loads with TMA, ``groups[1]`` multiplies; the
    loader waits on the gemm's release (``done``), or with ``on_own_barrier`` on its own ``ready``."""
    producer, consumer = groups

    @T.prim_func
    def main(A: T.Tensor((512, 512), "float16"), B: T.Tensor((512, 512), "float16"),
             C: T.Tensor((512, 512), "float16")):
        with T.Kernel(4, 4, threads=threads) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(acc)
            for ko in T.Pipelined(8, num_stages=stages):
                with T.ws(producer):
                    if loader_waits is not None:
                        T.barrier_wait(ready if on_own_barrier else done, loader_waits(ko))
                    T.tma_copy(A[by * 128, ko * 64], A_s, barrier=ready)
                    T.tma_copy(B[ko * 64, bx * 128], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(consumer):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, acc)
                    T.barrier_arrive(done)
            with T.ws(consumer):
                T.copy(acc, C[by * 128, bx * 128])

    return main


def test_a_scope_is_its_warpgroups_threads():
    art = tw.lower(loader_and_gemm(), target=SM90)
    scopes = collect(art.func.body, ir.ThreadScope)
    assert [(s.first, s.count) for s in scopes] == [(128, 128), (0, 128), (128, 128), (128, 128)]
    code = kernel_part(art.device_source)
    assert "if (tx >= 128 && tx < 256) {  // T.ws(1)" in code
    assert "if (tx >= 0 && tx < 128) {  // T.ws(0)" in code


def test_tile_operations_in_a_scope_run_on_its_threads():
    code = kernel_part(tw.lower(loader_and_gemm(), target=SM90).device_source)
    # the gemm on one warpgroup, indexed by the scope's own thread number; the accumulator's 128 x 128
    # floats over its 128 threads; each TMA load issued by one thread of the loading warpgroup
    assert "tw::wgmma_gemm_ss<128, 128, 64, 1, 128, 128, false," in code
    assert "C_local" not in code and "float acc[128];" in code
    gemm = code[code.index("tw::wgmma_gemm_ss<"):]
    assert re.search(r"acc, tx_ws1(_\d+)?\)$", gemm[:gemm.index(";")])
    assert code.count("tw::shuffle_elect<128>()") == 2 and "shuffle_elect<256>" not in code
    store = code[code.rindex("// T.ws(1)"):]
    assert "tx_ws1_1 / 32" in store and "tx /" not in store  # the result rows of the scope's warps


def test_the_users_mbarriers_order_the_roles_without_block_barriers():
    code = kernel_part(tw.lower(loader_and_gemm(), target=SM90).device_source)
    loop = code[code.index("for (int ko"):]
    assert "__syncthreads" not in loop and "bar.sync" not in loop


def test_a_scope_that_waits_on_no_barrier_is_ordered_by_a_block_barrier():
    """The loader does not wait for the gemm to finish with the tiles: the compiler cannot rely on a
    protocol it is not given, so a block barrier orders the refill after the gemm."""
    code = kernel_part(tw.lower(loader_and_gemm(loader_waits=None), target=SM90).device_source)
    loop = code[code.index("for (int ko"):]
    assert loop.index("__syncthreads();") < loop.index("// T.ws(0)")


def test_pipelined_stages_version_the_tiles_and_the_barriers_only():
    art = tw.lower(loader_and_gemm(stages=2), target=SM90)
    code = kernel_part(art.device_source)
    loop = code[code.index("for (int ko"):]
    assert "done[(ko % 2)].wait((((ko / 2) + 1) % 2));" in loop  # (ko + 1) % 2 at the ring's slot
    assert "ready[(ko % 2)].wait(((ko / 2) % 2));" in loop
    assert "swizzled<tw::half, 128>(A_s, 0, ((ko % 2) * 8192))" in loop  # the stage: whole swizzle periods
    assert "prologue" not in code and "__syncthreads" not in loop  # the roles run side by side already
    record = art.func.attrs["pipelines"][0]
    assert record["mode"] == "ws" and record["barriers"] == ["ready", "done"]


def test_block_barriers_inside_scopes_are_named_barriers_of_their_threads():
    code = kernel_part(CASES["ws_split_n"]["compile"]().get_kernel_source())
    loop = code[code.index("for (int ko"):]
    # Both warpgroups copy A: a block barrier before either multiplies; each copies its own half of B
    # and syncs only its own threads (barriers 1 and 2) before its gemm.
    assert loop.index("__syncthreads();", loop.index("tw::copy_vec<16>")) < loop.index("// T.ws(0)")
    ws0, ws1 = loop[loop.index("// T.ws(0)"):loop.index("// T.ws(1)")], loop[loop.index("// T.ws(1)"):]
    assert "tw::sync_consumers<128>();" in ws0 and "tw::sync_named<2, 128>();" in ws1
    assert "__syncthreads" not in ws0 and "__syncthreads" not in ws1.split("}\n  }\n")[0]


@pytest.mark.parametrize("stages", [0, 2])
def test_the_checker_catches_a_loader_that_waits_on_the_wrong_phase(stages):
    # the loader waits for the gemm of its own iteration, which waits for the loader's tiles
    with pytest.raises(tw.CompileError, match=r"wait_never_completes, done\[0\], iteration 0\).*a circular wait"):
        tw.lower(loader_and_gemm(stages=stages, loader_waits=_this_phase), target=SM90)


@pytest.mark.parametrize("stages", [0, 2])
def test_the_checker_catches_a_loader_that_waits_on_its_own_barrier(stages):
    with pytest.raises(tw.CompileError, match=r"overwrite_in_use.*overwrites A_s while the gemm at line \d+"):
        tw.lower(loader_and_gemm(stages=stages, on_own_barrier=True), target=SM90)


def loops_in_scopes(loader_parity):
    """Each warpgroup's whole loop in its own scope, the gemm's written first (two stages)."""
    @T.prim_func
    def main(A: T.Tensor((256, 512), "float16"), B: T.Tensor((512, 256), "float16"),
             C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_s = T.alloc_shared((2, 128, 64), "float16")
            B_s = T.alloc_shared((2, 64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            bars = T.alloc_barrier([128] * 4)
            with T.ws(1):
                T.clear(acc)
                for ko in T.serial(8):
                    T.barrier_wait(bars[ko % 2], (ko // 2) % 2)
                    T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, :], acc)
                    T.barrier_arrive(bars[ko % 2 + 2])
            with T.ws(0):
                for ko in T.serial(8):
                    T.barrier_wait(bars[ko % 2 + 2], loader_parity(ko))
                    T.tma_copy(A[by * 128, ko * 64], A_s[ko % 2, :, :], barrier=bars[ko % 2])
                    T.tma_copy(B[ko * 64, bx * 128], B_s[ko % 2, :, :], barrier=bars[ko % 2])
                    T.barrier_arrive(bars[ko % 2])
            with T.ws(1):
                T.copy(acc, C[by * 128, bx * 128])

    return main


def test_the_checker_runs_a_loader_scope_written_after_the_gemm_ahead_of_it():
    """On the GPU the loader's threads do not wait for the gemm's scope to end: its waits pass
    (a stage is free before its first use) and the check finds nothing."""
    art = tw.lower(loops_in_scopes(lambda ko: ((ko // 2) % 2) ^ 1), target=SM90)
    assert not art.trace.findings
    waits = [e for e in art.trace.barriers["events"] if e["kind"] == "wait"]
    assert waits and all(e["completes"] for e in waits)
    # the first wait is the loader's, written after the gemm's (a larger line), then they alternate
    lines = [e["line"] for e in waits]
    assert lines[0] > lines[1] and lines[:4] == [lines[0], lines[1]] * 2


def test_scopes_that_each_wait_on_the_other_are_found_before_launch_and_by_the_interpreter():
    # the loader waits for a stage to be freed before its first use (the parity one phase off)
    wrong = loops_in_scopes(lambda ko: (ko // 2) % 2)
    with pytest.raises(tw.CompileError, match=r"wait_never_completes, bars\[0\], iteration 0\).*a circular wait"):
        tw.lower(wrong, target=SM90)
    kernel = tw.compile(wrong, target="cpu", pass_configs={"tw.barrier_check": "off"})
    a = np.ones((256, 512), np.float16)
    with pytest.raises(KernelRuntimeError, match=r"deadlock in block \(0, 0\): the wait on bars\[0\] for parity 0 "
                                                 r"at line \d+ \(ko=0\)"):
        kernel(a, a.T.copy(), np.zeros((256, 256), np.float16))


def test_the_checker_follows_a_correct_protocol_without_findings():
    for stages in (0, 2, 3):
        art = tw.lower(loader_and_gemm(stages=stages), target=SM90)
        assert not [f for f in art.trace.findings if f["severity"] == "error"], stages


@pytest.mark.parametrize("groups, threads, message", [
    ((0, 2), 384, r"T.ws\(0, 2\): warpgroups 0, 2 are not consecutive"),
    ((2,), 256, r"T.ws\(2\): the block's 256 threads have warpgroups 0..1"),
])
def test_groups_outside_the_block_or_apart_are_refused(groups, threads, message):
    with pytest.raises(tw.CompileError, match=message):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=threads):
                with T.ws(*groups):
                    A[0] = 1.0


def test_a_scope_inside_another_is_refused():
    with pytest.raises(tw.CompileError, match="inside another one"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=256):
                with T.ws(0):
                    with T.ws(0):
                        A[0] = 1.0


def test_a_scope_that_binds_a_name_is_refused():
    with pytest.raises(tw.CompileError, match="binds no name"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=256):
                with T.ws(0) as g:
                    A[0] = g


def test_a_scope_in_a_block_of_partial_warpgroups_is_refused():
    with pytest.raises(tw.CompileError, match="96 threads are not whole warpgroups"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=96):
                with T.ws(0):
                    A[0] = 1.0


def test_a_scope_outside_the_kernel_is_refused():
    with pytest.raises(tw.CompileError, match=r"must be inside `with T.Kernel"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.ws(0):
                A[0] = 1.0


def test_a_fragment_shared_by_two_scopes_is_refused():
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=256):
            frag = T.alloc_fragment((128, 128), "float32")
            with T.ws(0):
                T.clear(frag)
            with T.ws(0, 1):
                T.copy(frag, A)

    with pytest.raises(tw.CompileError, match=r"fragment frag is used by 128 threads at line \d+ and by 256 here"):
        tw.lower(main, target=SM90)


def test_thread_copies_pipelined_across_scopes_are_refused():
    @T.prim_func
    def main(A: T.Tensor((512, 64), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256):
            s = T.alloc_shared((128, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            for k in T.Pipelined(4, num_stages=2):
                with T.ws(0):
                    T.copy(A[k * 128, 0], s)
                with T.ws(0):
                    T.copy(s, acc)
            with T.ws(0):
                T.copy(acc, C)

    with pytest.raises(tw.CompileError, match=r"num_stages=2\) over `T.ws` scopes"):
        tw.lower(main, target=SM90)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_warp_specialised_example_compiles_to_an_sm90_cubin(name, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = CASES[name]["compile"]()
    assert nvrtc.cubin_sm(kernel.cubin) == 90
    assert kernel.record["nvrtc"]["registers"] > 0
