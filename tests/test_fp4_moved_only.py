"""FP4 data is only moved: the generated code has no FP4 arithmetic (sm_90a converts no float to or
from e2m1, and a packed element is half a byte), so reading or writing an FP4 element, and every
tile operation but a copy on FP4 tiles, is a CompileError at its line. Before, a float written into
an FP4 fragment became its integer part as a byte, and an FP4 code read as a float its integer
value: silently wrong. And a load into an unpacked tile is always a tensor-map copy, the only one
that unpacks (a contiguous region had taken a descriptorless bulk copy, which moves the packed
bytes as they are)."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench import dtypes
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.errors import CompileError


def _kernel(tmp_path, body: str):
    path = tmp_path / "fp4_kernel.py"
    path.write_text("import tileworkbench.language as T\n\n\n@T.prim_func\n"
                    "def main(X: T.Tensor((64, 64), 'float32'), A: T.Tensor((64, 64), T.float4_e2m1fn)):\n"
                    "    with T.Kernel(1, threads=128) as bx:\n" + "".join(f"        {line}\n" for line in body.splitlines()))
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own test kernel
    return namespace["main"]


@pytest.mark.parametrize("body, message, line", [
    ("y = T.alloc_fragment((64, 64), T.float4_e2m1fn)\nfor i, j in T.Parallel(64, 64):\n    y[i, j] = X[i, j]",
     "y holds FP4 values, and its elements are read or written here", 9),
    ("for i, j in T.Parallel(64, 64):\n    X[i, j] = A[i, j]", "A holds FP4 values", 8),
    ("S = T.alloc_shared((64, 64), T.float4_e2m1_unpacked)\nT.copy(A, S, prefer_instruction='tma')\n"
     "for i, j in T.Parallel(64, 64):\n    X[i, j] = S[i, j]", "S holds FP4 values", 10),
    ("S = T.alloc_shared((64, 64), T.float4_e2m1fn)\nT.fill(S, 0)", "T.fill on S, which holds FP4 values", 8),
    ("S = T.alloc_shared((64, 64), T.float4_e2m1fn)\nm = T.alloc_fragment((64,), T.float4_e2m1fn)\n"
     "T.copy(A, S, prefer_instruction='tma')\nT.reduce_max(S, m, dim=1)", "on S, which holds FP4 values", 10),
    ("for i, j in T.Parallel(64, 64):\n    X[i, j] = T.cast(T.cast(X[i, j], T.float4_e2m1fn), 'float32')",
     "has type float4_e2m1fn here", 8),
])
def test_computing_with_fp4_values_is_refused_at_its_line(tmp_path, body, message, line):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(_kernel(tmp_path, body), target="cuda")
    assert f"fp4_kernel.py:{line}" in str(info.value) and "only moved" in str(info.value)


def test_a_contiguous_load_into_an_unpacked_tile_takes_a_tensor_map(tmp_path):
    artifact = tw.lower(_kernel(tmp_path, "S = T.alloc_shared((64, 64), T.float4_e2m1_unpacked)\n"
                                          "T.copy(A, S, prefer_instruction='tma')"), target="cuda")
    assert "tw::tma_load(A_desc" in artifact.kernel_source
    assert [d.data_type for d in artifact.func.attrs["tma_descriptors"]] == [dtypes.float4_e2m1_unpacked.tma_code]
    compile_check(artifact.kernel_source, "sm_90a")
