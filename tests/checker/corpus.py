"""Kernels with one mbarrier-protocol bug each (ours, not the spec's), and what the checker must say.

Each builder returns a ``@T.prim_func``; ``BUGS`` maps it to the finding it must produce: the
``code`` (and, for deadlocks, the ``cause``), the severity, and a piece of kernel text that the
finding's line must contain. Two bugs cannot be written in the DSL (``T.tma_copy`` always announces
exactly the bytes it loads): the expect-tx mismatches are made by editing the lowered IR, the way a
pass bug would, in ``test_checker.py``.
"""

from dataclasses import dataclass

import tileworkbench.language as T

F16 = "float16"


def missing_arrive():
    """T.tma_copy does not arrive: the wait's phase never gets its 128 arrivals."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_wait(mbar, 0)  # BUG: no T.barrier_arrive(mbar) before
            T.copy(A_shared, B)

    return main


def wait_before_own_arrive():
    """The threads wait for a phase that their own arrive, one line later, would complete."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_wait(mbar, 0)  # BUG: before the line that completes its phase
            T.barrier_arrive(mbar)
            T.copy(A_shared, B)

    return main


def fixed_parity():
    """A loop that reuses one barrier but always waits for parity 0: iteration 1 needs parity 1."""

    @T.prim_func
    def main(A: T.Tensor((512, 32), F16), B: T.Tensor((512, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            for k in T.serial(4):
                T.tma_copy(A[k * 128, 0], A_shared, barrier=mbar)
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, 0)  # BUG: k % 2
                T.copy(A_shared, B[k * 128, 0])

    return main


def half_the_block_arrives():
    """Initialised for the whole block, arrived on by two warps: 64 of 128 arrivals, forever."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding()
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            if tid < 64:
                T.barrier_arrive(mbar)  # BUG: two warps of four
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B)

    return main


def per_warp_count_for_the_block():
    """Per-warp TMA (one elected thread per warp) on barriers initialised for the whole block."""

    @T.prim_func
    def main(A: T.Tensor((32, 1024), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(4, threads=256) as pid:
            tid = T.get_thread_binding()
            warp_idx = tid // 32
            row = pid * 8 + warp_idx
            a_shared = T.alloc_shared((8, 1024), dtype=T.float32)
            mbars = T.alloc_barrier([256] * 8)  # BUG: one warp (32 threads) per slot
            T.tma_copy(A[row, 0:1024], a_shared[warp_idx, 0:1024], barrier=mbars[warp_idx], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=mbars[warp_idx])
            T.mbarrier_wait_parity(mbarrier=mbars[warp_idx], parity=0)
            if tid % 32 == 0:
                B[row] = a_shared[warp_idx, 0]

    return main


def duplicate_arrive_in_pipeline(num_stages=2):
    """The spec GEMM with mbar_A arrived on twice per iteration: phases complete early / twice."""

    @T.prim_func
    def main(A: T.Tensor((256, 256), F16), B: T.Tensor((256, 256), F16), C: T.Tensor((256, 256), F16)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 32), F16)
            B_shared = T.alloc_shared((32, 128), F16)
            C_local = T.alloc_fragment((128, 128), "float32")
            mbar_A = T.alloc_barrier(128)
            mbar_B = T.alloc_barrier(128)
            T.clear(C_local)
            for k in T.Pipelined(8, num_stages=num_stages):
                T.tma_copy(A[by * 128, k * 32], A_shared, barrier=mbar_A)
                T.barrier_arrive(mbar_A)
                T.barrier_arrive(mbar_A)  # BUG: a second arrival of every thread
                T.tma_copy(B[k * 32, bx * 128], B_shared, barrier=mbar_B)
                T.barrier_arrive(mbar_B)
                T.barrier_wait(mbar_A, k % 2)
                T.barrier_wait(mbar_B, k % 2)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])

    return main


def count_one_arrived_by_all():
    """A barrier initialised for one arrival that every thread arrives on."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(1)  # BUG: all 128 threads take part below
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_arrive(mbar)
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B)

    return main


def wait_parity_of_the_previous_phase():
    """Waiting for parity 1 on a fresh barrier returns at once (the phase 'before' phase 0)."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_wait(mbar, 1)  # BUG: returns before the load lands
            T.barrier_arrive(mbar)
            T.copy(A_shared, B)

    return main


def arrive_before_the_copy():
    """The arrivals complete phase 0 before the copy announces its bytes: the wait returns early."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.barrier_arrive(mbar)  # BUG: completes phase 0 with no bytes in it
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B)

    return main


