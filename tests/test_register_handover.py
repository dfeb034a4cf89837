"""The register hand-over of a warp-specialised kernel (``setmaxnreg``: the producer warpgroup gives
registers back, two or more consumer warpgroups take them) and TileLang's switches for it:
``T.disable_warp_group_reg_alloc()`` / ``T.no_set_max_nreg()`` turn it off,
``T.annotate_producer_reg_dealloc(n)`` / ``T.annotate_consumer_reg_alloc(n)`` set its counts, which
must be multiples of 8 from 24 to 256 and fit the registers the block holds together."""

from __future__ import annotations

import pytest

import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.jit.lower import lower


def gemm(setting=None, *args):
    """A 256-thread (two consumer warpgroups) pipelined GEMM, with ``setting(*args)`` in its kernel."""
    M = N = K = 1024

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 128), threads=256) as (bx, by):
            if setting is not None:
                setting(*args)
            A_shared = T.alloc_shared((128, 64), "float16")
            B_shared = T.alloc_shared((64, 256), "float16")
            C_local = T.alloc_fragment((128, 256), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], A_shared)
                T.copy(B[k * 64, bx * 256], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 256])

    return main


def handover(func):
    source = lower(func, target="cuda").kernel_source
    return ([line.strip() for line in source.splitlines() if "setmaxnreg" in line and "tw::" in line
             and "template" not in line and "asm" not in line])


def test_by_default_the_producer_gives_its_registers_to_the_consumers():
    assert handover(gemm()) == ["tw::setmaxnreg_dec<24>();", "tw::setmaxnreg_inc<240>();"]


@pytest.mark.parametrize("switch", [T.disable_warp_group_reg_alloc, T.no_set_max_nreg])
def test_the_hand_over_can_be_switched_off(switch):
    assert handover(gemm(switch)) == []


def test_the_counts_can_be_given():
    assert handover(gemm(T.annotate_producer_reg_dealloc, 40)) == ["tw::setmaxnreg_dec<40>();",
                                                                    "tw::setmaxnreg_inc<232>();"]
    assert handover(gemm(T.annotate_consumer_reg_alloc, 200)) == ["tw::setmaxnreg_dec<24>();",
                                                                   "tw::setmaxnreg_inc<200>();"]


def test_counts_that_cannot_be_are_refused():
    with pytest.raises(CompileError, match="multiple of 8 from 24 to 256 registers, not 20"):
        gemm(T.annotate_producer_reg_dealloc, 20)
    with pytest.raises(CompileError, match="multiple of 8 from 24 to 256 registers, not 100"):
        gemm(T.annotate_consumer_reg_alloc, 100 + 0)
    def both():
        T.annotate_producer_reg_dealloc(40)
        T.annotate_consumer_reg_alloc(240)
    with pytest.raises(CompileError, match=r"do not fit the 64512 its block holds \(384 threads x 168\): 128 "
                                          r"producer threads x 40 \+ 256 consumer threads x 240"):
        lower(gemm(both), target="cuda")
    # 384 threads start with 168 registers each: the producer cannot grow, the consumers not shrink
    with pytest.raises(CompileError, match="each thread starts with 168, so the producer keeps at most 168 "
                                          r"\(not 176\)"):
        lower(gemm(T.annotate_producer_reg_dealloc, 176), target="cuda")
    with pytest.raises(CompileError, match=r"the consumers grow to at least 168 \(not 160\)"):
        lower(gemm(T.annotate_consumer_reg_alloc, 160), target="cuda")


@pytest.mark.parametrize("consumers, split", [(256, (24, 240)), (384, (24, 160)), (512, (24, 112))])
def test_the_consumers_take_no_more_than_the_producer_gives_back(consumers, split):
    """The consumers' count fits what the block holds from launch (each thread's starting count):
    setmaxnreg.inc waits for registers the producer's .dec returned, so asking for more hangs the
    block (640 threads start with 96 each: consumers at 120 hung on the H100, at 112 they ran)."""
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.func import Launch
    from tileworkbench.passes.rules.warp_specialization import (PRODUCER_THREADS, block_registers,
                                                                 register_split, starting_registers)

    launch = Launch(grid=(1,), threads=consumers, block_vars=(ir.Var("bx"),), thread_var=ir.Var("tx"))
    producer, consumer = register_split(launch, consumers)
    assert (producer, consumer) == split
    given_back = PRODUCER_THREADS * (starting_registers(consumers) - producer)
    assert consumers * (consumer - starting_registers(consumers)) <= given_back
    assert PRODUCER_THREADS * producer + consumers * consumer <= block_registers(consumers)
