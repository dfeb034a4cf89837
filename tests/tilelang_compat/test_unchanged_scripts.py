"""Three things TileLang's unchanged example scripts met under ``python -m tileworkbench.as_tilelang``
on the H100 (2026-12-06): ``blocksparse_gemm/example_blocksparse_gemm.py`` compiles its default
config with ``f.compile(M=..., block_M=128, ...)`` on an ``@autotune``d function, which TileLang
compiles as given and we tuned over all 216 configs; ``flash_decoding/example_gqa_decode.py``
autotunes a two-kernel program (flash decoding and its combine), whose profiler asked a kernel
sequence for a single kernel's record (an AttributeError from inside the package); and
``deepseek_mla/example_mla_decode.py`` counts on ``assert_allclose``'s default of 1% of the elements
allowed beyond the tolerance (ours allowed none: 1-ulp differences in 0.06% of them failed it)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples import attention
from tileworkbench.jit import profiler as profiler_module

CONFIGS = [{"block": 64}, {"block": 128}]


@tw.autotune(configs=CONFIGS, warmup=1, rep=1)
@tw.jit
def doubled(A, block=None):
    N = T.const("N")
    A: T.Tensor((N,), "float32")
    B = T.empty((N,), "float32")
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i] * 2.0
    return B


@pytest.mark.parametrize("block", [64, 128])
def test_a_tuned_parameter_given_by_keyword_compiles_that_config_without_tuning(block, capsys):
    kernel = doubled.compile(N=1024, block=block)
    assert "autotune [" not in capsys.readouterr().err  # nothing tuned, nothing timed
    assert f"GRID = ({1024 // block}, 1, 1)" in kernel.get_host_source()  # N / block blocks


def test_without_the_tuned_parameters_the_configs_are_tuned(monkeypatch):
    from tileworkbench.autotuner.decorator import AutoTuner, AutotuneResult

    tried = []

    def run(tuner, *args, **kwargs):  # (the timing itself is the GPU suite's: which configs, here)
        tried.extend(tuner._configs())
        return AutotuneResult(kernel="the best")

    monkeypatch.setattr(AutoTuner, "run", run)
    doubled.tuned.clear()
    assert doubled.compile(N=1024) == "the best" and tried == CONFIGS


def test_the_profiler_of_a_kernel_sequence_makes_its_inputs(monkeypatch):
    kernel = tw.compile(attention.flash_decode(2, 8, 1, 1024, 64, num_split=4), out_idx=[-1])
    assert len(kernel.kernels) == 2  # flash decoding, then the combine
    monkeypatch.setattr(profiler_module, "random_input", lambda p, supply: (p["name"], tuple(p["shape"])))
    made = kernel.get_profiler().inputs()
    expected = [(p["name"], tuple(p["shape"])) for i, p in enumerate(kernel.params) if i not in kernel.out_idx]
    assert made == expected and len(made) == len(kernel.params) - 1


class _Scaled:
    """A stand-in kernel: out = 2 * x, but ``wrong`` of its elements off by one (numpy arrays)."""

    params = [{"name": "x", "kind": "tensor", "shape": [1000], "dtype": "float32"},
              {"name": "out", "kind": "tensor", "shape": [1000], "dtype": "float32"}]
    out_idx = [1]

    def __init__(self, wrong: int, unwritten: int = 0):
        self.wrong, self.unwritten = wrong, unwritten

    def __call__(self, x, out=None):
        if out is None:
            out = np.zeros_like(x)
        out[self.unwritten:] = 2 * x[self.unwritten:]
        out[self.unwritten:self.unwritten + self.wrong] += 1.0
        return out


@pytest.mark.parametrize("wrong, passes", [(0, True), (10, True), (11, False)])
def test_assert_allclose_allows_tilelangs_one_percent_of_elements_by_default(monkeypatch, wrong, passes):
    monkeypatch.setattr(profiler_module, "_to_numpy", np.asarray)
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    check = profiler_module.Profiler(_Scaled(wrong)).assert_allclose
    if passes:
        check(lambda x: 2 * x, input_tensors=[x])
    else:
        with pytest.raises(AssertionError, match=r"11 of 1000 elements \(1.10%\) differ"):
            check(lambda x: 2 * x, input_tensors=[x])
    if wrong:
        with pytest.raises(AssertionError, match=rf"{wrong} of 1000 elements"):
            check(lambda x: 2 * x, input_tensors=[x], max_mismatched_ratio=0.0)


def test_an_element_never_written_fails_whatever_the_ratio(monkeypatch):
    monkeypatch.setattr(profiler_module, "_to_numpy", np.asarray)
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    with pytest.raises(AssertionError, match="2 output elements are NaN"):
        profiler_module.Profiler(_Scaled(0, unwritten=2)).assert_allclose(lambda x: 2 * x, input_tensors=[x])
