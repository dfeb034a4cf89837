"""A fragment read as the columns of a gemm's accumulator, as DeepSeek's sparse MLA reads its mask
(``mask[bi_i]`` in a loop over ``acc_s[h_i, bi_i]``, ``mask`` computed by a loop of its own from the
indices): it holds the accumulator's columns (``ir.fragment_parts.ColumnsLayout``), each thread computing
and keeping only the columns it holds (8 of 64 where a warpgroup holds 32 columns), rather than
every thread all of it. The layout's algebra; the kernel on the tile-level interpreter against
numpy; its CUDA and NVRTC; a read as columns of a fragment no tensor core lays out stays every
thread's whole, on both interpreters."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.layout import BlockedLayout, MmaAccumLayout, WgmmaAccumLayout
from tileworkbench.ir.fragment_parts import ColumnsLayout, columns_of
from tileworkbench.ir.simplify import simplify
from tileworkbench.ir.visitor import collect

from .interpreters import on_both_interpreters

BASES = [WgmmaAccumLayout((64, 64), 1, 2), WgmmaAccumLayout((128, 64), 2, 1), WgmmaAccumLayout((64, 128), 1, 1),
         MmaAccumLayout((64, 64), 2, 2), MmaAccumLayout((32, 64), 1, 4)]


def _value(e) -> int:
    e = simplify(e) if isinstance(e, ir.Expr) else e
    return int(e.value) if isinstance(e, ir.Const) else int(e)


@pytest.mark.parametrize("base", BASES, ids=lambda b: b.describe())
def test_every_thread_holds_the_columns_of_its_elements_and_one_stores_each(base):
    columns = columns_of(base)
    owners = {}
    for tid in range(base.threads):
        own = {columns.forward(tid, r)[0][0] for r in range(columns.local_size)}
        assert len(own) == columns.local_size  # no slot twice
        for j in range(base.local_size):
            (_, col), _ = base.forward(tid, j)
            assert columns.forward(tid, _value(columns.slot_of(j)))[0][0] == col
        assert own == {base.forward(tid, j)[0][1] for j in range(base.local_size)}
        if _value(columns.owner(ir.const(tid))):
            for col in own:
                owners[col] = owners.get(col, 0) + 1
    assert owners == {c: 1 for c in range(base.shape[1])}


def test_only_tensor_core_accumulators_lay_out_columns():
    with pytest.raises(ValueError, match="tensor-core accumulator"):
        columns_of(BlockedLayout((64, 64), 128))


LIMIT, CHUNKS = 100, 4


def masked_scores(threads: int):
    @T.prim_func
    def kernel(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((CHUNKS * 64, 64), "float16"),
               Idx: T.Tensor((CHUNKS * 64,), "int32"), S: T.Tensor((64, CHUNKS * 64), "float32")):
        """Each chunk's scores ``Q @ K_c^T``, minus 1e4 where the key's index is past LIMIT."""
        with T.Kernel(1, threads=threads):
            q = T.alloc_shared((64, 64), "float16")
            k_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            mask = T.alloc_fragment((64,), "bool")
            T.copy(Q, q)
            for c in T.serial(CHUNKS):
                for j in T.Parallel(64):
                    mask[j] = Idx[c * 64 + j] <= LIMIT
                for i, j in T.Parallel(64, 64):
                    acc[i, j] = T.if_then_else(mask[j], 0.0, -1e4)
                T.copy(K[c * 64:(c + 1) * 64, :], k_s)
                T.gemm(q, k_s, acc, transpose_B=True)
                T.copy(acc, S[:, c * 64:(c + 1) * 64])
    return kernel


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((64, 64)).astype(np.float16)
    k = rng.standard_normal((CHUNKS * 64, 64)).astype(np.float16)
    idx = rng.integers(0, 2 * LIMIT, CHUNKS * 64).astype(np.int32)
    return q, k, idx


def expected(q, k, idx):
    return q.astype(np.float64) @ k.astype(np.float64).T + np.where(idx <= LIMIT, 0.0, -1e4)[None, :]


@pytest.mark.parametrize("threads", [128, 256])
def test_masked_scores_on_the_tile_level_interpreter(threads):
    q, k, idx = inputs()
    s = np.zeros((64, CHUNKS * 64), np.float32)
    tw.compile(masked_scores(threads), target="cpu")(q, k, idx, s)
    np.testing.assert_allclose(s, expected(q, k, idx), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("threads, held", [(128, 16), (256, 8)])
def test_each_thread_computes_only_the_columns_it_holds(threads, held, nvrtc_check):
    artifact = tw.lower(masked_scores(threads), target="sm_90a")
    (mask,) = [a.buffer for a in collect(artifact.func.body, ir.Allocate) if a.buffer.name == "mask"]
    assert isinstance(mask.attrs["layout"], ColumnsLayout) and tuple(mask.static_shape()) == (held,)
    kernel = artifact.device_source.split("// ---- kernel ----")[1]
    assert f"bool mask[{held}];" in kernel and kernel.count("Idx[") == 1
    nvrtc_check(artifact.device_source, "sm_90a")


@T.prim_func
def masked_rows(X: T.Tensor((64, 64), "float32"), Idx: T.Tensor((64,), "int32"), Y: T.Tensor((64, 64), "float32")):
    """The same mask over a fragment no gemm lays out: every thread holds it whole, as before."""
    with T.Kernel(1, threads=128):
        x = T.alloc_fragment((64, 64), "float32")
        mask = T.alloc_fragment((64,), "bool")
        T.copy(X, x)
        for j in T.Parallel(64):
            mask[j] = Idx[j] <= LIMIT
        for i, j in T.Parallel(64, 64):
            x[i, j] = T.if_then_else(mask[j], x[i, j], -x[i, j])
        T.copy(x, Y)


@on_both_interpreters
def test_columns_of_a_blocked_fragment_stay_every_threads_whole(run):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    idx = rng.integers(0, 2 * LIMIT, 64).astype(np.int32)
    y = np.zeros_like(x)
    run(masked_rows, x, idx, y)
    np.testing.assert_array_equal(y, np.where(idx[None, :] <= LIMIT, x, -x))
    kernel = tw.lower(masked_rows, target="sm_90a").device_source.split("// ---- kernel ----")[1]
    assert "bool mask[64];" in kernel


def test_a_column_written_in_a_loop_over_the_accumulator_is_refused_at_its_line(tmp_path):
    """Every row's threads would write ``mask[j]``: refused where it is written, with a caret."""
    from tileworkbench.errors import CompileError

    from .kernel_files import import_kernel_file

    source = '''import tileworkbench.language as T


@T.prim_func
def main(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64), "float16"), S: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128):
        q = T.alloc_shared((64, 64), "float16")
        k = T.alloc_shared((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        mask = T.alloc_fragment((64,), "float32")
        T.copy(Q, q)
        T.copy(K, k)
        T.clear(acc)
        T.gemm(q, k, acc, transpose_B=True)
        for i, j in T.Parallel(64, 64):
            mask[j] = acc[i, j]
        for i, j in T.Parallel(64, 64):
            acc[i, j] = acc[i, j] * mask[j]
        T.copy(acc, S)
'''
    main = import_kernel_file(tmp_path, source).main
    with pytest.raises(CompileError, match=r"kernel_file.py:16: fragment mask is written in a loop over more than its "
                                           r"own indices: every thread holding a column would write it") as err:
        tw.lower(main, target="sm_90a")
    assert "mask[j] = acc[i, j]\n" in str(err.value) and "^" in str(err.value)
