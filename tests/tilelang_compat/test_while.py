"""``while`` loops in kernels (stream-K's run of iterations across tiles): the loop, what it does
to block barriers and TMA phases, what is refused, and what the barrier checker says of it."""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import TileworkbenchWarning

from .kernel_files import import_kernel_file
from tileworkbench.examples.edge_cases import collatz_steps
from tileworkbench.examples.tilelang_programs.streamk_gemm import CASES as STREAMK_CASES

SM90 = "sm_90a"


def kernel_part(src: str) -> str:
    return src.split("// ---- kernel ----")[1]


def test_stream_k_runs_its_pipelined_loop_inside_a_while_with_a_barrier_each_pass():
    kernel = STREAMK_CASES["streamk_gemm"]["compile"]()
    code = kernel_part(kernel.get_kernel_source())
    loop = code[code.index("while ((start[0] < "):code.index("start[0] = end[0];")]
    # Each pass's prologue overwrites the tiles the last pass's gemms read: a barrier first.
    assert loop.index("__syncthreads();") < loop.index("tw::cp_async<16>") < loop.index("tw::gemm_ss<")
    # a part of a tile's K range adds into C: float32 neighbours two at a time, each row behind its guard
    assert "tw::atomic_add_pair((&C_pairs" in loop and "atomicAdd((&C[" not in loop


def test_a_thread_variant_while_without_shared_memory_is_a_plain_loop():
    code = kernel_part(tw.lower(collatz_steps(), target=SM90).device_source)
    assert "while ((x[0] != 1)) {" in code and "__syncthreads" not in code


def test_a_while_whose_threads_disagree_around_a_barrier_is_refused():
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "float32")
            n = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            n = tx
            while n > 0:
                s[tx] = X[tx]
                Y[tx] = s[127 - tx]
                n = n - 1

    with pytest.raises(tw.CompileError, match=r"inside this `while` loop, whose condition \(n\[0\] > 0\) may differ"):
        tw.lower(main, target=SM90)


def tma_copies_in_a_while():
    @T.prim_func
    def main(A: T.Tensor((16, 64, 64), "float16"), B: T.Tensor((16, 64, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            i = T.alloc_var(T.int32)
            i = 0
            while i < 16:
                T.copy(A[i, 0:64, 0:64], s, prefer_instruction="tma")
                T.copy(s, B[i, 0:64, 0:64])
                i = i + 1

    return main


@pytest.mark.filterwarnings("ignore:barrier check")
def test_a_synchronous_tma_copy_in_a_while_waits_on_a_flipped_phase():
    main = tma_copies_in_a_while()

    code = kernel_part(tw.lower(main, target=SM90).device_source)
    assert "A_to_s_mbarrier[0].wait(A_to_s_mbarrier_phase);" in code
    assert "A_to_s_mbarrier_phase = (A_to_s_mbarrier_phase ^ 1);" in code


def test_the_barrier_checker_says_it_did_not_simulate_a_while():
    main = tma_copies_in_a_while()
    with pytest.warns(TileworkbenchWarning, match=r"the while loop on i\[0\] < 16 .* not simulated"):
        tw.lower(main, target=SM90)


@pytest.mark.parametrize("body, message", [
    ("while 1 < 2:\n                Y[0] = 1.0", "this condition is True while the kernel is built"),
    ("while X[0] < 1.0:\n                Y[0] = 1.0\n            else:\n                Y[0] = 2.0", "while-else"),
    ("while X[0]:\n                Y[0] = 1.0", "a while condition must be a comparison or an integer"),
])
def test_while_loops_that_cannot_be_built_say_why(tmp_path, body, message):
    source = f'''import tileworkbench.language as T

@T.prim_func
def main(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32):
            {body}
'''
    with pytest.raises(tw.CompileError, match=message):
        import_kernel_file(tmp_path, source)
