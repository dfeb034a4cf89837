"""rasterize_blocks' block order for loops whose length grows with bx (causal attention): the
blocks with the longest loops start first, so the short ones fill the grid's tail."""

import pytest

import tileworkbench as tw
import tileworkbench.language as T

SM90 = {"kind": "cuda", "arch": "sm_90"}


def triangle(trips, blocks=8):
    """Row ``bx`` of Out gets the sum of ``trips(bx)`` ones: block bx's loop runs that often."""

    @T.prim_func
    def main(Out: T.Tensor((blocks, 32), "float32")):
        with T.Kernel(blocks, 2, threads=32) as (bx, by):
            acc = T.alloc_fragment((32,), "float32")
            T.clear(acc)
            for _k in T.serial(trips(bx, by)):
                for i in T.Parallel(32):
                    acc[i] += 1.0
            if by == 0:
                T.copy(acc, Out[bx, :])

    return main


def lowered(func):
    return tw.lower(func, target=SM90)


def test_a_loop_growing_with_bx_runs_the_last_block_first():
    art = lowered(triangle(lambda bx, by: T.min(bx + 1, 6)))
    assert art.func.launch.heaviest_first
    assert "const int bx = 7 - blockIdx.x;  // the blocks with the longest loops first" in art.device_source
    assert "blockIdx.y;" in art.device_source  # only x is reordered
    assert "the longest start first" in art.trace.ir_after("rasterize_blocks")


@pytest.mark.parametrize("trips", [
    lambda bx, by: 8 - bx,  # shrinks: the hardware order already starts with the longest
    lambda bx, by: 4,  # the same for every block
    lambda bx, by: bx % 3 + 1,  # grows and falls
    lambda bx, by: bx + by + 1,  # depends on another block index too
], ids=["shrinking", "constant", "not-monotone", "other-index"])
def test_other_loops_keep_the_hardware_order(trips):
    art = lowered(triangle(trips))
    assert not art.func.launch.heaviest_first
    assert "const int bx = blockIdx.x;" in art.device_source


def test_causal_attention_runs_its_longest_query_blocks_first():
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    causal = flash_attention.fn(1, 2, 512, 64, True, block_M=64, block_N=64, num_stages=2, threads=128)
    full = flash_attention.fn(1, 2, 512, 64, False, block_M=64, block_N=64, num_stages=2, threads=128)
    assert "const int bx = 7 - blockIdx.x;" in lowered(causal).device_source
    assert "const int bx = blockIdx.x;" in lowered(full).device_source
