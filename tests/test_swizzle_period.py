"""``codegen.cuda.split_swizzle_period``: a swizzled tile's offset printed as the terms the swizzle
reads plus whole periods of its pattern (``tw::swizzled(base, index, aligned)``), so that a loop
moving only the latter keeps the swizzle of the rest out of its body. The identity it rests on,
``swizzle(a + p) == swizzle(a) + p`` (mod 2^32) for p a multiple of 8 S bytes, checked here for
every span against a copy of ``tw::swizzle``, on random offsets; and what the split takes."""

from __future__ import annotations

import numpy as np
import pytest

from tileworkbench import dtypes
from tileworkbench.analysis.evaluate import evaluate
from tileworkbench.codegen.swizzled import split_swizzle_period
from tileworkbench.ir import nodes as ir

SPANS = (32, 64, 128, 256, 512, 1024, 2048)


def swizzle(span: int, byte_offset: int) -> int:
    """tw/common.h's ``swizzle<SPAN>`` on 32-bit unsigned offsets."""
    byte_offset &= 0xFFFFFFFF
    if span <= 128:
        return byte_offset ^ ((byte_offset >> 3) & ((span // 16 - 1) << 4))
    return byte_offset ^ (((byte_offset >> span.bit_length() - 1) & 7) << 4)


def element_bytes(span, dtype, index: int, aligned: int | None) -> int:
    """The byte offset ``tw::swizzled`` gives (two- or three-argument form)."""
    size = dtype.bits // 8
    if aligned is None:
        return swizzle(span, index * size)
    return (swizzle(span, index * size) + aligned * size) & 0xFFFFFFFF


@pytest.mark.parametrize("span", SPANS)
@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.float32, dtypes.float8_e4m3])
def test_the_split_addresses_every_element_as_the_whole_offset_does(span, dtype):
    stage, row, col, u = (ir.Var(n, dtypes.int32) for n in ("stage", "row", "col", "u"))
    period = 8 * span // (dtype.bits // 8)
    # a gather's shape: a stage and a row block (whole periods), a row and a column inside them,
    # and a constant that moves back by whole periods
    index = stage * (3 * period) + u * period + row * (span // (dtype.bits // 8)) + col - 2 * period
    swizzled, aligned = split_swizzle_period(index, span, dtype)
    assert aligned is not None
    rng = np.random.default_rng(span)
    for _ in range(300):
        env = {stage: int(rng.integers(0, 3)), u: int(rng.integers(0, 9)), row: int(rng.integers(0, 64)),
               col: int(rng.integers(0, span // (dtype.bits // 8)))}
        whole = int(evaluate(index, env))
        if whole < 0:
            continue
        assert element_bytes(span, dtype, int(evaluate(swizzled, env)), int(evaluate(aligned, env))) == \
            element_bytes(span, dtype, whole, None)


def test_only_whole_periods_leave_the_swizzle():
    row, col, k = (ir.Var(n, dtypes.int32) for n in ("row", "col", "k"))
    # 128-byte swizzle of 16-bit elements: a period is 512 elements
    swizzled, aligned = split_swizzle_period(k * 1024 + row * 64 + col * 8 + 512 - 3, 128, dtypes.float16)
    assert str(aligned) == str(ir.Const(0, dtypes.int32) + k * 1024 + 512)
    assert str(swizzled) == str(ir.Const(0, dtypes.int32) + row * 64 + col * 8 - 3)
    assert split_swizzle_period(row * 64 + k * 256, 128, dtypes.float16)[1] is None  # half a period stays in
    packed = ir.Var("i", dtypes.int32) + 4096
    assert split_swizzle_period(packed, 128, dtypes.float4_e2m1fn) == (packed, None)  # two elements a byte
