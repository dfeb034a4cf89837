"""``tilelang.autotuner.set_autotune_inputs``: the tensors the autotuner times each config on (a
varlen kernel's real lengths) instead of random ones; both interfaces take them (the GPU timing
itself is the GPU suite's). Here: the context (both spellings, nesting, per thread) and that the
benchmark calls the kernel with exactly those tensors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tileworkbench.autotuner import GpuBenchmark, set_autotune_inputs
from tileworkbench.autotuner.capture import captured_inputs


def test_the_context_gives_its_tensors_innermost_first_in_its_own_thread_only():
    a, b, c = np.zeros(2), np.ones(2), np.full(2, 2.0)
    assert captured_inputs() is None
    with set_autotune_inputs(a, b):
        assert [x is y for x, y in zip(captured_inputs(), (a, b))] == [True, True]
        with set_autotune_inputs([c]):
            assert captured_inputs()[0] is c and len(captured_inputs()) == 1
        seen = []
        worker = threading.Thread(target=lambda: seen.append(captured_inputs()))
        worker.start()
        worker.join()
        assert seen == [None]
        assert captured_inputs()[0] is a
    assert captured_inputs() is None


class _Kernel:
    out_idx = [1]

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        return np.zeros(3) if len(args) == 1 else None

    def get_profiler(self):
        raise AssertionError("given inputs: no tensors are made")


class _Timer:
    def time(self, fn, warmup, rep):
        fn()
        return type("Timing", (), {"ms": 0.5})()


def test_the_benchmark_times_the_kernel_on_the_given_tensors(monkeypatch):
    import tileworkbench.backend.timing as timing

    monkeypatch.setattr(timing, "Timer", _Timer)
    x = np.arange(3.0)
    kernel = _Kernel()
    with set_autotune_inputs(x):
        bench = GpuBenchmark(inputs=captured_inputs())
    assert bench(kernel, None) == 0.5
    assert kernel.calls[0][0] is x and kernel.calls[1][0] is x and len(kernel.calls[1]) == 2  # output in place


def test_the_ray_sweep_refuses_given_tensors():
    from tileworkbench.autotuner.tuner import autotune
    from tileworkbench.examples.gemm import matmul

    with set_autotune_inputs(np.zeros(1)), pytest.raises(ValueError, match="tune locally"):
        autotune(matmul, [], args=(256, 256, 256), backend="ray")
