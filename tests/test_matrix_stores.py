"""Accumulators to shared tiles with stmatrix (tw::store_matrix_x4): the layout's row starts, the
pass's choice, the simplifier rule and the code generator's hoisted per-thread offset."""

import re

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.examples import matmul_tma_copy
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import WgmmaAccumLayout
from tileworkbench.ir.simplify import simplify

SM90 = {"kind": "cuda", "arch": "sm_90"}
WS_OFF = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def _int(expr) -> int:
    value = simplify(expr, {})
    assert isinstance(value, ir.Const), value
    return value.value


@pytest.mark.parametrize("shape, warpgroups, n_groups", [((64, 32), 1, 1), ((128, 64), 2, 1), ((128, 48), 1, 1),
                                                       ((64, 128), 1, 2), ((64, 256), 1, 2), ((128, 128), 2, 2)])
def test_stmatrix_puts_every_element_where_the_layout_says(shape, warpgroups, n_groups):
    """Replay stmatrix.x4 for every warp and store group: lane l addresses row l % 8 of matrix
    l / 8 (matrix_row), and lane l's register k (its elements 8 g + 2k, 8 g + 2k + 1) lands in
    row l / 4, columns 2 (l % 4) + e of matrix k. That must be where forward() puts them."""
    layout = WgmmaAccumLayout(shape, warpgroups, n_groups)
    assert layout.matrix_groups == layout.local_size // 8
    for warp in range(layout.threads // 32):
        for group in range(layout.matrix_groups):
            starts = [tuple(_int(x) for x in layout.matrix_row(ir.const(warp * 32 + lane), ir.const(group)))
                      for lane in range(32)]
            for lane in range(32):
                tid = ir.const(warp * 32 + lane)
                for k in range(4):
                    row, col = starts[8 * k + lane // 4]
                    for e in range(2):
                        (frow, fcol), _ = layout.forward(tid, ir.const(group * 8 + 2 * k + e))
                        assert (row, col + 2 * (lane % 4) + e) == (_int(frow), _int(fcol))


def test_no_matrix_groups_where_n_is_not_a_multiple_of_16():
    assert WgmmaAccumLayout((64, 24), 1).matrix_groups is None


def _kernel_body(art) -> str:
    return art.device_source.split("---- kernel ----")[1]


def test_the_spec_gemm_stores_its_accumulators_with_stmatrix():
    art = tw.lower(matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 2),
                   target=SM90, pass_configs=WS_OFF)
    body = _kernel_body(art)
    assert "tw::store_pair" not in body
    # 128 accumulators a thread: 16 stmatrix.x4, indexed by one per-thread offset plus a constant
    loop = re.search(r"const int (C_local_out_thread) = (.*);\n\s*#pragma unroll\n\s*for \(int mm = 0; mm < 16; \+\+mm\) \{\n"
                     r"\s*tw::store_matrix_x4\(\(&tw::swizzled<tw::half, 128>\(C_local_out, \(C_local_out_thread \+ (.*)\)\)\), "
                     r"C_local\[\(mm \* 8\)\]", body)
    assert loop, body[body.index("tw::fence_proxy_async"):][:800]
    assert "mm" not in loop.group(2) and "tx" not in loop.group(3)
    loops = [f for f in _fors(art.func) if f.annotations.get("matrices")]
    assert len(loops) == 1 and loops[0].kind == "unrolled"


def test_the_pass_config_keeps_paired_stores():
    art = tw.lower(matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 2),
                   target=SM90, pass_configs={**WS_OFF, tw.PassConfigKey.TW_DISABLE_MATRIX_STORES: True})
    body = _kernel_body(art)
    assert "tw::store_matrix_x4" not in body and "tw::store_pair((&tw::swizzled<tw::half, 128>(C_local_out, (C_local_out_thread + " in body


def _gemm_copying(guard):
    """A GEMM whose accumulator is copied to shared memory under a condition: ``guard`` is "data"
    (a value every thread reads alike), "below 64" (two whole warps) or "even" (every other thread)."""

    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding()
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            C_s = T.alloc_shared((128, 128), "float16")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            if guard == "even":
                if tid % 2 == 0:
                    T.copy(C_l, C_s)
            elif guard == "below 64":
                if tid < 64:
                    T.copy(C_l, C_s)
            else:
                if A[0, 0] > 0:
                    T.copy(C_l, C_s)
            T.copy(C_s, C[0, 0])

    return main


def test_stmatrix_under_a_condition_every_thread_shares():
    body = _kernel_body(tw.lower(_gemm_copying("data"), target=SM90))
    assert "tw::store_matrix_x4(" in body and "tw::store_pair(" not in body


@pytest.mark.parametrize("guard, why", [
    ("even", "may differ between the block's threads"),
    ("below 64", r"fragment C_l is used by 128 threads at line \d+ and by 64 here"),
])
def test_a_copy_under_a_condition_on_the_thread_is_refused(guard, why):
    """Each thread stores its own part of the accumulator: under `tid % 2 == 0` half of it would be
    stored (stmatrix or not), where the tile-level interpreter copies all of it; `tid < 64` is a
    scope of two warps, which cannot hold the 128 threads' accumulator."""
    with pytest.raises(CompileError, match=why):
        tw.lower(_gemm_copying(guard), target=SM90)


def _fors(func):
    from tileworkbench.ir.visitor import collect

    return collect(func.body, ir.For)


