"""emulate_exp2 (``tw.exp2_emulation``: one float32 exp2 in k of an unrolled loop computed on the
FMA pipe, ``tw::exp2_poly``): where it rewrites, that the emulation is accurate, that the
thread-level interpreter runs the emulated path, and that the CUDA compiles."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.interpreter.values import _exp2_poly
from tileworkbench.passes.pipeline import codegen_pass_list

FAST = {"tl.enable_fast_math": True}
EMULATE = {**FAST, "tw.exp2_emulation": 4}


@T.prim_func
def tile_exp2(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    """Each thread's 32 elements of a fragment through exp2 (an unrolled loop of 32)."""
    with T.Kernel(1, threads=128):
        frag = T.alloc_fragment((64, 64), "float32")
        T.copy(A, frag)
        for i, j in T.Parallel(64, 64):
            frag[i, j] = T.exp2(frag[i, j])
        T.copy(frag, B)


def _kernel(configs=None) -> str:
    return tw.lower(tile_exp2, target="sm_90a", pass_configs=configs).device_source.split("// ---- kernel ----")[1]


def test_the_pass_runs_only_where_asked_for_after_the_peel():
    assert "emulate_exp2" not in codegen_pass_list({})
    passes = codegen_pass_list(EMULATE)
    assert passes.index("emulate_exp2") == passes.index("peel_first_iteration") + 1
    assert "exp2_poly" not in _kernel()


def test_one_exponential_in_k_of_an_unrolled_loop_is_emulated():
    source = _kernel(EMULATE)
    line = next(ln for ln in source.splitlines() if "exp2_poly" in ln)
    assert "% 4) == 3) ? tw::exp2_poly(" in line and ": exp2f(" in line


def test_a_loop_shorter_than_k_is_left_alone():
    assert "exp2_poly" not in _kernel({**FAST, "tw.exp2_emulation": 64})


def test_it_is_asked_for_with_fast_math_only():
    with pytest.raises(tw.CompileError, match="tl.enable_fast_math"):
        _kernel({"tw.exp2_emulation": 4})


@pytest.mark.parametrize("value", [1, 65, -2, 2.5, "4", True])
def test_the_config_takes_k_from_2_to_64(value):
    with pytest.raises(tw.CompileError, match="tw.exp2_emulation"):
        _kernel({**FAST, "tw.exp2_emulation": value})


def test_the_emulation_is_within_1e_4_of_exp2():
    x = np.concatenate([np.random.default_rng(0).uniform(-125, 0, 100_000), np.linspace(-2, 2, 4001)]).astype(np.float32)
    got = _exp2_poly(x).astype(np.float64)
    want = np.exp2(x.astype(np.float64))
    assert np.max(np.abs(got / want - 1)) < 1e-4
    assert 0 <= _exp2_poly(np.float32(-np.inf)) < 2e-38 and 0 <= _exp2_poly(np.float32(-1000)) < 2e-38
    assert abs(float(_exp2_poly(np.float32(0))) - 1) < 1e-4


def test_the_thread_level_interpreter_runs_the_emulated_path():
    a = np.random.default_rng(1).uniform(-30, 2, (64, 64)).astype(np.float32)
    b = run_at_thread_level(tile_exp2, a, out_idx=[1], pass_configs=EMULATE, stage="codegen")
    exact = np.exp2(a)
    np.testing.assert_allclose(b, exact, rtol=1e-4)
    emulated = np.mean(b != exact)
    assert 0.15 < emulated < 0.3  # about one element in four takes the polynomial


def test_the_emulated_kernel_compiles(nvrtc_check):
    result = nvrtc_check(tw.lower(tile_exp2, target="sm_90a", pass_configs=EMULATE).device_source, "sm_90a")
    assert result.cubin
