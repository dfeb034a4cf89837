"""Shared fixtures of the workbench tests: the spec's TMA GEMMs, lowered once per variant."""

import functools
import os
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if REPO not in sys.path:  # the tests run from the source tree (nothing needs installing)
    sys.path.insert(0, REPO)

SM90 = {"kind": "cuda", "arch": "sm_90"}
GEMM_ARGS = (1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128)


@functools.cache
def lowered_gemm(builder_name: str, stages: int):
    """The spec GEMM (``matmul_tma_copy`` or ``matmul_tma_copy_store``) lowered for sm_90 with
    the analyses attached."""
    from tileworkbench.examples import gemm
    import tileworkbench as tw

    func = getattr(gemm, builder_name)(*GEMM_ARGS, stages)
    return tw.lower(func, target=SM90)


@pytest.fixture
def gemm_artifact():
    return lowered_gemm
