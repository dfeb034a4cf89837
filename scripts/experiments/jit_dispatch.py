"""Experiment (issue 18): what a ``@jit`` function called with tensors costs before its kernel runs.

TileLang's current front door is ``C = matmul(A, B, 128, 128, 32)``: the call finds (or compiles)
the kernel for the tensors' shapes and dtypes and the other values, then calls it. This times that
dispatch alone, without a GPU: ``examples/tilelang_programs/gemm.py``'s ``matmul`` with its kernel
replaced by a stub that does nothing, called with stand-ins that have a shape, a torch dtype name
and ``__cuda_array_interface__``.

    PYTHONPATH=. python3 scripts/experiments/jit_dispatch.py

Prints microseconds per call (best of five runs of 20000 calls) for a positional call and one with
keywords. Findings (CPU machine, 2026-12-04): at ``c44269c``, before the call forms were kept
(``inspect.signature`` three times a call, keys built by ``repr``), 57.8 us positional and 56.9 us
with keywords; after, 2.9 and 4.1 us.
"""

import time


class _TorchFloat16:
    def __str__(self):
        return "torch.float16"


class Array:
    """What the dispatch reads of a tensor."""

    __cuda_array_interface__ = {}

    def __init__(self, shape):
        self.shape = shape
        self.dtype = _TorchFloat16()


def per_call_us(call, calls=20000, runs=5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main():
    from tileworkbench.examples.tilelang_programs import gemm
    from tileworkbench.jit import decorator

    decorator.compile_kernel = lambda func, **options: (lambda *tensors: None)  # the kernel: a stub
    a, b = Array((1024, 1024)), Array((1024, 1024))
    gemm.matmul(a, b, 128, 128, 32)
    gemm.matmul(a, b, block_M=128, block_N=128, block_K=32)
    print(f"positional: {per_call_us(lambda: gemm.matmul(a, b, 128, 128, 32)):.2f} us per call")
    print(f"keywords:   {per_call_us(lambda: gemm.matmul(a, b, block_M=128, block_N=128, block_K=32)):.2f} us "
          "per call")


if __name__ == "__main__":
    main()
