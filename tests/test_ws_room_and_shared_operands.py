"""Two conditions of ``warp_specialize``: a gemm may read a shared tile the consumers write in the
loop (the MLA decode's probabilities, ``p_tile``, read by P @ KV) where each gemm completes before
the next statement; and the split needs room for every loaded tile's versions beside the kernel's
other shared tiles (it places them side by side, where the one-role pipeline may let tiles of
disjoint lifetimes share bytes), so a kernel without it keeps one role and compiles as before."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs.mla_decode import mla_decode


def test_a_gemm_reading_a_tile_the_consumers_write_is_warp_specialised(nvrtc_check):
    art = tw.lower(mla_decode.fn(2, 128, 1024, 512, 64, num_split=4).kernels[0], target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"], ws
    assert ws["tiles"] == ["kv_tile", "k_pe_tile"]
    src = art.device_source
    consumer = src[src.index("// consumer warpgroups"):]
    # the consumers' stores of P reach the async proxy, and every consumer's, before P @ KV reads them
    write, read = consumer.index("p_tile, "), consumer.index("tw::wgmma_gemm_ss<64, 512")
    between = consumer[write:read]
    assert "tw::fence_proxy_async();" in between and "tw::sync_consumers<256>();" in between
    nvrtc_check(src, "sm_90a")


def test_no_room_for_the_ring_beside_the_other_tiles_keeps_one_role(nvrtc_check):
    # one split: the output tile (64 KB) comes on top of the query (72 KB) and two versions of the
    # cache tiles (144 KB), which the split cannot place over one another
    art = tw.lower(mla_decode.fn(2, 128, 1024, 512, 64, num_split=1), target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert not ws["applied"]
    assert "need 294944 bytes, more than the 232448 of sm_90a" in ws["reason"]
    nvrtc_check(art.device_source, "sm_90a")


def test_register_work_before_a_staged_result_keeps_the_tma_store_epilogue(nvrtc_check):
    """``acc_o /= logsum`` in registers, then ``T.copy(acc_o, O_shared); T.copy(O_shared, Output)``:
    the rescale stays ahead, and the round trip goes through a tile over the pipeline's dead tiles
    and one TMA store (the user's O_shared no longer takes bytes of its own). The MLA decodes then
    fit the split."""
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    art = tw.lower(flash_attention.fn(1, 4, 256, 64, False, block_M=64, block_N=64, num_stages=2, threads=128),
                   target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and ws["epilogue"] == "shared memory + TMA store", ws
    src = art.device_source
    consumer = src[src.index("// consumer warpgroups"):]
    rescale, store = consumer.rindex("/ logsum["), consumer.index("tw::tma_store(")
    assert rescale < store and "O_shared" not in src
    nvrtc_check(src, "sm_90a")


def _wide_decode(steps=4, heads=64, block_n=64, dim=512):
    """MLA decode's shape in small: S = Q KV^T per 64-row KV tile (a 512-column tile, two stages),
    P = S / 64 through a shared tile the consumers write, O += P KV, O / steps stored through a
    512-column shared tile: warp-specialised (its room counted without the user's o_s, which our
    tile over the dead KV ring replaces), P written by the consumers."""

    @T.prim_func
    def main(Q: T.Tensor((heads, dim), "float16"), KV: T.Tensor((steps * block_n, dim), "float16"),
             Out: T.Tensor((heads, dim), "float16")):
        with T.Kernel(1, threads=256):
            q_s = T.alloc_shared((heads, dim), "float16")
            kv_s = T.alloc_shared((block_n, dim), "float16")
            p_s = T.alloc_shared((heads, block_n), "float16")
            o_s = T.alloc_shared((heads, dim), "float16")
            acc_s = T.alloc_fragment((heads, block_n), "float32")
            acc_o = T.alloc_fragment((heads, dim), "float32")
            T.copy(Q, q_s)
            T.clear(acc_o)
            for t in T.Pipelined(steps, num_stages=2):
                T.copy(KV[t * block_n:(t + 1) * block_n, :], kv_s)
                T.gemm(q_s, kv_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(heads, block_n):
                    acc_s[i, j] = acc_s[i, j] / 64
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(heads, dim):
                acc_o[i, j] = acc_o[i, j] / steps
            T.copy(acc_o, o_s)
            T.copy(o_s, Out)

    return main


def test_a_wide_decode_is_split_and_stores_its_result_through_the_dead_ring(nvrtc_check):
    art = tw.lower(_wide_decode(), target="sm_90a")
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and ws["epilogue"] == "shared memory + TMA store", ws
    src = art.device_source
    kernel = src[src.index("__global__ void"):]
    # the user's o_s gives way to a tile over the dead KV ring, stored in one bulk copy (Out is contiguous)
    assert "tw::half* o_s" not in kernel and "tw::tma_store((&Out[0]), (&acc_o_out[0]), 65536);" in kernel
    nvrtc_check(src, "sm_90a")


def test_the_wide_decode_on_the_interpreter():
    """The tile level runs the split (roles, barriers, the staged store) against float64 numpy."""
    rng = np.random.default_rng(6)
    q = (rng.standard_normal((64, 512)) / 8).astype(np.float16)
    kv = (rng.standard_normal((256, 512)) / 8).astype(np.float16)
    out = np.zeros((64, 512), np.float16)
    tw.compile(_wide_decode(), target="cpu")(q, kv, out)
    want = np.zeros((64, 512))
    for t in range(4):
        tile = kv[t * 64:(t + 1) * 64].astype(np.float64)
        p = (q.astype(np.float64) @ tile.T / 64).astype(np.float16).astype(np.float64)
        want += p @ tile
    np.testing.assert_allclose(out.astype(np.float64), want / 4, rtol=2e-2, atol=2e-2)


def test_register_work_before_a_staged_result_on_the_interpreter():
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 256, 64)).astype(np.float16) for _ in range(3))
    kernel = tw.compile(flash_attention.fn(1, 2, 256, 64, False, block_M=64, block_N=64, num_stages=2, threads=128),
                        target="cpu", out_idx=[3])
    out = kernel(q, k, v)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / 8
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64), rtol=1e-2, atol=2e-3)
