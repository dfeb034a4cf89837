"""A gemm on a block of a shared tile's columns (DeepSeek's sparse MLA: ``T.gemm(Q_shared[:, :D],
KV_shared, ...)`` and ``T.gemm(Q_shared[:, D:], K_tail_shared, ...)``, the query and its rotary
tail in one tile): ``split_column_blocks`` makes one tile a block, so each gemm reads a whole
tile; where an access takes the whole tile, the tile stays whole and wgmma reads each block of
whole 128-byte panels where it stands. Both CPU interpreters against float64, wgmma in the CUDA
and NVRTC, the pass's output, and what stays refused (a block of half panels, on mma.sync)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError

M, D, TAIL, N = 64, 128, 64, 64


def scores(whole_copy: bool = False, overlap: bool = False, inside: bool = False):
    """S = Q[:, :D] @ K^T + Q[:, D:] @ Kt^T with Q loaded into one (M, D + TAIL) tile."""
    @T.prim_func
    def main(Q: T.Tensor((M, D + TAIL), "float16"), K: T.Tensor((N, D), "float16"),
             Kt: T.Tensor((N, TAIL), "float16"), S: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            Q_shared = T.alloc_shared((M, D + TAIL), "float16")
            K_shared = T.alloc_shared((N, D), "float16")
            Kt_shared = T.alloc_shared((N, TAIL), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            if whole_copy:
                T.copy(Q, Q_shared)
            else:
                T.copy(Q[:, :D], Q_shared[:, :D])
                T.copy(Q[:, D:], Q_shared[:, D:])
            T.copy(K, K_shared)
            T.copy(Kt, Kt_shared)
            T.clear(acc)
            T.gemm(Q_shared[:, :D], K_shared, acc, transpose_B=True)
            if overlap:  # columns 96..159: across the two blocks the copies take
                T.gemm(Q_shared[:, D - 32:D + TAIL - 32], Kt_shared, acc, transpose_B=True)
            elif inside:  # columns 64..127: part of the first block
                T.gemm(Q_shared[:, D - 64:D + TAIL - 64], Kt_shared, acc, transpose_B=True)
            else:
                T.gemm(Q_shared[:, D:], Kt_shared, acc, transpose_B=True)
            T.copy(acc, S)
    return main


def inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(np.float16) for shape in ((M, D + TAIL), (N, D), (N, TAIL))]


def test_gemms_on_column_blocks_of_one_tile():
    q, k, kt = inputs()
    s = np.zeros((M, N), np.float32)
    tw.compile(scores(), target="cpu")(q, k, kt, s)  # (the thread level does not run wgmma)
    q64 = q.astype(np.float64)
    want = q64[:, :D] @ k.astype(np.float64).T + q64[:, D:] @ kt.astype(np.float64).T
    np.testing.assert_allclose(s, want, rtol=1e-3, atol=1e-2)


def test_each_block_is_a_tile_of_its_own(nvrtc_check):
    artifact = tw.lower(scores(), target="sm_90a")
    source = artifact.device_source
    assert "wgmma" in source.split("// ---- kernel ----")[1]
    names = {b.name for b in _shared_buffers(artifact.func)}
    assert {"Q_shared_c0", f"Q_shared_c{D}"} <= names and "Q_shared" not in names
    nvrtc_check(source, "sm_90a")


def _shared_buffers(func):
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.visitor import collect

    return [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.scope == "shared"]


@pytest.mark.parametrize("form", [dict(whole_copy=True), dict(inside=True)], ids=["whole-copy", "inside"])
def test_a_tile_not_split_is_read_in_place_by_wgmma(form, nvrtc_check):
    """A tile some access takes whole (the query copied in one piece), or whose gemms read blocks
    that are not the blocks its copies take, stays one tile: wgmma reads each gemm's block of
    whole 128-byte panels where it stands."""
    q, k, kt = inputs()
    s = np.zeros((M, N), np.float32)
    tw.compile(scores(**form), target="cpu")(q, k, kt, s)
    q64 = q.astype(np.float64)
    tail = slice(D - 64, D + TAIL - 64) if form.get("inside") else slice(D, None)
    want = q64[:, :D] @ k.astype(np.float64).T + q64[:, tail] @ kt.astype(np.float64).T
    np.testing.assert_allclose(s, want, rtol=1e-3, atol=1e-3)
    artifact = tw.lower(scores(**form), target="sm_90a")
    assert "Q_shared" in {b.name for b in _shared_buffers(artifact.func)}
    assert artifact.device_source.split("// ---- kernel ----")[1].count("tw::wgmma_gemm_ss") == 2
    nvrtc_check(artifact.device_source, "sm_90a")


def test_a_block_not_of_whole_panels_stays_refused_at_the_gemm():
    with pytest.raises(CompileError, match="takes mma.sync, which reads whole tiles only") as info:
        tw.lower(scores(overlap=True), target="sm_90a")  # columns 96..159: half panels
    assert "T.gemm" in info.value.loc.text
