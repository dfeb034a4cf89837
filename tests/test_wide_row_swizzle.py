"""Shared tiles with rows wider than 128 bytes that mma.sync reads and threads fill (not TMA): the
wide-row swizzle (``choose_shared_layouts``; ``tw::swizzle`` for spans 256 to 2048), so ldmatrix
reads 8 rows' same chunk from 8 bank groups instead of one. The convolution's 32 x 128 fp16
filter tile was the case that found it (its 256-byte rows unswizzled: eight-way conflicts), before
its gemm moved to wgmma."""

import tileworkbench as tw
from tileworkbench.analysis.smem import smem_plan, swizzle_name
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples import matmul
from tileworkbench.examples.tilelang_programs.convolution import convolution

MMA_SYNC = {tw.PassConfigKey.TW_DISABLE_WGMMA: True}


def swizzles(art) -> dict:
    return {b["name"]: b["swizzle"] for b in smem_plan(art)["buffers"]}


def test_the_convolutions_filter_tile_takes_the_wide_row_swizzle_on_mma_sync():
    # (with wgmma, as it compiles by default, its two warpgroups split N: tests/test_wgmma_n_split.py)
    on_mma_sync = tw.jit(pass_configs=MMA_SYNC)(convolution.fn)
    kernel = on_mma_sync.compile(N=2, C=128, H=16, W=16, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128,
                                 block_K=32, num_stages=3, threads=256)
    src = kernel.get_kernel_source()
    # the cp.async writes and the gemm's ldmatrix reads use the one pattern
    assert "tw::cp_async<16>((&tw::swizzled<tw::half, 256>(filters, " in src
    assert "tw::gemm_ss<64, 128, 32, 2, 4, false, false, 64, 256, tw::half>(" in src
    assert "(&tw::swizzled<tw::half, 256>(filters, (k_slot1 * 4096)))" in src
    assert compile_check(src, "sm_90a", "conv.cu").spills_bytes == 0


def test_mma_sync_tiles_with_wide_rows_are_swizzled_by_row():
    # 1030 columns: the rows' 2060 bytes are no multiple of 16, so threads (not TMA) fill the tiles
    art = tw.lower(matmul(1000, 1030, 770, 128, 128, 128, num_stages=2), pass_configs=MMA_SYNC)
    assert swizzles(art) == {"A_shared": "128B by 256-byte rows", "B_shared": "128B by 256-byte rows"}
    assert "tw::gemm_ss<128, 128, 128, 2, 2, false, false, 256, 256, tw::half>" in art.device_source
    assert compile_check(art.device_source, "sm_90a", "wide_rows.cu").spills_bytes == 0


def test_tiles_tma_fills_and_wgmma_tiles_keep_their_layouts():
    # the warp-specialised GEMM's 64 x 256 B tile: TMA fills it, wgmma reads it as 128-byte panels
    art = tw.lower(matmul(4096, 4096, 512, 128, 256, 64, "float16", "float16", 3, 256))
    assert art.func.attrs["warp_specialized"]["applied"]
    assert swizzles(art)["B_shared"] == "128B"
    assert "swizzled<tw::half, 256>" not in art.device_source


def test_the_shared_memory_view_names_the_wide_row_swizzle():
    assert swizzle_name(256) == "128B by 256-byte rows"
    assert swizzle_name(128) == "128B" and swizzle_name(0) == "none"
