"""wgmma with warpgroups side by side along N (``rules.gemm._warpgroup_split``): a tile of fewer
64-row blocks than warpgroups (64 x 128 on 256 threads, TileLang's convolution) splits N between
them instead of taking mma.sync; a warpgroup's columns past 256 are instructions side by side. The layout algebra (every element held once, stmatrix, rows
reduced across the warpgroups) is checked in tests/test_matrix_stores.py and
tests/tilelang_compat/test_fragment_rows.py; here the plans, the generated calls and NVRTC."""

import itertools
import re

import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples import matmul
from tileworkbench.examples.gemm import gemm_row_max
from tileworkbench.examples.tilelang_programs.convolution import convolution
from tileworkbench.ir.layout import WgmmaAccumLayout
from tileworkbench.passes.rules.gemm import _warpgroup_split


def kernel_body(src: str) -> str:
    return src.split("// ---- kernel ----")[1]


@pytest.mark.parametrize("shape, warpgroups, n_groups", [((64, 128), 1, 2), ((64, 256), 1, 4), ((128, 64), 2, 2)])
def test_the_split_layout_holds_every_element_once(shape, warpgroups, n_groups):
    layout = WgmmaAccumLayout(shape, warpgroups, n_groups)
    held = [layout.forward(tid, j)[0] for tid, j in itertools.product(range(layout.threads),
                                                                       range(layout.local_size))]
    assert sorted(held) == sorted(itertools.product(range(shape[0]), range(shape[1])))


@pytest.mark.parametrize("m, n, warpgroups, split", [
    (128, 256, 2, (2, 1)),   # whole 64-row blocks per warpgroup: along M, as before
    (64, 128, 2, (1, 2)),    # the convolution's tile: 64 x 64 each
    (64, 8, 2, None),        # 4 columns a warpgroup: below wgmma's N of 8
    (64, 1024, 2, None),     # 512 columns a warpgroup: above wgmma's 256
    (96, 128, 2, None),      # not whole 64-row blocks
    (64, 256, 4, None),      # more than two warpgroups side by side: not run on a GPU yet, so mma.sync
    (128, 128, 4, None),
    (64, 512, 1, (1, 1)),    # one warpgroup's 512 columns: two instructions of 256 side by side (wgmma_plan)
    (64, 384, 1, None),      # not whole instructions of 256
])
def test_warpgroups_split_along_n_only_where_m_runs_out(m, n, warpgroups, split):
    assert _warpgroup_split(m, n, warpgroups) == split


def test_the_convolution_runs_wgmma_on_two_warpgroups_side_by_side():
    kernel = convolution.compile(N=2, C=128, H=16, W=16, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128,
                                 block_K=32, num_stages=3, threads=256)
    body = kernel_body(kernel.get_kernel_source())
    assert "tw::wgmma_gemm_ss<64, 128, 32, 1, 64, 128, false, tw_wgmma_m64n64k16_f16_kn, 0, true, 2>(" in body
    assert "tw::gemm_ss<" not in body
    # the epilogue's stmatrix stores put warpgroup 1's columns 64 to the right
    assert "((tx / 128) * 64)" in body and "tw::store_matrix_x4(" in body
    assert compile_check(kernel.get_kernel_source(), "sm_90a", "conv.cu").spills_bytes == 0


@pytest.mark.parametrize("trans_B, block_N, form", [
    (False, 128, "tw_wgmma_m64n64k16_f16_kn"), (False, 256, "tw_wgmma_m64n128k16_f16_kn"),
    (True, 64, "tw_wgmma_m64n32k16_f16_kk"), (True, 128, "tw_wgmma_m64n64k16_f16_kk")])
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1000, 1030, 770)])
def test_64_row_gemms_on_two_warpgroups_split_n(trans_B, block_N, form, shape):
    art = tw.lower(matmul(*shape, 64, block_N, 64, num_stages=3, threads=256, trans_B=trans_B))
    calls = re.findall(r"tw::wgmma_gemm_ss<([^>]*)>", kernel_body(art.device_source))
    assert calls and all(c.startswith(f"64, {block_N}, 64, 1, ") and c.endswith(", 2") and form in c for c in calls)
    assert compile_check(art.device_source, "sm_90a", "split.cu").spills_bytes == 0


def test_an_n_major_b_split_inside_one_swizzled_row_stays_on_mma_sync():
    # B 64 x 64: one 128-byte row, so the second warpgroup's 32 columns would start mid-row
    art = tw.lower(matmul(1024, 1024, 1024, 64, 64, 64, num_stages=3, threads=256))
    body = kernel_body(art.device_source)
    assert "tw::gemm_ss<64, 64, 64, 2, 4," in body and "wgmma_gemm_ss" not in body


def test_rows_of_a_split_accumulator_reduce_across_its_warpgroups():
    art = tw.lower(gemm_row_max(512, 512, 256))
    body = kernel_body(art.device_source)
    assert ", 2>(" in body and "row_max_warps" in body  # per-warpgroup partials meet in shared memory
    assert "fmaxf(row_max_warps[i0_1], row_max_warps[(i0_1 + 64)])" in body
    assert compile_check(art.device_source, "sm_90a", "rowmax.cu").spills_bytes == 0


@pytest.mark.parametrize("block_M, threads", [(64, 128), (128, 256)])
def test_a_warpgroup_s_columns_past_256_are_instructions_side_by_side(block_M, threads):
    """A 512-column accumulator on each warpgroup (DeepSeek's 512-wide value heads on one warpgroup):
    two m64n256 instructions a k-step, each on its own 128 registers and 256 columns of B
    (``tw::wgmma_gemm_ss``'s NC), where mma.sync took it before."""
    art = tw.lower(matmul(256, 1024, 256, block_M, 512, 64, num_stages=2, threads=threads))
    calls = re.findall(r"tw::wgmma_gemm_ss<([^>]*)>", kernel_body(art.device_source))
    assert calls and all(c.startswith(f"{block_M}, 512, 64, {threads // 128}, ") and
                         c.endswith("tw_wgmma_m64n256k16_f16_kn, 0, true, 1, 2") for c in calls)
    assert compile_check(art.device_source, "sm_90a", "chunks.cu").registers == 255  # 256 accumulators a thread
