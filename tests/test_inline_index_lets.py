"""inline_index_lets: names for block offsets become their values; the persistent tile loop refuses
scalars it would compute once per block (passes/inline_index_lets.py, passes/rules/persistent.py)."""

import re

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples import matmul

SM90 = {"kind": "cuda", "arch": "sm_90"}


def named_offsets_gemm(M, N, K, block_M=128, block_N=256, block_K=64, dtype="float16", stages=3, threads=256,
                       reassign=False):
    """examples.matmul written with names for the tile offsets, as TileLang kernels often are."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            m0 = by * block_M
            n0 = bx * block_N
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                kk = k * block_K
                T.copy(A[m0, kk], A_shared)
                T.copy(B[kk, n0], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[m0, n0])
            if reassign:
                m0 = m0 + 1

    return main


def without_banner(source: str) -> str:
    return re.sub(r"from \S+\.py:\d+", "", source)


def test_golden_block_offsets_are_inlined_and_per_element_names_kept():
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), C: T.Tensor((256, 256), "float16")):
        with T.Kernel(4, 8, threads=128) as (bx, by):
            m0 = by * 32
            n0 = bx * 64 + 0
            first = m0 + n0  # a name built from names: inlined too
            for i, j in T.Parallel(32, 64):
                row = m0 + i  # depends on a loop variable: stays
                C[row, n0 + j] = A[row, first - m0 + j]

    art = tw.lower(main, target=SM90)
    before = art.trace.ir_after("verify_tile_ops")
    assert "m0: int32 = by * 32" in before and "first: int32 = m0 + n0" in before
    after = art.trace.ir_after("inline_index_lets")
    assert after[after.index("as (bx, by):"):] == """\
as (bx, by):
        tx = T.get_thread_binding()
        for i in T.Parallel(32):
            for j in T.Parallel(64):
                row: int32 = by * 32 + i
                C[row, bx * 64 + j] = A[row, by * 32 + bx * 64 - by * 32 + j]
"""


def test_named_block_offsets_lower_exactly_as_the_expressions():
    # Before the pass the B tile's start was just n0, which hid that it is a multiple of the
    # 128-byte panel, and kk made the loop body more than copies and gemms: the GEMM lost warp
    # specialisation and TMA and fell back to cp.async.
    for size, block, stages, threads in (((1024, 1024, 1024), (128, 256, 64), 3, 256),
                                         ((1000, 1030, 776), (128, 128, 64), 4, 128)):
        for configs in ({}, {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}):
            named = tw.lower(named_offsets_gemm(*size, *block, "float16", stages, threads), target=SM90,
                             pass_configs=configs)
            plain = tw.lower(matmul(*size, *block, "float16", "float16", stages, threads), target=SM90,
                             pass_configs=configs)
            assert without_banner(named.device_source) == without_banner(plain.device_source)
            assert without_banner(named.host_source) == without_banner(plain.host_source)
    ws = tw.lower(named_offsets_gemm(1024, 1024, 1024), target=SM90).func.attrs["warp_specialized"]
    assert ws["applied"] and ws["persistent"]["applied"]


def test_a_reassigned_scalar_keeps_one_block_per_tile():
    # A scalar declared before the loop is computed once per block; walking several tiles, a
    # block would carry m0 from one tile to the next (and had done so: every tile read A's
    # first rows, a silent wrong result).
    art = tw.lower(named_offsets_gemm(1024, 1024, 1024, reassign=True), target=SM90)
    ws = art.func.attrs["warp_specialized"]
    assert ws["applied"] and not ws["persistent"]["applied"]
    assert ws["persistent"]["reason"].startswith("m0 is re-assigned in the kernel")
    assert "rt.persistent_blocks" not in art.host_source
    assert "int m0 = (by * 128);" in art.device_source