def test_simplifier_splits_a_column_into_its_loop_and_thread_parts_under_a_panel():
    i, lane = ir.Var("i"), ir.Var("lane")
    ranges = {i: (0, 7), lane: (0, 31)}
    col = i * 16 + (lane // 16) * 8  # thread part < 16: a 64-wide panel never splits it
    assert str(simplify(col // 64, ranges)) == str(simplify((i * 16) // 64, ranges))
    assert str(simplify(col % 64, ranges)) == str(simplify((i * 16) % 64 + (lane // 16) * 8, ranges))
    wide = i * 16 + lane  # lane reaches 31: no proper split, the expression stays whole
    assert "lane" in str(simplify(wide // 64, ranges)) and "i" in str(simplify(wide // 64, ranges))
    # the rewrite is exact wherever it applies
    for iv in range(8):
        for lv in range(32):
            env = {i: ir.const(iv), lane: ir.const(lv)}
            from tileworkbench.ir.visitor import substitute
            for e, want in ((col // 64, (iv * 16 + (lv // 16) * 8) // 64), (col % 64, (iv * 16 + (lv // 16) * 8) % 64)):
                assert _int(substitute(simplify(e, ranges), env)) == want


def _gemm_storing(column):
    """A GEMM whose accumulator element (i, j) goes to C_s[i, column(j)] of a 128 x 264 tile."""

    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 264), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            C_s = T.alloc_shared((128, 264), "float16")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            for i, j in T.Parallel(128, 128):
                C_s[i, column(j)] = C_l[i, j]
            T.copy(C_s, C[0, 0])

    return main


@pytest.mark.parametrize("column, store", [
    (lambda j: j + 8, "tw::store_matrix_x4"),  # whole 16-byte rows
    (lambda j: j + 2, "tw::store_pair"),  # pairs stay neighbours, but stmatrix rows would not be 16-byte aligned
    (lambda j: j * 2, None),  # neighbours in the fragment are two apart in the tile: one element a store
])
def test_wide_stores_only_where_the_elements_are_neighbours_in_the_tile(column, store):
    body = _kernel_body(tw.lower(_gemm_storing(column), target=SM90))
    stores = set(re.findall(r"tw::store_(?:pair|matrix_x4)\(", body))
    assert stores == ({f"{store}("} if store else set())


# Masks a fragment is stored through (linear attention's causal ``row >= col`` first), and what
# each keeps
MASKS = {"lower": lambda r, c: r >= c, "band": lambda r, c: r < c + 8, "checker": lambda r, c: (r + c) % 2 == 0,
         "columns": lambda r, c: c % 3 != 1}


def masked_scores(mask: str = "lower"):
    """Linear attention's intra-chunk scores: ``S = Q K^T`` kept where ``MASKS[mask]`` holds
    (``row >= col``: TileLang's ``example_linear_attn_fwd``), stored to shared memory through the
    masked expression."""

    @T.prim_func
    def main(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64), "float16"), S: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            q = T.alloc_shared((64, 64), "float16")
            k = T.alloc_shared((64, 64), "float16")
            s = T.alloc_fragment((64, 64), "float32")
            s_shared = T.alloc_shared((64, 64), "float16")
            T.copy(Q[0, 0], q)
            T.copy(K[0, 0], k)
            T.gemm(q, k, s, clear_accum=True, transpose_B=True)
            for row, col in T.Parallel(64, 64):
                if mask == "lower":
                    s_shared[row, col] = T.if_then_else(row >= col, s[row, col], 0)
                elif mask == "band":
                    s_shared[row, col] = T.if_then_else(row < col + 8, s[row, col], 0)
                elif mask == "checker":
                    s_shared[row, col] = T.if_then_else((row + col) % 2 == 0, s[row, col], 0)
                else:
                    s_shared[row, col] = T.if_then_else(col % 3 != 1, s[row, col], 0)
            T.copy(s_shared, S[0, 0])

    return main


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_a_masked_store_reads_each_elements_own_row_and_column(mask):
    """stmatrix's eight values are eight elements of the fragment: a value that uses the loop's
    variables beside the fragment (a mask on ``row`` and ``col``) uses each element's own
    coordinates (the generated CUDA named the loop's variables, undefined there, and NVRTC refused
    it). Every thread's every value, evaluated, reads the fragment element stmatrix puts at its
    place and keeps it exactly where the mask holds (the thread-level interpreter runs neither wgmma
    nor stmatrix; the GPU test runs them)."""
    from tileworkbench.backend.nvrtc import compile_check
    from tileworkbench.ir.visitor import collect, substitute

    art = tw.lower(masked_scores(mask), target=SM90)
    body = _kernel_body(art)
    assert "tw::store_matrix_x4(" in body
    assert not re.search(r"\brow(_\d+)?\b|\bcol(_\d+)?\b", body), "the loop's variables are left in the store"
    compile_check(art.device_source, "sm_90a")
    (loop,) = [f for f in _fors(art.func) if f.annotations.get("matrices")]
    layout = WgmmaAccumLayout((64, 64), 1, 1)
    tx = art.func.launch.thread_var
    kept = 0
    for t in range(128):
        for group in range(loop.extent.value):
            env = {tx: ir.const(t), loop.var: ir.const(group)}
            for e, value in enumerate(loop.body.call.args[1:]):
                (frow, fcol), _ = layout.forward(ir.const(t), ir.const(group * 8 + e))
                place = (_int(frow), _int(fcol))
                cond = simplify(substitute(value.cond, env), {})
                assert isinstance(cond, ir.Const), cond
                assert bool(cond.value) == MASKS[mask](*place), (t, group, e)
                (element,) = collect(value.a, ir.BufferLoad)  # the fragment element this value stores
                (erow, ecol), _ = layout.forward(ir.const(t), simplify(substitute(element.indices[-1], env), {}))
                assert (_int(erow), _int(ecol)) == place, (t, group, e)
                kept += bool(cond.value)
    assert kept == sum(MASKS[mask](r, c) for r in range(64) for c in range(64))