def no_wait_before_reading():
    """The tile is read without waiting for the load at all."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_arrive(mbar)
            T.copy(A_shared, B)  # BUG: reads before the phase is known complete
            T.barrier_wait(mbar, 0)

    return main


def reload_while_threads_read():
    """Inside an ``if`` the tile is reloaded by TMA while other threads may still be copying it
    out, unless a block barrier stands between them (``insert_thread_syncs`` puts one there now:
    the condition is the same for every thread; the checker test removes it)."""

    @T.prim_func
    def main(A: T.Tensor((256, 32), F16), B: T.Tensor((256, 32), F16)):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            if bx == 0:
                T.tma_copy(A[0, 0], A_shared, barrier=mbar)
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, 0)
                T.copy(A_shared, B[0, 0])
                T.tma_copy(A[128, 0], A_shared, barrier=mbar)  # BUG: no block barrier before
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, 1)
                T.copy(A_shared, B[128, 0])

    return main


def threads_write_while_loading():
    """Threads fill the tile a TMA load is still writing."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_arrive(mbar)
            T.fill(A_shared, 0)  # BUG: the load may still be writing A_shared
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B)

    return main


def two_loads_one_phase_early_reuse():
    """A second copy on the same barrier slot after its phase's arrivals are in and before any
    wait: its bytes may join the first phase, still in flight."""

    @T.prim_func
    def main(A: T.Tensor((256, 32), F16), B: T.Tensor((256, 32), F16)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((128, 32), F16)
            B_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], A_shared, barrier=mbar)
            T.barrier_arrive(mbar)
            T.tma_copy(A[128, 0], B_shared, barrier=mbar)  # BUG: reuses the slot before waiting
            T.barrier_arrive(mbar)
            T.barrier_wait(mbar, 0)
            T.barrier_wait(mbar, 1)
            T.copy(A_shared, B[0, 0])
            T.copy(B_shared, B[128, 0])

    return main


