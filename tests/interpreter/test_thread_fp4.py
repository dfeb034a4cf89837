"""Packed FP4 at the thread level: tiles holding two values a byte in the shared arena (read a
nibble at a time, written by whole bytes only), vector copies between packed tiles and tensors, and
``tw::store_pair*`` (two neighbouring results in one store: for FP4 one byte). Before session 46 the
thread-level interpreter refused all three, so the layouts that make FP4 stores whole bytes
(``infer_fragment_layouts``' runs of two) were checked only on the tile level, which has no threads."""

from __future__ import annotations

import numpy as np
import pytest

from tileworkbench.errors import KernelRuntimeError
from tileworkbench.interpreter.threads import ThreadKernel
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect

from tests.fp4_programs import QUANTIZE, QUANTIZE_STAGED
from tests.tilelang_compat.kernel_files import import_kernel_file, main_with

ml_dtypes = pytest.importorskip("ml_dtypes")


def _packed(values: np.ndarray) -> np.ndarray:
    codes = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    return (codes[:, 0::2] & 0xF) | (codes[:, 1::2] << 4)


def _quantize_input():
    return (np.random.default_rng(7).standard_normal((64, 32)) * 4).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("stage", ["lowered", "codegen"])
@pytest.mark.parametrize("program", [QUANTIZE, QUANTIZE_STAGED], ids=["plain", "staged"])
def test_a_quantised_tile_is_stored_a_byte_a_pair(tmp_path, program, stage):
    main = import_kernel_file(tmp_path, program, "quantize").main
    x = _quantize_input()
    q = np.zeros((64, 16), np.uint8)
    ThreadKernel.of(main, stage=stage)(x, q)
    np.testing.assert_array_equal(q, _packed(np.clip(x.astype(np.float32), -6, 6)))


@pytest.mark.parametrize("stage", ["lowered", "codegen"])
def test_packed_tiles_move_by_threads_16_bytes_at_a_time(tmp_path, stage):
    kernel = main_with(tmp_path, "A: T.Tensor((64, 64), T.float4_e2m1fn), Y: T.Tensor((64, 64), 'float32')",
                       "S = T.alloc_shared((32, 64), T.float4_e2m1fn)\n"
                       "for r in T.serial(2):\n"
                       "    T.copy(A[r * 32, 0], S, disable_tma=True)\n"
                       "    for i, j in T.Parallel(32, 64):\n"
                       "        Y[r * 32 + i, j] = S[i, j]".replace("\n", "\n        "))
    codes = np.random.default_rng(5).integers(0, 256, (64, 32), dtype=np.uint8)
    y = np.zeros((64, 64), np.float32)
    ThreadKernel.of(kernel, stage=stage)(codes, y)
    values = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(64, 64).astype(np.uint8)
    np.testing.assert_array_equal(y, values.view(ml_dtypes.float4_e2m1fn).astype(np.float32))


def _shifted_pair_stores(kernel: ThreadKernel) -> ThreadKernel:
    """``kernel`` with each ``tw::store_pair_e2m1(&y[i], ...)`` moved to ``&y[i + 1]``: half a byte in."""
    for call in collect(kernel.func.body, ir.Call):
        if call.name == "tw::store_pair_e2m1":
            load = call.args[0].args[0]
            shifted = ir.BufferLoad(load.buffer, (*load.indices[:-1], load.indices[-1] + 1), load.dtype)
            object.__setattr__(call, "args", (ir.Call("address_of", (shifted,), call.args[0].dtype), *call.args[1:]))
    return kernel


def test_a_pair_store_half_a_byte_in_is_an_error(tmp_path):
    kernel = _shifted_pair_stores(ThreadKernel.of(import_kernel_file(tmp_path, QUANTIZE, "quantize").main))
    with pytest.raises(KernelRuntimeError, match=r"access of packed FP4 y_shared at element \d*[13579], half a byte in"):
        kernel(_quantize_input(), np.zeros((64, 16), np.uint8))

