"""A user's ring of shared tiles at num_stages=1 (``T.alloc_shared((1, M, K))``, read as
``A_shared[ko % 1, :, :]``, TileLang's ``matmul_loops_in_scopes`` at one stage): the gemm takes the
single stage as its 2-D tile (it stopped in choose_shared_layouts with an internal error), the
kernel compiles, and the CPU interpreter's run matches float64 as at two stages."""

import os

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.backend import nvrtc
from tileworkbench.examples.tilelang_programs import warp_specialize as ws
from tileworkbench.frontend.eager import parse_eager

SIZES = dict(M=128, N=128, K=256, block_M=64, block_N=64, block_K=64)


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_one_stage_ring_compiles(monkeypatch):
    monkeypatch.setitem(os.environ, "TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = ws.matmul_loops_in_scopes.compile(**SIZES, num_stages=1)
    assert kernel.record["cubin"] is not None
    assert "wgmma" in kernel.get_kernel_source().split("// ---- kernel ----")[1]


@pytest.mark.parametrize("stages", [1, 2])
def test_one_stage_ring_runs_as_two_stages_do(stages):
    parsed = parse_eager(ws.matmul_loops_in_scopes.fn, dict(SIZES, num_stages=stages))
    kernel = tw.compile(parsed.func, out_idx=parsed.out_idx, target="cpu")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 256)).astype(np.float16)
    b = rng.standard_normal((256, 128)).astype(np.float16)
    got = np.asarray(kernel(a, b), dtype=np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=4e-2)  # the result stored as float16
