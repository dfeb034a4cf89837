"""Two pipelined loops that fill the same shared tiles (block-causal attention's backward refills
its ``do`` tile in a masked and an unmasked loop): ``inject_software_pipeline`` versions the tiles
in each loop, and both loops must use one allocation of them. Each loop's versioned tile was its
own buffer, only the last allocated: the first loop's accesses were printed without the tile's
swizzle while its wgmma read the tile swizzled (a wrong product with no error), or under a C++
keyword's name NVRTC refused (``do``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.errors import CompileError
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect


def two_loops(first_stages=2, second_stages=2):
    """C = sum over 4 row blocks of A_blk^T B_blk, blocks 0-1 in one pipelined loop and 2-3 in the
    next, both through the same shared tiles (``second_stages`` None: the second loop is a
    ``T.serial`` one, and the first alone could be warp-specialised)."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for s in T.Pipelined(2, num_stages=first_stages):
                T.copy(A[s * 64:(s + 1) * 64, :], a)
                T.copy(B[s * 64:(s + 1) * 64, :], b)
                T.gemm(a, b, acc, transpose_A=True)
            if second_stages is None:
                for s in T.serial(2):
                    T.copy(A[128 + s * 64:128 + (s + 1) * 64, :], a)
                    T.copy(B[128 + s * 64:128 + (s + 1) * 64, :], b)
                    T.gemm(a, b, acc, transpose_A=True)
            else:
                for s in T.Pipelined(2, num_stages=second_stages):
                    T.copy(A[128 + s * 64:128 + (s + 1) * 64, :], a)
                    T.copy(B[128 + s * 64:128 + (s + 1) * 64, :], b)
                    T.gemm(a, b, acc, transpose_A=True)
            T.copy(acc, C)

    return main


def test_a_tile_used_after_the_loop_keeps_the_loop_from_warp_specialisation():
    """The warp-specialised loop's tiles become versions only its roles use: a serial loop after it
    over the same tiles named the old, unallocated tile and wrote it unswizzled while its wgmma
    read it swizzled (a wrong answer; the IR verifier, on in the tests, called it an internal
    error). Such a loop is software-pipelined instead, the serial loop on version 0."""
    art = tw.lower(two_loops(2, None), target="sm_90a")
    assert art.func.attrs["warp_specialized"] == {"applied": False,
                                                 "reason": "tile a is also used outside the pipelined loop"}
    body = art.device_source.split("---- kernel ----")[1]
    assert not re.search(r"&[ab]\[", body), body
    compile_check(art.device_source, "sm_90a")


def _shared_allocations(func):
    return [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.scope == "shared"]


@pytest.mark.parametrize("stages", [(2, 2), (2, 3), (3, 2)])
def test_both_loops_use_one_allocation_of_each_tile(stages):
    art = tw.lower(two_loops(*stages), target="sm_90a")
    tiles = {b.name: b for b in _shared_allocations(art.func) if b.name in ("a", "b")}
    assert sorted(tiles) == ["a", "b"]
    assert all(t.attrs["versions"] == max(stages) for t in tiles.values())
    allocated = {id(b) for b in tiles.values()}
    for node in collect(art.func.body, (ir.Region, ir.BufferLoad, ir.BufferStore)):
        if node.buffer.name in ("a", "b"):
            assert id(node.buffer) in allocated, "an access names a tile no allocation declares"
    body = art.device_source.split("---- kernel ----")[1]
    # every access of the tiles goes through their swizzle: none indexes the raw pointer
    assert not re.search(r"&[ab]\[", body), body
    compile_check(art.device_source, "sm_90a")


@pytest.mark.parametrize("stages", [(2, 1), (0, 3), (3, 0)])
def test_a_plain_loop_beside_a_pipelined_one_uses_the_first_version(stages):
    """One loop pipelined, the other not: the plain loop overwrites each tile whole before it reads
    it, so it uses version 0 of the one allocation (it was refused as a use outside the pipelined
    loop)."""
    art = tw.lower(two_loops(*stages), target="sm_90a")
    tiles = [b for b in _shared_allocations(art.func) if b.name in ("a", "b")]
    assert len(tiles) == 2 and all(t.attrs["versions"] == max(stages) for t in tiles)
    body = art.device_source.split("---- kernel ----")[1]
    assert not re.search(r"&[ab]\[", body), body
    compile_check(art.device_source, "sm_90a")


def test_a_plain_loop_reading_what_the_pipelined_loop_left_is_still_refused():
    """Reading the tile before overwriting it would read whichever version the pipelined loop
    wrote last, not version 0: refused, as any use outside the loop."""

    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for s in T.Pipelined(2, num_stages=2):
                T.copy(A[s * 64:(s + 1) * 64, :], a)
                T.gemm(a, a, acc, transpose_A=True)
            for s in T.serial(2):
                T.gemm(a, a, acc, transpose_A=True)
                T.copy(A[128 + s * 64:128 + (s + 1) * 64, :], a)
            T.copy(acc, C)

    with pytest.raises(CompileError, match="a is filled inside a pipelined loop .* and also used outside that loop"):
        tw.lower(main, target="sm_90a")


@pytest.mark.parametrize("stages", [(2, 2), (2, 3), (2, 1), (0, 3), (2, None), (3, None)])
def test_two_loops_compute_the_sum_of_both(stages, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal((256, 64)).astype(np.float16) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    tw.compile(two_loops(*stages), target="cpu")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-3, atol=1e-2)


def _barrier_in_two_loops():
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            mbar = T.alloc_barrier(128)
            T.clear(acc)
            for s in T.Pipelined(2, num_stages=2):
                T.tma_copy(A[s * 64, 0], a, barrier=mbar)
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, s % 2)
                T.gemm(a, a, acc, transpose_A=True)
            for s in T.Pipelined(2, num_stages=2):
                T.tma_copy(A[128 + s * 64, 0], a, barrier=mbar)
                T.barrier_arrive(mbar)
                T.barrier_wait(mbar, s % 2)
                T.gemm(a, a, acc, transpose_A=True)
            T.copy(acc, C)

    return main


def test_a_barrier_two_pipelined_loops_arrive_on_is_refused():
    with pytest.raises(CompileError, match=r"barrier mbar is arrived on in 2 pipelined loops \(lines \d+, \d+\).*"
                                           r"give each loop a barrier of its own"):
        tw.lower(_barrier_in_two_loops(), target="sm_90a")
