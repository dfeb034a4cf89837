"""rasterize_blocks' block order for loops whose length grows with bx (causal attention): the
blocks with the longest loops start first, so the short ones fill the grid's tail."""

import re

import pytest

import tileworkbench as tw
import tileworkbench.language as T

SM90 = {"kind": "cuda", "arch": "sm_90"}


def triangle(trips, blocks=8, rows=2):
    """Row ``bx`` of Out gets the sum of ``trips(bx)`` ones: block bx's loop runs that often."""

    @T.prim_func
    def main(Out: T.Tensor((blocks, 32), "float32")):
        with T.Kernel(blocks, rows, threads=32) as (bx, by):
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


def block_order_of(source: str, grid) -> list[tuple]:
    """The block indices each hardware block gets, in the order the hardware dispatches them
    (x fastest, then y, then z): the generated index lines evaluated for every block."""
    kernel = source[source.index("__global__"):]
    lines = [line.split("//")[0].strip().removeprefix("const int ").rstrip(";")
             for line in kernel.splitlines()
             if re.match(r"\s*const int (bx|by|bz|tw_block|tw_panel\w*|tw_in_panel|tw_pair) = ", line)]
    order = []
    gx, gy, gz = (list(grid) + [1, 1])[:3]
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                values = {"blockIdx": _Dim(x, y, z), "gridDim": _Dim(gx, gy, gz)}
                for line in lines:
                    name, expr = (part.strip() for part in line.split("=", 1))
                    values[name] = eval(expr.replace("/", "//"), {"min": min}, values)  # C's / on ints >= 0
                order.append(tuple(values[v] for v in ("bx", "by", "bz") if v in values))
    return order


class _Dim:
    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z


def test_a_loop_growing_with_bx_runs_the_last_block_first():
    art = lowered(triangle(lambda bx, by: T.min(bx + 1, 6), rows=1))
    assert art.func.launch.heaviest_first
    assert "const int bx = 7 - blockIdx.x;  // the blocks with the longest loops first" in art.device_source
    assert "the longest start first" in art.trace.ir_after("rasterize_blocks")


def test_with_blocks_along_y_the_longest_of_every_row_start_before_any_shorter_one():
    """Reversing x alone would dispatch row 0's blocks from the longest down, then row 1's: the
    last row's longest block would start near the end of the grid."""
    art = lowered(triangle(lambda bx, by: T.min(bx + 1, 6), rows=3))
    assert art.func.launch.heaviest_first
    order = block_order_of(art.device_source, (8, 3))
    assert sorted(order) == [(x, y) for x in range(8) for y in range(3)]  # every block exactly once
    bxs = [bx for bx, _ in order]
    assert bxs == sorted(bxs, reverse=True) and bxs[:3] == [7, 7, 7]  # every row's longest first


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
    source = lowered(causal).device_source
    assert "const int bx = 7 - tw_block / 2;" in source and "const int bz = 0;" in source
    order = block_order_of(source, (8, 2, 1))
    assert sorted(order) == [(x, y, 0) for x in range(8) for y in range(2)]
    assert [bx for bx, _, _ in order] == [7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0]
    assert "const int bx = blockIdx.x;" in lowered(full).device_source


@pytest.mark.parametrize("heads, seq, dim, panel", [
    (16, 4096, 128, 8), (16, 8192, 128, 4), (16, 16384, 128, 2), (16, 8192, 64, 8), (6, 8192, 128, 4),
    (16, 65536, 128, 1)])
def test_heads_take_their_turn_in_panels_that_fit_l2(heads, seq, dim, panel):
    """As many heads at a time as keep the keys and values their longest blocks load within 16 MB
    (what ran best on the H200); one head at a time is the order along x alone."""
    from tileworkbench.examples.attention import mha_fwd

    launch = lowered(mha_fwd(1, heads, seq, dim, True)).func.launch
    assert launch.heaviest_first and launch.heaviest_first_panel == panel


def test_a_panel_order_keeps_every_block_once_and_runs_each_panels_longest_first(monkeypatch):
    import tileworkbench.passes.rasterize_blocks as rb
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    # 6 heads x 2 batches of 4 query blocks, K and V of 256 x 64 (64 KB a head): panels of 5 pairs
    # under a 320 KB budget (the last one of 2), to see the order on a small grid
    monkeypatch.setattr(rb, "L2_PANEL_BYTES", 5 * 2 * 256 * 64 * 2)
    art = lowered(flash_attention.fn(2, 6, 256, 64, True, block_M=64, block_N=64, num_stages=2, threads=128))
    assert art.func.launch.heaviest_first_panel == 5
    order = block_order_of(art.device_source, (4, 6, 2))
    assert sorted(order) == [(x, y, z) for x in range(4) for y in range(6) for z in range(2)]
    pairs = [y + 6 * z for _, y, z in order]
    assert pairs[:20] and set(pairs[:20]) == set(range(5)) and set(pairs[40:]) == {10, 11}
    for start, end in ((0, 20), (20, 40), (40, 48)):  # each panel's blocks, longest first
        bxs = [bx for bx, _, _ in order[start:end]]
        assert bxs == sorted(bxs, reverse=True)


def test_a_three_dimensional_grid_keeps_every_block_once():
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    causal = flash_attention.fn(2, 3, 256, 64, True, block_M=64, block_N=64, num_stages=2, threads=128)
    order = block_order_of(lowered(causal).device_source, (4, 3, 2))
    assert sorted(order) == [(x, y, z) for x in range(4) for y in range(3) for z in range(2)]
    bxs = [bx for bx, _, _ in order]
    assert bxs == sorted(bxs, reverse=True)


@pytest.mark.parametrize("build, grid", [
    (lambda: triangle(lambda bx, by: T.min(bx + 1, 6), rows=1), (8, 1)),  # x alone
    (lambda: triangle(lambda bx, by: T.min(bx + 1, 6), rows=3), (8, 3)),  # across the grid
    (lambda: triangle(lambda bx, by: 4, rows=3), (8, 3)),  # the hardware's order
    (lambda: _panelled(), (4, 6, 2)),  # panels of 5 pairs, the last of 2
    (lambda: _rasterized(), (4, 25)),  # GEMM raster panels of 10 rows, the last of 5
], ids=["x-alone", "across", "plain", "panels", "raster"])
def test_the_host_knows_each_blocks_indices_as_the_kernel_computes_them(build, grid, monkeypatch):
    """codegen.block_order.kernel_block (debug-mode messages name a block by it) against the
    generated lines, for every block of the grid."""
    from tileworkbench.codegen import block_order

    import tileworkbench.passes.rasterize_blocks as rb

    monkeypatch.setattr(rb, "L2_PANEL_BYTES", 5 * 2 * 256 * 64 * 2)
    art = lowered(build())
    order = art.trace.resources["block_order"]
    assert order["grid"] == list(grid)
    generated = block_order_of(art.device_source, grid)
    dims = (list(grid) + [1, 1])[:3]
    hardware = [(x, y, z) for z in range(dims[2]) for y in range(dims[1]) for x in range(dims[0])]
    host = [block_order.kernel_block(order, b)[:len(generated[0])] for b in hardware]
    assert host == generated


def _panelled():
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    return flash_attention.fn(2, 6, 256, 64, True, block_M=64, block_N=64, num_stages=2, threads=128)


def _rasterized():
    from tileworkbench.examples import matmul

    return matmul(25 * 128, 4 * 128, 64, 128, 128, 32, "float16", "float16", 2, 128)
