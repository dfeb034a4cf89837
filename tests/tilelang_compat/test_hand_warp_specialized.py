"""Warp specialisation written by hand, as TileLang's FlashMLA-style kernels write it: an ``if tx <
128: ... elif tx < 256: ... else: ...`` chain gives each warpgroup its part; the producer gathers
rows by index with ``T.ptx_cp_async`` on ``T.access_ptr`` pointers and arrives with
``T.cp_async_barrier_noinc``; the consumers issue ``T.wgmma_gemm`` and wait for it with
``T.wait_wgmma``; ``T.set_max_nreg`` moves registers between the warpgroups. Checked on the
tile-level interpreter against numpy (the thread-level one does not run wgmma) and by NVRTC."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect

ROWS, KEYS, DIM, BLOCK = 64, 512, 64, 64  # query rows, key rows to gather from, head dim, keys a step
STEPS = 4  # steps of BLOCK gathered keys
F16, F32 = "float16", "float32"


def gathered_scores(registers: tuple | None = (240, 168, 80), producer_parity: int = 1):
    """S[:, step] = Q @ K[Idx[step]]^T for four steps of 64 gathered keys: a producer warpgroup
    (threads 256..383) gathers each step's key rows into a two-stage ring, 16 bytes a thread;
    the first consumer warpgroup scores them with wgmma and stores the scores; the second adds
    the rows' sums of the scores it is handed through shared memory. ``registers``: the
    set_max_nreg counts (consumer 1, consumer 2, producer), or None for none; ``producer_parity``
    0 makes the producer wait for a release no one has made yet (a deadlock)."""

    @T.prim_func
    def main(Q: T.Tensor((ROWS, DIM), F16), K: T.Tensor((KEYS, DIM), F16), Idx: T.Tensor((STEPS * BLOCK,), "int32"),
             S: T.Tensor((ROWS, STEPS * BLOCK), F32), RowSums: T.Tensor((ROWS,), F32)):
        with T.Kernel(1, threads=384):
            q_shared = T.alloc_shared((ROWS, DIM), F16)
            k_shared = T.alloc_shared((2, BLOCK, DIM), F16)
            s_shared = T.alloc_shared((ROWS, BLOCK), F32)
            acc = T.alloc_fragment((ROWS, BLOCK), F32)
            sums = T.alloc_fragment((ROWS,), F32)
            part = T.alloc_fragment((ROWS,), F32)
            k_ready = T.alloc_barrier(arrive_count=[128, 128])
            k_free = T.alloc_barrier(arrive_count=[128, 128])
            s_ready = T.alloc_barrier(arrive_count=128)
            s_free = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(Q, q_shared)
            if tx < 128:
                if registers is not None:
                    T.set_max_nreg(registers[0], 1)
                for step in T.serial(STEPS):
                    stage = step % 2
                    T.barrier_wait(k_ready[stage], (step // 2) % 2)
                    T.wgmma_gemm(q_shared, k_shared[stage, :, :], acc, transpose_B=True, clear_accum=True)
                    T.wait_wgmma(0)
                    T.barrier_arrive(k_free[stage])
                    T.copy(acc, S[:, step * BLOCK:(step + 1) * BLOCK])
                    T.barrier_wait(s_free, (step + 1) % 2)
                    T.copy(acc, s_shared)
                    T.barrier_arrive(s_ready)
            elif tx < 256:
                if registers is not None:
                    T.set_max_nreg(registers[1], 1)
                T.fill(sums, 0)
                for step in T.serial(STEPS):
                    T.barrier_wait(s_ready, step % 2)
                    T.reduce_sum(s_shared, part, dim=1)
                    T.barrier_arrive(s_free)
                    for i in T.Parallel(ROWS):
                        sums[i] += part[i]
                T.copy(sums, RowSums)
            else:
                if registers is not None:
                    T.set_max_nreg(registers[2], 0)
                for step in T.serial(STEPS):
                    stage = step % 2
                    T.barrier_wait(k_free[stage], (step // 2 + producer_parity) % 2)
                    for r in T.serial(BLOCK // 16):  # 16 rows a pass: 8 threads of 16 bytes a row
                        row = r * 16 + (tx - 256) // 8
                        col = (tx - 256) % 8 * 8
                        T.ptx_cp_async(T.access_ptr(k_shared[stage, row, col], "w", 8),
                                       T.access_ptr(K[Idx[step * BLOCK + row], col], "r", 8), 8)
                    T.cp_async_barrier_noinc(k_ready[stage])

    return main


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((ROWS, DIM)).astype(np.float16)
    k = rng.standard_normal((KEYS, DIM)).astype(np.float16)
    idx = rng.integers(0, KEYS, STEPS * BLOCK).astype(np.int32)
    return q, k, idx


def test_the_gathered_scores_match_numpy_on_the_interpreter():
    q, k, idx = _inputs()
    s = np.zeros((ROWS, STEPS * BLOCK), np.float32)
    sums = np.zeros(ROWS, np.float32)
    tw.compile(gathered_scores(), target="cpu")(q, k, idx, s, sums)
    want = q.astype(np.float64) @ k[idx].astype(np.float64).T
    np.testing.assert_allclose(s, want, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(sums, want.sum(axis=1), rtol=1e-3, atol=1e-2)


def test_the_chain_is_three_scopes_and_compiles(nvrtc_check):
    art = tw.lower(gathered_scores(), target="cuda")
    assert [(s.first, s.count) for s in collect(art.func.body, ir.ThreadScope)] == [(0, 128), (128, 128), (256, 128)]
    kernel = art.kernel_source.split('extern "C"')[1]
    assert "cp.async" in art.kernel_source and ".arrive_after_copies()" in kernel
    assert "tw::setmaxnreg_inc<240>" in kernel and "tw::setmaxnreg_dec<80>" in kernel
    assert kernel.count("tw::wgmma_wait<0>") >= 1
    nvrtc_check(art.kernel_source, "sm_90a")


def test_the_barrier_check_runs_each_warpgroup_up_to_its_waits():
    """Each warpgroup waits on several barriers in one iteration; the check steps the three side
    by side and passes the protocol, and finds the deadlock where the producer waits one phase
    off (and so does the interpreter)."""
    tw.lower(gathered_scores(), target="cuda")  # the check is on by default: it passes
    with pytest.raises(CompileError, match="barrier check .*a circular wait"):
        tw.lower(gathered_scores(producer_parity=0), target="cuda")


@pytest.mark.parametrize("registers, message", [
    ((240, 160, 80), r"T.set_max_nreg\(160, 1\): each of this block's 384 threads starts with 168 registers"),
    ((240, 240, 40), r"more registers than the block holds \(warpgroup 0: 240, warpgroup 1: 240, warpgroup 2: "
                     r"40: 66560 in all, where its 384 threads hold 168 each, 64512\)"),
    ((240, 168, 176), r"T.set_max_nreg\(176, 0\): .* setmaxnreg.dec goes to at most"),
], ids=["inc-below-start", "more-than-the-block", "dec-above-start"])
def test_register_counts_the_block_cannot_hand_over_are_refused(registers, message):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(gathered_scores(registers), target="cuda")
    assert "T.set_max_nreg" in info.value.loc.text


def test_set_max_nreg_outside_a_warpgroup_scope_is_refused():
    with pytest.raises(CompileError, match="is run here by the whole block"):
        @T.prim_func
        def main(X: T.Tensor((128,), F32)):
            with T.Kernel(1, threads=256):
                T.set_max_nreg(240, 1)
                for i in T.Parallel(128):
                    X[i] = 0.0


def test_set_max_nreg_in_a_loop_is_refused():
    @T.prim_func
    def main(X: T.Tensor((128,), F32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            if tx < 128:
                for k in T.serial(2):
                    T.set_max_nreg(240, 1)
                for i in T.Parallel(128):
                    X[i] = 0.0

    with pytest.raises(CompileError, match="inside a loop or a branch"):
        tw.lower(main, target="cuda")


WIDE = 128  # two 128-byte panels: each half a block of whole panels wgmma reads in place


def _scores_with(misuse: str):
    """One warpgroup scores two K tiles with T.wgmma_gemm; ``misuse`` breaks the wait."""

    @T.prim_func
    def main(Q: T.Tensor((ROWS, WIDE), F16), K: T.Tensor((2, BLOCK, WIDE), F16), S: T.Tensor((2, ROWS, BLOCK), F32)):
        with T.Kernel(1, threads=128):
            q_shared = T.alloc_shared((ROWS, WIDE), F16)
            k_shared = T.alloc_shared((BLOCK, WIDE), F16)
            acc = T.alloc_fragment((ROWS, BLOCK), F32)
            T.copy(Q, q_shared)
            for t in T.serial(2):
                T.copy(K[t, :, :], k_shared)
                if misuse == "loop-carried":  # the last iteration's group still runs here
                    T.copy(acc, S[t, :, :])
                T.wgmma_gemm(q_shared[:, :WIDE // 2], k_shared[:, :WIDE // 2], acc, transpose_B=True, clear_accum=True)
                T.wgmma_gemm(q_shared[:, WIDE // 2:], k_shared[:, WIDE // 2:], acc, transpose_B=True,
                             clear_accum=misuse == "clear")
                if misuse == "read":
                    T.copy(acc, S[t, :, :])
                if misuse == "overwrite":
                    T.copy(K[1 - t, :, :], k_shared)
                if misuse == "wait-one":
                    T.wait_wgmma(1)  # the second group may still run
                    T.copy(acc, S[t, :, :])
                if misuse != "loop-carried":
                    T.wait_wgmma(0)
                    T.copy(acc, S[t, :, :])

    return main


def test_chained_wgmma_gemms_waited_for_match_numpy():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((ROWS, WIDE)).astype(np.float16)
    k = rng.standard_normal((2, BLOCK, WIDE)).astype(np.float16)
    s = np.zeros((2, ROWS, BLOCK), np.float32)
    tw.compile(_scores_with(""), target="cpu")(q, k, s)
    want = np.einsum("md,tnd->tmn", q.astype(np.float64), k.astype(np.float64))
    np.testing.assert_allclose(s, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("misuse, message", [
    ("read", "acc is the accumulator of the T.wgmma_gemm at line"),
    ("clear", "acc is the accumulator of the T.wgmma_gemm at line"),
    ("overwrite", "this writes k_shared, which the T.wgmma_gemm at line"),
    ("wait-one", "acc is the accumulator of the T.wgmma_gemm at line"),
    ("loop-carried", "this writes k_shared, which the T.wgmma_gemm at line"),
])
def test_touching_what_a_running_wgmma_gemm_uses_is_refused(misuse, message):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(_scores_with(misuse), target="cuda")
    assert info.value.loc is not None


def blocks_in_turn(barrier_between: bool = False):
    """FlashMLA's way with a wide K: the producer warpgroup loads each 64-column block of K with a
    TMA copy on a barrier of its own; the consumer scores each block as it lands, into one
    accumulator cleared by the first (``clear_accum=(j == 0)``, ``j`` a ``T.unroll`` variable: the
    block's columns start at ``j * 64``), then multiplies the scores, cast to 16 bits in registers,
    by V (register-A wgmma in a 128-thread scope). ``barrier_between`` puts a block barrier
    between the consumer's scope and the producer's: a deadlock."""

    @T.prim_func
    def main(Q: T.Tensor((ROWS, WIDE), F16), K: T.Tensor((BLOCK, WIDE), F16), V: T.Tensor((BLOCK, DIM), F16),
             S: T.Tensor((ROWS, BLOCK), F32), O: T.Tensor((ROWS, DIM), F32)):
        with T.Kernel(1, threads=256):
            q_shared = T.alloc_shared((ROWS, WIDE), F16)
            k_shared = T.alloc_shared((BLOCK, WIDE), F16)
            v_shared = T.alloc_shared((BLOCK, DIM), F16)
            acc = T.alloc_fragment((ROWS, BLOCK), F32)
            p = T.alloc_fragment((ROWS, BLOCK), F16)
            out = T.alloc_fragment((ROWS, DIM), F32)
            ready = T.alloc_barrier(arrive_count=[128, 128])
            v_ready = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.copy(Q, q_shared)
            if tx < 128:
                for j in T.unroll(WIDE // 64):
                    T.barrier_wait(ready[j], 0)
                    T.wgmma_gemm(q_shared[:, j * 64:(j + 1) * 64], k_shared[:, j * 64:(j + 1) * 64], acc,
                                 transpose_B=True, clear_accum=(j == 0))
                T.wait_wgmma(0)
                T.copy(acc, S)
                T.copy(acc, p)
                T.barrier_wait(v_ready, 0)
                T.wgmma_gemm(p, v_shared, out, clear_accum=True)
                T.wait_wgmma(0)
                T.copy(out, O)
            if barrier_between:
                T.sync_threads()
            if tx >= 128:
                for j in T.unroll(WIDE // 64):
                    T.tma_copy(K[:, j * 64:(j + 1) * 64], k_shared[:, j * 64:(j + 1) * 64], barrier=ready[j])
                    T.barrier_arrive(ready[j])
                T.tma_copy(V, v_shared, barrier=v_ready)
                T.barrier_arrive(v_ready)

    return main


def test_blocks_in_turn_match_numpy_and_compile(nvrtc_check):
    rng = np.random.default_rng(4)
    q = rng.standard_normal((ROWS, WIDE)).astype(np.float16)
    k = rng.standard_normal((BLOCK, WIDE)).astype(np.float16)
    v = rng.standard_normal((BLOCK, DIM)).astype(np.float16)
    s, o = np.zeros((ROWS, BLOCK), np.float32), np.zeros((ROWS, DIM), np.float32)
    tw.compile(blocks_in_turn(), target="cpu")(q, k, v, s, o)
    want = q.astype(np.float64) @ k.astype(np.float64).T
    np.testing.assert_allclose(s, want, rtol=1e-3, atol=1e-3)
    p16 = want.astype(np.float32).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(o, p16 @ v.astype(np.float64), rtol=1e-3, atol=2e-2)
    art = tw.lower(blocks_in_turn(), target="sm_90a")  # the barrier check passes: each block its own
    kernel = art.kernel_source.split('extern "C"')[1]
    assert "tw::wgmma_gemm_rs" in kernel and "p_shared" not in kernel  # P read from registers
    assert "if ((j == 0))" in kernel.replace(" ", "").replace("if((j==0))", "if ((j == 0))")
    nvrtc_check(art.kernel_source, "sm_90a")


def test_a_block_barrier_before_the_arrivals_a_scope_waits_for_is_a_deadlock():
    """The consumer's threads wait for the producer's arrivals, which come after a block barrier
    the consumer reaches only after its waits: the barrier check says so (an error, not a maybe),
    and the compiler itself puts no block barrier there (the producer arrives on what the consumer
    waits on)."""
    with pytest.raises(CompileError, match="block barrier.* that every thread must reach first"):
        tw.lower(blocks_in_turn(barrier_between=True), target="sm_90a")
    code = tw.lower(blocks_in_turn(), target="sm_90a").kernel_source.split('extern "C"')[1]
    assert "__syncthreads" not in code[code.index("// T.ws(0)"):]


def test_a_group_left_running_by_each_of_many_iterations_counts_as_many():
    """A long loop issues one T.wgmma_gemm an iteration and waits for all but one: after the loop,
    T.wait_wgmma(1) leaves the last iteration's group running, so reading its accumulator is
    refused; T.wait_wgmma(0) would let it."""

    def scores(wait: int):
        @T.prim_func
        def main(Q: T.Tensor((ROWS, DIM), F16), K: T.Tensor((BLOCK, DIM), F16), S: T.Tensor((ROWS, BLOCK), F32)):
            with T.Kernel(1, threads=128):
                q_shared = T.alloc_shared((ROWS, DIM), F16)
                k_shared = T.alloc_shared((BLOCK, DIM), F16)
                acc = T.alloc_fragment((ROWS, BLOCK), F32)
                T.copy(Q, q_shared)
                T.copy(K, k_shared)
                T.clear(acc)
                for t in T.serial(40):
                    T.wgmma_gemm(q_shared, k_shared, acc, transpose_B=True)
                    T.wait_wgmma(1)
                T.wait_wgmma(wait)
                T.copy(acc, S)

        return main

    tw.lower(scores(0), target="cuda")
    with pytest.raises(CompileError, match="acc is the accumulator of the T.wgmma_gemm at line"):
        tw.lower(scores(1), target="cuda")


def handed_on(arrive_first: bool = False):
    """Warpgroup 1 loads K with TMA, waits for it, and hands it to warpgroup 0 through a barrier of
    its own; warpgroup 0 never waits on the load's barrier (FlashMLA's consumers so). With
    ``arrive_first`` warpgroup 1 hands it on before waiting for the load: a race."""

    @T.prim_func
    def main(K: T.Tensor((BLOCK, DIM), F16), Out: T.Tensor((BLOCK, DIM), F16)):
        with T.Kernel(1, threads=256):
            k_shared = T.alloc_shared((BLOCK, DIM), F16)
            loaded = T.alloc_barrier(arrive_count=128)
            handed = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx < 128:
                T.barrier_wait(handed, 0)
                T.copy(k_shared, Out)
            else:
                T.tma_copy(K, k_shared, barrier=loaded)
                T.barrier_arrive(loaded)
                if arrive_first:
                    T.barrier_arrive(handed)
                T.barrier_wait(loaded, 0)
                if not arrive_first:
                    T.barrier_arrive(handed)

    return main


def test_a_wait_learns_what_the_arriving_scope_had_waited_for():
    """Happens-before through barriers: an arrival releases what its threads had waited for, a wait
    on its phase acquires it. The barrier check passes the handed-on kernel and reports the racy one
    at compile time; the tile-level interpreter runs the first and reports the second's read."""
    k = np.random.default_rng(6).standard_normal((BLOCK, DIM)).astype(np.float16)
    out = np.zeros((BLOCK, DIM), np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no finding, not even a warning
        kernel = tw.compile(handed_on(), target="cpu")
    kernel(k, out)
    np.testing.assert_array_equal(out, k)
    with pytest.raises(CompileError, match=r"read_before_landed, loaded\[0\]\): a thread reads k_shared"):
        tw.lower(handed_on(arrive_first=True), target="sm_90a")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        racy = tw.compile(handed_on(arrive_first=True), target="cpu", pass_configs={"tw.barrier_check": "warn"})
    with pytest.raises(tw.KernelRuntimeError, match="race: the read of k_shared"):
        racy(k, np.zeros_like(out))


@pytest.mark.parametrize("form, message", [
    ("shared-source", r"T.ptx_cp_async copies global memory into shared memory; the source"),
    ("bytes", r"T.ptx_cp_async copies 4, 8 or 16 bytes; 3 float16 elements are 6"),
    ("not-a-pointer", r"the destination is a pointer from T.access_ptr"),
    ("read-only", r"T.ptx_cp_async writes its destination"),
])
def test_a_wrong_ptx_cp_async_is_refused_at_its_line(form, message):
    with pytest.raises(CompileError, match=message) as info:
        @T.prim_func
        def main(K: T.Tensor((BLOCK, DIM), F16)):
            with T.Kernel(1, threads=128):
                k_shared = T.alloc_shared((BLOCK, DIM), F16)
                other = T.alloc_shared((BLOCK, DIM), F16)
                tx = T.get_thread_binding()
                src = T.access_ptr(other[tx % BLOCK, 0], "r", 8) if form == "shared-source" else \
                    T.access_ptr(K[tx % BLOCK, 0], "r", 8)
                dst = k_shared[tx % BLOCK, 0] if form == "not-a-pointer" else \
                    T.access_ptr(k_shared[tx % BLOCK, 0], "r" if form == "read-only" else "w", 8)
                T.ptx_cp_async(dst, src, 3 if form == "bytes" else 8)
    assert "T.ptx_cp_async" in info.value.loc.text
