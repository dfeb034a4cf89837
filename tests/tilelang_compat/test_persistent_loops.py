"""``T.Persistent``: a block's walk over the tiles of a domain, wave after wave, numbered as
TileLang numbers them (groups of ``group_size`` along the last dimension)."""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs.gemm import matmul_persistent


def tiles_visited(domain, waves_of, group):
    """The (block, wave) -> tile map the kernel below writes, by a plain Python model of the walk."""
    m, n = domain
    g = max(1, min(group, n))
    grouped = [-(-n // g), m, g]
    padded = grouped[0] * m * g
    seen = {}
    for block in range(waves_of):
        for w in range(-(-padded // waves_of)):
            t = w * waves_of + block
            if t >= padded:
                continue
            within, rest = t % g, t // g
            bx, top = rest % m, rest // m
            by = top * g + within
            if by < n:
                seen[(bx, by)] = (block, w)
    return seen


def test_the_walk_covers_every_tile_once():
    for domain, sms, group in [((8, 5), 132, 8), ((7, 13), 16, 8), ((3, 3), 4, 2)]:
        seen = tiles_visited(domain, sms, group)
        assert sorted(seen) == [(i, j) for i in range(domain[0]) for j in range(domain[1])]


def test_a_persistent_walk_binds_its_tile_coordinates_per_wave():
    @T.prim_func
    def tiles(A: T.Tensor((2048, 3072), "float16"), B: T.Tensor((2048, 3072), "float16")):
        with T.Kernel(16, threads=256) as block_id:
            for bx, by in T.Persistent([16, 12], 16, block_id):  # no pipelined loop: the walk stays
                for i, j in T.Parallel(128, 256):
                    B[bx * 128 + i, by * 256 + j] = A[bx * 128 + i, by * 256 + j] + 1.0

    code = tw.lower(tiles, target="sm_90a").device_source.split("// ---- kernel ----")[1]
    # 16 x 12 tiles in groups of 8 along N: 2 x 16 x 8 = 256 places, 16 waves of 16 blocks
    assert "for (int w = 0; w < 16; ++w) {" in code
    # the tile's column (its group's first plus its place in the group) inside the 12 there are
    assert "if ((((((w * 2) / 16) * 8) + (block_id % 8)) < 12)) {" in code


def test_tilelangs_persistent_gemm_runs_as_a_grid_of_its_tiles():
    # a GEMM walk whose tiles share nothing: the compiler's own persistence walks them
    # (tests/test_unwrap_persistent_walk.py)
    kernel = matmul_persistent.compile(M=2048, N=3072, K=512, block_M=128, block_N=256, block_K=64, threads=256,
                                       num_stages=3, sm_num=16)
    assert "with T.Kernel(12, 16, threads=256) as (by, bx):" in kernel.trace.ir_after("unwrap_persistent_walk")
    assert "for (int w = 0;" not in kernel.get_kernel_source()


def test_a_persistent_domain_and_its_names_must_agree():
    with pytest.raises(tw.CompileError, match="this T.Persistent domain has 2 dimension"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(4, threads=128) as b:
                for x in T.Persistent([4, 4], 4, b):
                    A[x] = 1.0


def test_a_one_dimensional_walk_in_groups_larger_than_the_domain():
    @T.prim_func
    def scale(A: T.Tensor((1000,), "float32"), B: T.Tensor((1000,), "float32")):
        with T.Kernel(3, threads=128) as b:
            for t in T.Persistent([8], 3, b, group_size=64):  # the group is cut to the domain: 8
                for i in T.Parallel(128):
                    B[t * 128 + i] = A[t * 128 + i] * 2.0

    code = tw.lower(scale, target="sm_90a").device_source.split("// ---- kernel ----")[1]
    assert "for (int w = 0; w < 3; ++w) {" in code  # 8 tiles in waves of 3
    assert "< 1000)" in code  # the last tile hangs over the tensor: its accesses are guarded
    assert sorted(tiles_visited((1, 8), 3, 64)) == [(0, j) for j in range(8)]
