"""``T.copy(..., disable_tma=True)``: the copy is the threads' (plain or cp.async), never TMA. The
passes that choose TMA themselves (the warp-specialised producer, store_last_tile_by_tma, the
staged epilogue) had taken such copies as automatic ones and moved them by TMA."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.ir.printer import print_ir

SM90 = "sm_90a"


def gemm(disable_tma: bool, n=256):
    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float16")):
        with T.Kernel(n // 128, n // 128, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            C_s = T.alloc_shared((128, 128), "float16")
            T.clear(C_l)
            for k in T.Pipelined(n // 64, num_stages=3):
                T.copy(A[by * 128, k * 64], A_s, disable_tma=disable_tma)
                T.copy(B[k * 64, bx * 128], B_s, disable_tma=disable_tma)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * 128, bx * 128], disable_tma=disable_tma)

    return main


def _body(kernel) -> str:
    return kernel.kernel_source[kernel.kernel_source.index('extern "C"'):]


def test_automatic_copies_take_tma_on_sm_90a():
    body = _body(tw.lower(gemm(False), target=SM90))
    assert "tw::tma_load(" in body and "tw::tma_store(" in body  # the producer's loads, the last tile's store


def test_disabled_copies_stay_the_threads():
    kernel = tw.lower(gemm(True), target=SM90)
    body = _body(kernel)
    assert "tma_load" not in body and "tma_store" not in body
    assert "tw::cp_async<16>(" in body  # still a software pipeline, by cp.async
    assert "disable_tma=True" in kernel.func.attrs["warp_specialized"]["reason"]
    assert not kernel.func.attrs.get("tma_descriptors")
    nvrtc.compile_check(kernel.device_source, SM90)


def test_the_printed_ir_says_disable_tma():
    assert "disable_tma=True" in print_ir(tw.lower(gemm(True), target=SM90).source_func)


@pytest.mark.parametrize("disable_tma", [False, True])
def test_both_compute_the_product(disable_tma):
    rng = np.random.default_rng(46)
    a, b = (rng.standard_normal((256, 256)).astype(np.float16) for _ in range(2))
    c = np.zeros((256, 256), np.float16)
    tw.compile(gemm(disable_tma), target="cpu")(a, b, c)
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=5e-2)
