"""Property: TileLang's programs (``examples/tilelang_programs``, as a user calls them) at random
parameters (sizes, tiles, stages, threads, data types, the programs' own switches) either compile,
NVRTC included, or raise a CompileError that names a line: never another exception, an internal
error or a message without a line. Sweeps of this kind (1750 programs) found a trailing thread
dimension of one refused, a one-stage ring of tiles and a warp-specialised T.dynamic GEMM stopping
with internal errors; each has its own test as well."""

import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.examples.tilelang_programs import (dynamic_shape, elementwise, gemm, gemv, norms, softmax, splitk, topk,
                                                      warp_specialize)

from .harness import lowered_or_refused

EXAMPLES = 60
SIZES = [1, 3, 32, 100, 128, 256, 1000, 1024]


def _families(s) -> dict:
    """name -> (the compile function, its keyword arguments drawn with ``s``)."""
    mnk = lambda: dict(M=s(SIZES), N=s(SIZES), K=s(SIZES))  # noqa: E731
    return {
        "elementwise": lambda: (elementwise.elementwise_add.compile, dict(
            M=s(SIZES), N=s(SIZES), block_M=s([1, 16, 32, 128]), block_N=s([8, 32, 64, 256]), threads=s([32, 128, 512]),
            in_dtype=s([T.float16, T.float32, T.int32]), out_dtype=s([T.float16, T.float32]))),
        "gemm": lambda: (gemm.matmul.compile, dict(**mnk(), block_M=s([64, 128]), block_N=s([64, 128, 256]),
                                                   block_K=s([16, 32, 64]), num_stages=s([0, 1, 2, 3]))),
        "gemm_persistent": lambda: (gemm.matmul_persistent.compile, dict(
            **mnk(), block_M=s([64, 128]), block_N=s([64, 128, 256]), block_K=s([32, 64]), threads=s([128, 256]),
            num_stages=s([1, 2, 3]), sm_num=s([1, 7, 132]))),
        "gemv_splitk": lambda: (gemv.splitk_gemv.compile, dict(N=s(SIZES), K=s(SIZES), BLOCK_N=s([1, 8, 32]),
                                                               BLOCK_K=s([8, 32, 128]), reduce_threads=s([1, 8, 32]))),
        "rms_norm": lambda: (norms.rms_norm.compile, dict(M=s(SIZES), N=s(SIZES), blk_m=s([1, 2, 8]))),
        "softmax": lambda: (softmax.softmax_kernel.compile, dict(M=s(SIZES), N=s(SIZES), BLOCK_M=s([1, 2]),
                                                                 BLOCK_N=s([128, 2048, 8192]))),
        "splitk": lambda: (splitk.matmul_splitk.compile, dict(**mnk(), block_M=s([64, 128]), block_N=s([64, 128]),
                                                              block_K=s([32, 64]), split_k=s([1, 3, 4]))),
        "topk": lambda: (topk.top_k_rows.compile, dict(M=s(SIZES), N=s([8, 64, 100]), topk=s([1, 4]),
                                                       blk_m=s([1, 64]), threads=s([32, 128]))),
        "dynamic": lambda: (dynamic_shape.matmul_dynamic_mnk.compile, dict(
            block_M=s([64, 128]), block_N=s([64, 128]), block_K=s([32, 64]), trans_A=s([False, True]),
            trans_B=s([False, True]), in_dtype=T.float16, out_dtype=s([T.float16, T.float32]), accum_dtype=T.float32,
            num_stages=s([0, 1, 2, 3]), threads=s([128, 256]))),
        "ws_loops": lambda: (warp_specialize.matmul_loops_in_scopes.compile, dict(
            M=s([128, 256]), N=s([128, 256]), K=s([128, 256]), block_M=s([64, 128]), block_N=s([64, 128]),
            block_K=s([32, 64]), num_stages=s([1, 2, 3]))),
    }


# 4 stages of 128 x 128 and 128 x 256 half tiles: 384 KB of shared memory, more than the 227 KB of sm_90a
TOO_MUCH_SHARED_MEMORY = ("gemm", gemm.matmul.compile, dict(M=256, N=256, K=1024, block_M=128, block_N=256,
                                                            block_K=128, num_stages=4))


@st.composite
def programs(draw) -> tuple:
    """(name, compile function, its keyword arguments), every parameter drawn here."""
    families = _families(lambda choices: draw(st.sampled_from(choices)))
    name = draw(st.sampled_from(sorted(families)))
    return (name, *families[name]())


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_tilelang_programs_at_random_parameters_compile_or_raise_a_compile_error(monkeypatch):
    monkeypatch.setitem(os.environ, "TILEWORKBENCH_DISABLE_CACHE", "1")
    outcomes = {"compiled": 0, "refused": 0}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(programs())
    @example(TOO_MUCH_SHARED_MEMORY)  # a refusal, whatever the draws (few of them are refused since rows are padded)
    def check(drawn):
        name, compile_one, arguments = drawn
        kernel = lowered_or_refused(lambda: compile_one(**arguments), f"{name}({arguments})")
        outcomes["refused" if kernel is None else "compiled"] += 1

    check()
    assert outcomes["compiled"] > EXAMPLES // 3 and outcomes["refused"], outcomes
