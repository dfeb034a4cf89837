"""The barrier simulation walks more than block (0, 0, 0) where the protocol reads the block index
(``analysis.blocks``): the grid's corners along the indices read, the longest walk shown."""

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.analysis import blocks, simulate
from tileworkbench.analysis.simulation import Simulator
from tileworkbench.examples.tilelang_programs import attention, blocksparse_gemm

OFF = {"tw.barrier_check": "off"}


def tiles_per_block(parity):
    """Block ``bx`` of four copies its first ``bx + 1`` tiles of A through one shared tile (a TMA
    load, the arrive, the wait on ``parity(k)``) into its own rows of B."""
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16")):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(arrive_count=128)
            for k in T.serial(bx + 1):
                T.tma_copy(A[k * 64, 0], s, barrier=bar)
                T.barrier_arrive(bar)
                T.barrier_wait(bar, parity(k))
                T.copy(s, B[bx * 64, 0])

    return main


def test_a_trip_count_of_the_block_index_walks_the_first_and_last_block_and_shows_the_longest():
    sim = simulate(tw.lower(tiles_per_block(lambda k: k % 2)))
    assert sim.blocks == ((0,), (3,)) and sim.block == (3,)
    assert sim.iterations == 4 and sim.findings == []
    assert len([e for e in sim.events if e["kind"] == "wait"]) == 4
    assert sim.to_json()["block"] == [3, 0, 0] and sim.to_json()["blocks"] == [[0, 0, 0], [3, 0, 0]]


def test_a_deadlock_only_the_last_block_reaches_is_a_compile_error_naming_the_block():
    # parity right for k < 3, wrong from k = 3 on: only block 3 runs a fourth tile
    wrong_from_the_fourth = lambda k: (k + k // 3) % 2  # noqa: E731
    with pytest.raises(tw.CompileError, match=r"bar\[0\]\.wait\(0\) can never complete.*\(in block 3\)"):
        tw.lower(tiles_per_block(wrong_from_the_fourth))
    with pytest.warns(tw.TileworkbenchWarning, match=r"in block 3"):
        art = tw.lower(tiles_per_block(wrong_from_the_fourth), pass_configs={"tw.barrier_check": "warn"})
    found = [f for f in art.trace.findings if f["code"] == "wait_never_completes"]
    assert [f["block"] for f in found] == [[3, 0, 0]] and found[0]["iteration"] == 3
    assert art.trace.barriers["block"] == [3, 0, 0]  # the timeline shows the block that deadlocks


def test_causal_attention_is_walked_at_its_shortest_and_longest_query_block():
    kernel = attention.flash_attention(1, 2, 512, 64, True, block_M=64, block_N=64, num_stages=2, threads=128)
    barriers = kernel.trace.barriers
    assert barriers["blocks"] == [[0, 0, 0], [7, 0, 0]] and barriers["block"] == [7, 0, 0]
    assert barriers["iterations"] == 8  # the last query block's eight key tiles, not block 0's one
    causal_free = attention.flash_attention(1, 2, 512, 64, False, block_M=64, block_N=64, num_stages=2, threads=128)
    assert causal_free.trace.barriers["blocks"] == [[0, 0, 0]]


def test_a_condition_on_global_data_walks_one_block():
    # the block-sparse mask is read at the block's index, but no block's walk can evaluate it
    kernel = blocksparse_gemm.blocksparse_matmul.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32,
                                                         num_stages=2, thread_num=128, enable_rasteration=True)
    assert kernel.trace.barriers["blocks"] == [[0, 0, 0]]


def test_only_the_indices_the_protocol_reads_get_corners():
    func = tw.lower(tiles_per_block(lambda k: k % 2)).func
    sim = Simulator(func, 10)
    assert [v.name for v in blocks.block_indices_read(func, sim.relevant)] == ["bx"]
    kernel = attention.flash_attention(1, 2, 512, 64, True, block_M=64, block_N=64, num_stages=2, threads=128)
    assert kernel.trace.barriers["blocks"][1][1:] == [0, 0]  # heads and batch: not read by the protocol


def test_the_report_says_which_block_its_timeline_is():
    from tileworkbench.report.html import render_fragment

    causal = attention.flash_attention(1, 2, 512, 64, True, block_M=64, block_N=64, num_stages=2, threads=128)
    html = render_fragment(causal.trace.to_dict(), uid="t")
    assert "Iterations simulated: 8 (block (7, 0, 0), the longest of the 2 blocks simulated)" in html
    plain = attention.flash_attention(1, 2, 512, 64, False, block_M=64, block_N=64, num_stages=2, threads=128)
    assert "Iterations simulated: 8. " in render_fragment(plain.trace.to_dict(), uid="t")
