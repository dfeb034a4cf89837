"""Two conditions of ``warp_specialize``: a gemm may read a shared tile the consumers write in the
loop (the MLA decode's probabilities, ``p_tile``, read by P @ KV) where each gemm completes before
the next statement; and the split needs room for every loaded tile's versions beside the kernel's
other shared tiles (it places them side by side, where the one-role pipeline may let tiles of
disjoint lifetimes share bytes), so a kernel without it keeps one role and compiles as before."""

from __future__ import annotations

import tileworkbench as tw
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
