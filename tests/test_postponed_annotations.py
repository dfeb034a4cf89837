"""Kernels in a module with ``from __future__ import annotations`` (this one): parameter annotations
are text, read by the front end after the builder has returned, so a builder's local that only an
annotation uses (``rows = 128 * blocks``, ``A: T.Tensor((rows, 64), dtype)``) is no closure variable
of the kernel. ``T.prim_func`` hands the front end the builder's locals for those names."""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError


def sized_by_a_local(blocks: int):
    rows = 128 * blocks  # read by the annotations alone

    @T.prim_func
    def main(A: T.Tensor((rows, 64), "float32"), B: T.Tensor((rows, 64), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            T.copy(A[bx * 128:(bx + 1) * 128, :], B[bx * 128:(bx + 1) * 128, :])

    return main


def test_a_builder_local_only_annotations_read_sizes_the_tensors():
    func = tw.lower(sized_by_a_local(3), target="sm_90a").func
    assert [tuple(tw.ir.const_int(s) for s in p.shape) for p in func.params] == [(384, 64), (384, 64)]


def test_the_kernel_computes_with_it(monkeypatch):
    import numpy as np

    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    a = np.random.default_rng(2).standard_normal((256, 64)).astype(np.float32)
    b = np.zeros_like(a)
    tw.compile(sized_by_a_local(2), target="cpu")(a, b)
    np.testing.assert_array_equal(a, b)


def test_a_name_defined_nowhere_is_still_unknown():
    def builder():
        @T.prim_func
        def main(A: T.Tensor((nowhere, 64), "float32")):  # noqa: F821 - the point of the test
            with T.Kernel(1, threads=128):
                T.clear(A)

        return main

    with pytest.raises(CompileError, match="unknown name 'nowhere'"):
        builder()
