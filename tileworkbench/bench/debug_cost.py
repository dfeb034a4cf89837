"""What debug mode costs: the spec GEMM with plain and with bounded (debug-mode) barrier waits.

On the GPU machine, from the source tree::

    PYTHONPATH=. python -m tileworkbench.bench.debug_cost            # 8192^3, 2 stages
    PYTHONPATH=. python -m tileworkbench.bench.debug_cost --size 4096 --stages 3

or ``tileworkbench.bench.debug_cost.debug_cost()`` from Python (returns the numbers as a dict).

The kernel is ``examples.gemm.matmul_tma_copy`` (fp16 in and out, fp32 accumulation, 128x128x32
tiles, 128 threads) compiled with ``TL_DISABLE_WARP_SPECIALIZED`` twice: plain, and with
``tw.debug_barrier_timeout``. Both outputs are checked first (against each other, bit for bit,
and against a float32 reference). Three timings (``timing.Timer``: CUDA events, L2 flushed),
interleaved over ``rounds`` rounds because the GPU's clock drifts: plain; debug with the record
checked once at the end (the device cost of the bounded waits alone); debug as a user calls it
(each call also waits for the kernel and reads the 64-byte record back). The ratios are the
medians of the per-round ratios.
"""

from __future__ import annotations

import argparse
import statistics

from ..examples.gemm import matmul_tma_copy
from ..target import PassConfigKey

THRESHOLD = 2e-3  # relative Frobenius error that passes (bench.gemm's fp16 threshold)


def debug_cost(size: int = 8192, num_stages: int = 2, timeout_s: float = 2.0, warmup: int = 3,
               rep: int = 60, rounds: int = 6, check: bool = True, out=print) -> dict:
    """Time the spec GEMM (``size``^3) with and without debug waits; print and return the ratio."""
    import cupy

    from ..jit.kernel import compile
    from ..backend.timing import Timer, passes, rel_err

    plain_configs = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    debug_configs = {**plain_configs, PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT: timeout_s}
    func = matmul_tma_copy(size, size, size, 128, 128, 32, "float16", "float16", "float32", 128, num_stages)
    plain = compile(func, out_idx=[2], pass_configs=plain_configs)
    debug = compile(func, out_idx=[2], pass_configs=debug_configs)
    assert "wait_debug" in debug.get_kernel_source() and "wait_debug" not in plain.get_kernel_source()

    rng = cupy.random.default_rng(0)
    A = rng.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    B = rng.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    C_plain = cupy.full((size, size), cupy.nan, cupy.float16)  # NaN: an element never written shows
    C_debug = C_plain.copy()
    err = None
    if check:
        plain(A, B, C_plain)
        debug(A, B, C_debug)
        if not bool(cupy.array_equal(C_plain, C_debug)):
            raise AssertionError("the debug-mode GEMM's output differs from the plain one")
        err = rel_err(C_plain, A.astype(cupy.float32) @ B.astype(cupy.float32))
        if not passes(err, THRESHOLD):
            raise AssertionError(f"the GEMM is wrong: relative error {err:.3g} (threshold {THRESHOLD})")

    # The GPU's clock drifts by several per cent over a few seconds (power, heat): time the three
    # variants in interleaved rounds and take the median of the per-round ratios.
    timer = Timer()
    rt = debug._runtime
    per_round = max(rep // rounds, 1)
    plain_ms, device_ms, call_ms = [], [], []
    for _ in range(rounds):
        plain_ms.append(timer.time(lambda: plain(A, B, C_plain), warmup, per_round).ms)
        rt.check_each_launch = False  # device cost alone: no wait and read-back per call
        try:
            device_ms.append(timer.time(lambda: debug(A, B, C_debug), warmup, per_round).ms)
            rt.check_deferred()  # raises if any of those launches timed out
        finally:
            rt.check_each_launch = True
        call_ms.append(timer.time(lambda: debug(A, B, C_debug), warmup, per_round).ms)
    t_plain, t_device, t_call = (statistics.median(t) for t in (plain_ms, device_ms, call_ms))
    device_ratio = statistics.median(d / p for d, p in zip(device_ms, plain_ms))
    call_ratio = statistics.median(c / p for c, p in zip(call_ms, plain_ms))

    flops = 2.0 * size ** 3

    def tflops(ms):
        return flops / (ms * 1e-3) / 1e12

    result = {"size": size, "num_stages": num_stages, "timeout_s": timeout_s, "rel_err": err, "rounds": rounds,
              "plain_ms": t_plain, "debug_device_ms": t_device, "debug_call_ms": t_call,
              "device_ratio": device_ratio, "call_ratio": call_ratio,
              "plain_tflops": tflops(t_plain), "debug_device_tflops": tflops(t_device)}
    out(f"spec GEMM matmul_tma_copy {size}^3 fp16, {num_stages} stages, TL_DISABLE_WARP_SPECIALIZED "
        f"({rounds} interleaved rounds of {per_round}; rel. error {'unchecked' if err is None else f'{err:.2e}'})")
    out(f"  plain waits                      {t_plain:8.3f} ms  {tflops(t_plain):7.1f} TFLOP/s")
    out(f"  debug waits (device)             {t_device:8.3f} ms  {tflops(t_device):7.1f} TFLOP/s"
        f"  x{device_ratio:.3f}")
    out(f"  debug waits + per-call check     {t_call:8.3f} ms  {tflops(t_call):7.1f} TFLOP/s  x{call_ratio:.3f}")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tileworkbench.bench.debug_cost", description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--timeout", type=float, default=2.0, help="tw.debug_barrier_timeout in seconds")
    p.add_argument("--rep", type=int, default=60, help="timed calls per variant, over all rounds")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--no-check", action="store_true", help="skip the correctness check")
    opts = p.parse_args(argv)
    debug_cost(opts.size, opts.stages, opts.timeout, rep=opts.rep, rounds=opts.rounds, check=not opts.no_check)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
