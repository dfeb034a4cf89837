"""store_last_tile_by_tma: a kernel's last copy of a whole shared tile to global memory leaves as one
TMA store (the tile keeping the layout its writers want), and only where that is the same result."""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc

SM90 = "sm_90a"


def staged_sum(tile_dtype="float32", then_more=False, rows=32, n=256):
    """C = A + B through shared tiles, TileLang's elementwise example (the result's tile of
    ``tile_dtype``); ``then_more``: the kernel writes C again after the tile's copy (so the copy is
    not its last statement); ``n`` not a multiple of 32 leaves partial tiles at the ends."""

    @T.prim_func
    def main(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32"), C: T.Tensor((n, n), "float32")):
        with T.Kernel(T.ceildiv(n, 32), T.ceildiv(n, rows), threads=128) as (bx, by):
            a = T.alloc_shared((rows, 32), "float32")
            b = T.alloc_shared((rows, 32), "float32")
            total = T.alloc_fragment((rows, 32), "float32")
            c = T.alloc_shared((rows, 32), tile_dtype)
            T.copy(A[by * rows, bx * 32], a)
            T.copy(B[by * rows, bx * 32], b)
            for y, x in T.Parallel(rows, 32):
                total[y, x] = a[y, x] + b[y, x]
            T.copy(total, c)
            T.copy(c, C[by * rows, bx * 32])
            if then_more:
                C[by * rows, bx * 32] = 0.0

    return main


def _kernel_body(kernel) -> str:
    src = kernel.device_source
    return src[src.index('extern "C"'):]


def test_the_last_tile_copy_is_one_tma_store_from_an_unswizzled_tile():
    kernel = tw.lower(staged_sum(), target=SM90)
    body = _kernel_body(kernel)
    assert body.count("tw::tma_store(C_desc, (&c[0]), (bx * 32), (by * 32));") == 1
    assert body.index("tw::tma_store_arrive();") < body.index("tw::tma_store_wait<true>();")  # read before exit
    assert "copy_vec<16>((&C[" not in body and "swizzled" not in body
    # the sum's fragment keeps the 16-byte runs of the tiles it meets (four neighbours a thread)
    assert "c[((i0_2 * 32) + i1_2)] = total[j_1];" in body and "(tx * 4) % 32" in body
    assert nvrtc.compile_check(kernel.device_source, SM90, "staged_sum.cu").spills_bytes == 0


@pytest.mark.parametrize("case, configs, target", [
    (dict(tile_dtype="float16"), {}, SM90),  # a float16 tile into a float32 tensor converts: no TMA of it
    (dict(then_more=True), {}, SM90),  # not the kernel's last statement
    ({}, {"tl.disable_tma_lower": True}, SM90),
    ({}, {}, "sm_80"),
])
def test_other_copies_stay_the_threads_own(case, configs, target):
    body = _kernel_body(tw.lower(staged_sum(**case), target=target, pass_configs=configs))
    assert "tw::tma_store(" not in body


def test_the_cpu_interpreter_runs_the_tma_store_and_its_clipping():
    """The interpreter runs the tile-level IR this pass leaves (the TMA store included): 248 x 248
    is seven 32 x 32 tiles and a partial one each way, and every element comes out once."""
    import numpy as np

    kernel = tw.compile(staged_sum(n=248), target="cpu")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((248, 248)).astype(np.float32) for _ in range(2))
    c = np.full((248, 248), np.nan, dtype=np.float32)
    kernel(a, b, c)
    assert np.array_equal(c, a + b)


@pytest.mark.parametrize("n, bulk", [(256, True), (128, False), (200, False)])
def test_a_tile_past_the_tensors_end_is_stored_by_the_tensor_map_which_clips_it(n, bulk):
    """A row tile of 256 floats: one bulk copy where every block's row lies inside the tensor; where
    it runs past a row's end (rows of 128 or 200), the tensor map's store, which clips it. A bulk
    copy moves all its bytes: it wrote the next row's first half, and past the tensor's end in the
    last block (found by the thread-level interpreter's sweep)."""
    from tileworkbench.examples.tilelang_programs import elementwise

    kernel = elementwise.elementwise_add.compile(M=8, N=n, block_M=1, block_N=256, threads=256,
                                                 in_dtype=T.float32, out_dtype=T.float32)
    body = kernel.get_kernel_source().split("// ---- kernel ----")[1]
    assert ("tw::tma_store((&C[" in body) == bulk and ("tw::tma_store(C_desc" in body) != bulk
