"""Tiles stored as 128-byte panels, copied from tensors whose rows are not a whole number of
panels (N = 4000, 1000, ...): one 2-D TMA copy per panel instead of one 3-D copy
(passes/rules/tma.py ``tma_copies``), so such GEMMs keep wgmma, TMA and warp specialisation."""

import warnings

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench import TileworkbenchWarning
from tileworkbench.examples import matmul, matmul_tma_copy

SM90 = {"kind": "cuda", "arch": "sm_90"}


def kernel_body(art) -> str:
    return art.device_source.split("// ---- kernel ----")[1]


def test_ragged_n_gemm_copies_each_panel_of_b_and_c():
    art = tw.lower(matmul(4096, 4000, 512, 128, 256, 64, "float16", "float16", 3, 256), target=SM90)
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and ws["persistent"] == {"applied": True, "tiles": 32 * 16}
    b, c = art.tma_descriptors["B_desc"], art.tma_descriptors["C_desc"]
    assert (b.rank, b.global_dims, b.box_dims) == (2, (4000, 512), (64, 64))
    assert (c.rank, c.global_dims, c.box_dims) == (2, (4000, 4096), (64, 128))
    body = kernel_body(art)
    # four panels of the 64 x 256 B tile, 64 columns apart in the tensor, 64 x 64 elements apart
    # in shared memory; all four land on the stage's barrier, which expects the whole tile
    assert "stage_full[k_slot0].expect_transaction(32768);" in body
    for p in range(4):
        col = "(bx * 256)" if p == 0 else f"((bx * 256) + {64 * p})"
        smem = "(k_slot0 * 16384)" if p == 0 else f"((k_slot0 * 16384) + {4096 * p})"
        assert f"tw::tma_load(B_desc, stage_full[k_slot0], (&tw::swizzled<tw::half, 128>(B_shared, {smem})), {col}, (k * 64));" in body
    assert body.count("tw::tma_store(C_desc") == 4
    assert not [f for f in art.trace.findings if f["severity"] == "error"]
    assert compile_check(art.device_source, "sm_90a", "ragged_n.cu").spills_bytes == 0


def test_rows_of_whole_panels_keep_one_3d_copy():
    art = tw.lower(matmul(4096, 4096, 512, 128, 256, 64, "float16", "float16", 3, 256), target=SM90)
    b = art.tma_descriptors["B_desc"]
    assert (b.rank, b.global_dims, b.box_dims) == (3, (64, 512, 64), (64, 64, 4))
    assert kernel_body(art).count("tw::tma_load(B_desc") == 1


def test_spec_gemm_with_ragged_n_copies_each_panel():
    # The spec's own kernel (T.tma_copy, barriers of its own, no warp specialisation): its
    # 32 x 128 B tile is two panels, each a copy on the same barrier.
    art = tw.lower(matmul_tma_copy(1024, 1000, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 2),
                   target=SM90, pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert art.tma_descriptors["B_desc"].box_dims == (64, 32)
    body = kernel_body(art)
    assert body.count("tw::tma_load(B_desc") == 2 * 2  # prologue and steady state, two panels each
    assert "mbar_B[0].expect_transaction(8192);" in body
    assert compile_check(art.device_source, "sm_90a", "ragged_spec.cu").spills_bytes == 0


def test_rows_off_16_byte_boundaries_stay_off_tma():
    # 1001 halves a row: TMA cannot address the rows, so the B tile is not stored as panels for it
    art = tw.lower(matmul(1024, 1001, 512, 128, 256, 64, "float16", "float16", 3, 256), target=SM90)
    assert not art.func.attrs["warp_specialized"]["applied"]
    assert "B_desc" not in art.tma_descriptors


def paneled_tile_kernel(write_before_wait: bool):
    """A 16 x 128 half tile (two 128-byte panels) loaded from a 16 x 200 tensor: two copies."""

    @T.prim_func
    def main(A: T.Tensor((16, 200), "float16"), B: T.Tensor((16, 200), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 128), "float16")
            mbar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], S, barrier=mbar)
            T.barrier_arrive(mbar)
            if write_before_wait:
                for i, j in T.Parallel(16, 64):
                    S[i, 64 + j] = 0  # BUG: the second panel's copy may still be writing
            T.barrier_wait(mbar, 0)
            for i, j in T.Parallel(16, 64):
                S[i, 64 + j] = 0
            T.tma_copy(S, B[0, 0])

    return main


@pytest.mark.parametrize("write_before_wait", [False, True])
def test_checker_sees_each_panel_copy_as_its_panel(write_before_wait):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileworkbenchWarning)
        art = tw.lower(paneled_tile_kernel(write_before_wait), target=SM90,
                       pass_configs={tw.PassConfigKey.TW_BARRIER_CHECK: "warn"})
    assert kernel_body(art).count("tw::tma_load(A_desc") == 2
    codes = [f["code"] for f in art.trace.findings]
    if write_before_wait:
        assert "overwrite_in_flight" in codes
    else:  # two copies into neighbouring panels on one phase are not an overwrite
        assert not [f for f in art.trace.findings if f["severity"] == "error"], codes
