"""Fragment results stored two at a time (``tw::store_pair``): float32 pairs into shared tiles too
(one 8-byte store where two 4-byte ones met the same banks twice), and pairs under a condition on
their row (TileLang's sparse MLA backward stores half of its accumulator's rows at a time). The
lowered stores are evaluated for every thread (the thread-level interpreter does not run the
mma.sync that fills the accumulator), the program runs on the tile-level interpreter against numpy
and compiles with NVRTC where it is here; tests/gpu/test_pair_stores_gpu.py runs it on the GPU."""

import re

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.analysis.evaluate import evaluate
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import MmaAccumLayout
from tileworkbench.ir.visitor import collect

SM90 = {"kind": "cuda", "arch": "sm_90"}


def split_store(rows=32, cols=128, parts=2, dtype="float16", threads=128, out_dtype="float32", column_step=1):
    """``acc = A @ B`` (mma.sync: ``rows`` is under a warpgroup's 64), then ``parts`` rounds that each
    store ``rows / parts`` of the accumulator's rows (every ``column_step``-th column) into a shared
    tile and copy them out."""
    part = rows // parts

    @T.prim_func
    def main(A: T.Tensor((rows, 64), dtype), B: T.Tensor((64, cols), dtype),
             C: T.Tensor((rows, cols), out_dtype)):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((rows, 64), dtype)
            B_s = T.alloc_shared((64, cols), dtype)
            part_s = T.alloc_shared((part, cols), out_dtype)
            acc = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in range(parts):
                for i, j in T.Parallel(rows, cols):
                    if i < part and j % column_step == 0:
                        part_s[i, j] = acc[i + s * part, j]
                T.copy(part_s, C[s * part, 0])
    return main


def _operands(rng, rows=32, cols=128):
    a = rng.standard_normal((rows, 64)).astype(np.float16)
    b = rng.standard_normal((64, cols)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _device_body(art) -> str:
    return art.device_source.split("---- kernel ----")[1]


def test_rows_under_a_condition_are_stored_in_pairs_behind_it():
    art = tw.lower(split_store(), target=SM90)
    body = _device_body(art)
    stores = re.findall(r"if \(([^\n]*)\) \{\n\s*tw::store_pair\(\(&part_s\[", body)
    assert stores, body
    assert "- (s * 16)) >= 0) && (" in stores[0] and "- (s * 16)) < 16)" in stores[0]  # the row's test, whole
    assert not re.search(r"part_s\[[^\n]*\] = acc", body)  # no element stores left


def test_each_round_stores_its_rows_once_from_the_elements_that_hold_them():
    """The lowered pair stores, evaluated for every thread, round and pair: round ``s`` writes each
    element of the tile's 16 rows once, from the accumulator element of row ``r + 16 s`` (the
    mma.sync layout's ``forward``), and nothing else."""
    art = tw.lower(split_store(), target=SM90)
    (loop,) = [f for f in collect(art.func.body, ir.For) if f.annotations.get("pairs")]
    guard, call = loop.body.cond, loop.body.then_body.call
    names = {v.name: v for v in collect(loop, ir.Var)}
    tx, s_var, jj = names["tx"], names["s"], loop.var
    layout = MmaAccumLayout((32, 128), 1, 4)
    tid = np.arange(128)
    for s in range(2):
        written = {}
        for j in range(loop.extent.value):
            env = {tx: tid, s_var: s, jj: j}
            keep = np.broadcast_to(evaluate(guard, env), tid.shape).astype(bool)
            row, col = (np.broadcast_to(evaluate(i, env), tid.shape) for i in call.args[0].args[0].indices)
            for half, value in enumerate(call.args[1:]):
                element = int(evaluate(value.indices[0], env))
                (lrow, lcol), _ = layout.forward(tx, ir.const(element))
                held_row, held_col = (np.broadcast_to(evaluate(x, {tx: tid}), tid.shape) for x in (lrow, lcol))
                for t in np.flatnonzero(keep):
                    key = (int(row[t]), int(col[t]) + half)
                    assert key not in written, f"round {s}: {key} written twice"
                    written[key] = (int(held_row[t]), int(held_col[t]))
        assert sorted(written) == [(r, c) for r in range(16) for c in range(128)]
        assert all(held == (r + 16 * s, c) for (r, c), held in written.items())


@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_the_split_store_computes_the_product_on_the_tile_interpreter(out_dtype):
    a, b, ref = _operands(np.random.default_rng(3))
    kernel = tw.compile(split_store(out_dtype=out_dtype), target="cpu")
    c = np.full((32, 128), np.nan, np.float32 if out_dtype == "float32" else np.float16)
    kernel(a, b, c)
    tol = 1e-4 if out_dtype == "float32" else 2e-2
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=tol, atol=tol)


def test_a_condition_on_the_column_keeps_element_stores():
    """A pair's two elements are neighbouring columns: a test of the column may differ between them."""
    body = _device_body(tw.lower(split_store(column_step=2), target=SM90))
    assert "tw::store_pair((&part_s" not in body and re.search(r"part_s\[[^\n]*\] = acc", body)


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_the_split_store_compiles_for_sm90a():
    art = tw.lower(split_store(), target=SM90, enable_device_compile=True)
    assert art.nvrtc.spills_bytes == 0


def _stored_through_a_view():
    """A gemm's accumulator stored in pairs into a 2-D view of the 4-D output (TileLang's
    convolution: ``out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)``)."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
             Out: T.Tensor((2, 2, 16, 64), "float16")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            out_flat = T.Tensor((64, 64), "float16", Out.data)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.copy(acc, out_flat[0, 0])

    return main


def test_pairs_stored_into_a_view_made_in_the_kernel_name_the_view_its_allocation_declares(monkeypatch):
    """``linearize_accesses`` makes the view's pointer flat, which makes it a new buffer; the base
    of the pair stores named the old one, which nothing declared any more (the generated CUDA was
    right by name; the IR verifier, on in the tests and at the end of every compile, refused it)."""
    monkeypatch.setenv("TILEWORKBENCH_VERIFY_IR", "1")
    art = tw.lower(_stored_through_a_view(), target="sm_90a")
    body = _device_body(art)
    assert re.search(r"tw::half\* out_flat_pairs = &out_flat\[", body), body