def too_few_barrier_slots():
    """Eight warps index four barrier slots: warps 4..7 use slots that were never initialised."""

    @T.prim_func
    def main(A: T.Tensor((32, 1024), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(4, threads=256) as pid:
            tid = T.get_thread_binding()
            warp_idx = tid // 32
            row = pid * 8 + warp_idx
            a_shared = T.alloc_shared((8, 1024), dtype=T.float32)
            mbars = T.alloc_barrier([32] * 4)  # BUG: one slot per warp needs 8
            T.tma_copy(A[row, 0:1024], a_shared[warp_idx, 0:1024], barrier=mbars[warp_idx], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=mbars[warp_idx])
            T.mbarrier_wait_parity(mbarrier=mbars[warp_idx], parity=0)
            if tid % 32 == 0:
                B[row] = a_shared[warp_idx, 0]

    return main


def store_source_reused():
    """A loop of TMA stores from one tile that threads refill without a store wait."""

    @T.prim_func
    def main(A: T.Tensor((256, 32), F16), B: T.Tensor((256, 32), F16)):
        with T.Kernel(1, threads=128):
            C_shared = T.alloc_shared((128, 32), F16)
            for i in T.serial(2):
                T.copy(A[i * 128, 0], C_shared)  # BUG: the previous store may still read C_shared
                T.tma_copy(C_shared, B[i * 128, 0])
            T.tma_store_wait(read=False)

    return main


def store_not_waited_at_exit():
    """The block ends right after a TMA store, with no store wait."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            C_shared = T.alloc_shared((128, 32), F16)
            T.copy(A, C_shared)
            T.tma_copy(C_shared, B[0, 0])  # BUG: no T.tma_store_wait() before the block exits

    return main


def leader_excluded_by_a_condition():
    """The copy is issued by the block's leader (thread 0), but only threads 32.. reach it: no
    load is issued, the phase completes on the arrivals alone and the tile is read unloaded."""

    @T.prim_func
    def main(A: T.Tensor((128, 32), F16), B: T.Tensor((128, 32), F16)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            A_shared = T.alloc_shared((128, 32), F16)
            mbar = T.alloc_barrier(128)
            if tx >= 32:
                T.tma_copy(A[0, 0], A_shared, barrier=mbar)  # BUG: the leader is not among these
            T.barrier_arrive(mbar)
            T.barrier_wait(mbar, 0)
            T.copy(A_shared, B)

    return main


@dataclass(frozen=True)
class Bug:
    builder: object
    code: str
    severity: str  # "error": a CompileError by default; "warning": a TileworkbenchWarning
    line_text: str | tuple  # the finding's kernel line contains this (or one of these)
    cause: str | None = None  # the deadlock's cause


BUGS = {
    "missing_arrive": Bug(missing_arrive, "wait_never_completes", "error", "T.barrier_wait(mbar, 0)", "no_arrivals"),
    "leader_excluded_by_a_condition": Bug(leader_excluded_by_a_condition, "leader_not_running", "error",
                                          "T.tma_copy(A[0, 0], A_shared, barrier=mbar)"),
    "wait_before_own_arrive": Bug(wait_before_own_arrive, "wait_never_completes", "error",
                                  "T.barrier_wait(mbar, 0)", "own_later_arrive"),
    "fixed_parity": Bug(fixed_parity, "wait_never_completes", "error", "T.barrier_wait(mbar, 0)", "wrong_parity"),
    "half_the_block_arrives": Bug(half_the_block_arrives, "wait_never_completes", "error",
                                  "T.barrier_wait(mbar, 0)", "arrive_count_unreachable"),
    "per_warp_count_for_the_block": Bug(per_warp_count_for_the_block, "wait_never_completes", "error",
                                        "T.mbarrier_wait_parity(", "arrive_count_unreachable"),
    # Two identical arrive lines: until lowered arrives carry their kernel line (lower_tma drops it),
    # the finding can only point at the barrier's declaration or the loop.
    "duplicate_arrive_in_pipeline": Bug(duplicate_arrive_in_pipeline, "extra_arrivals", "error",
                                        ("T.barrier_arrive(mbar_A)", "mbar_A = T.alloc_barrier(128)")),
    "count_one_arrived_by_all": Bug(count_one_arrived_by_all, "extra_arrivals", "error", "T.barrier_arrive(mbar)"),
    "wait_parity_of_the_previous_phase": Bug(wait_parity_of_the_previous_phase, "read_before_landed", "error",
                                             "T.barrier_wait(mbar, 1)"),
    "arrive_before_the_copy": Bug(arrive_before_the_copy, "read_before_landed", "error", "T.barrier_wait(mbar, 0)"),
    "no_wait_before_reading": Bug(no_wait_before_reading, "read_before_landed", "error", "T.copy(A_shared, B)"),
    "threads_write_while_loading": Bug(threads_write_while_loading, "overwrite_in_flight", "error",
                                       "T.fill(A_shared, 0)"),
    "two_loads_one_phase_early_reuse": Bug(two_loads_one_phase_early_reuse, "slot_reused_before_wait", "error",
                                           "T.tma_copy(A[128, 0], B_shared"),
    "too_few_barrier_slots": Bug(too_few_barrier_slots, "uninitialized", "error", "T.tma_copy(A[row, 0:1024]"),
    "store_source_reused": Bug(store_source_reused, "store_source_reused", "warning", "T.copy(A[i * 128, 0], C_shared)"),
    "store_not_waited_at_exit": Bug(store_not_waited_at_exit, "store_unwaited_at_exit", "warning",
                                    "T.tma_copy(C_shared, B[0, 0])"),
}
