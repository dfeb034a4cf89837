"""An mma.sync gemm reading a tile that a wgmma gemm has stored in 128-byte panels (TileLang's GQA
backward reads ``K_shared`` so: ``Q @ K^T``-like on wgmma, ``dS^T @ K`` with 32 rows on mma.sync):
``tw::gemm_ss`` (and ``gemm_ss_tf32``) is told the panels (before, it read the tile as plain rows:
a wrong dQ on the H100).
The program on the tile-level interpreter against numpy, the call's panel arguments, NVRTC."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.examples.edge_cases import tile_read_by_wgmma_and_mma


def _inputs(rng):
    return [rng.standard_normal(shape).astype(np.float16) for shape in ((128, 192), (32, 192), (128, 32))]


def expected(a, b, d):
    a, b, d = (x.astype(np.float64) for x in (a, b, d))
    return a @ b.T, d.T @ a, b @ a.T


def test_the_program_computes_the_three_products():
    a, b, d = _inputs(np.random.default_rng(5))
    outs = [np.zeros((128, 32), np.float32), np.zeros((32, 192), np.float32), np.zeros((32, 128), np.float32)]
    tw.compile(tile_read_by_wgmma_and_mma(), target="cpu")(a, b, d, *outs)
    for got, want in zip(outs, expected(a, b, d)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2)


def test_each_mma_gemm_is_given_the_panels_of_what_it_reads():
    src = tw.lower(tile_read_by_wgmma_and_mma(), target="sm_90a").device_source
    assert "tw::wgmma_gemm_ss<128, 32, 192," in src  # a_s in panels for wgmma
    assert "tw::gemm_ss<32, 192, 128, 1, 8, true, false, 64, 128, tw::half, 0, 64>" in src  # B = a_s, in panels
    assert "tw::gemm_ss<32, 128, 192, 1, 8, false, true, 128, 128, tw::half, 64, 64>" in src  # both


def test_the_kernel_compiles(nvrtc_check):
    nvrtc_check(tw.lower(tile_read_by_wgmma_and_mma(), target="sm_90a").device_source, "sm_90a")


def test_a_tf32_mma_gemm_reads_the_panels_too(nvrtc_check):
    tf32 = tile_read_by_wgmma_and_mma(k=64, dtype="float32")  # a_s rows of 256 bytes: panels of 32 floats
    src = tw.lower(tf32, target="sm_90a").device_source
    assert "tw::gemm_ss_tf32<32, 64, 128, 2, 4, true, false, 128, 128, 0, 32>" in src  # B = a_s, 32 floats a panel
    assert "tw::gemm_ss_tf32<32, 128, 64, 1, 8, false, true, 128, 128, 32, 32>" in src  # both in panels
    nvrtc_check(src, "sm_90a")
    rng = np.random.default_rng(6)
    a, b, d = (rng.standard_normal(shape).astype(np.float32) for shape in ((128, 64), (32, 64), (128, 32)))
    s, g, h = np.zeros((128, 32), np.float32), np.zeros((32, 64), np.float32), np.zeros((32, 128), np.float32)
    tw.compile(tile_read_by_wgmma_and_mma(k=64, dtype="float32"), target="cpu")(a, b, d, s, g, h)
    for got, want in zip((s, g, h), expected(a, b, d)):
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-2)  # TF32: 10-bit mantissas
