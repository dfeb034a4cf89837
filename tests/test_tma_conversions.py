"""TMA moves bytes as they are: a copy that converts (float32 to float16) is never a TMA copy. Asked
for one, the compiler says so at the line; choosing for itself, it keeps such a load the threads'
(a warp-specialised loop's producer had loaded a float32 tensor's bytes into a float16 tile)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.errors import CompileError


def test_a_converting_copy_asked_to_be_tma_is_refused():
    @T.prim_func
    def main(T0: T.Tensor((100,), "float16")):
        with T.Kernel(1, threads=32):
            s1 = T.alloc_shared((128,), "float32")
            T.fill(s1, 1.0)
            T.copy(s1[0], T0, prefer_instruction="tma")

    with pytest.raises(CompileError, match=r"prefer_instruction='tma': TMA moves bytes as they are and cannot "
                                           r"convert s1 \(float32\) to T0 \(float16\)"):
        tw.lower(main, target="sm_90a")


def test_a_converting_tma_copy_is_refused():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(1)
            T.tma_copy(A[0, 0], a, barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(a, B)

    with pytest.raises(CompileError, match=r"T.tma_copy: TMA moves bytes as they are and cannot convert A "
                                           r"\(float32\) to a \(float16\)"):
        tw.lower(main, target="sm_90a")


def converting_gemm():
    """A pipelined GEMM whose A is a float32 tensor loaded into a float16 tile (a converting load)."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float32"), B: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for s in T.Pipelined(4, num_stages=2):
                T.copy(A[s * 64:(s + 1) * 64, :], a)
                T.copy(B[s * 64:(s + 1) * 64, :], b)
                T.gemm(a, b, acc, transpose_A=True)
            T.copy(acc, C)

    return main


def test_a_converting_load_keeps_the_loop_from_warp_specialisation(monkeypatch):
    art = tw.lower(converting_gemm(), target="sm_90a")
    assert art.func.attrs["warp_specialized"]["applied"] is False
    assert "dtype" in art.func.attrs["warp_specialized"]["reason"]
    assert "A_desc" not in art.device_source  # no tensor map of A: its tile is converted by threads
    compile_check(art.device_source, "sm_90a")
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    rng = np.random.default_rng(9)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    tw.compile(converting_gemm(), target="cpu")(a, b, c)
    want = a.astype(np.float16).astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-2)
