"""GPU timing and the error measure every benchmark uses.

Timing follows the lent-GPU method: CUDA events around one call, warm-up first, the median of
many calls, the L2 cache flushed before each call so no call reads its inputs from the cache
the previous one warmed. Before the start event a short spin kernel keeps the GPU busy while the
host enqueues the call, so Python launch overhead never lands between the two events.

Only CuPy is imported here (never pandas or matplotlib): this runs on the GPU machine.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

FLUSH_BYTES = 256 * 1024 * 1024  # over four times the H200's 60 MB L2
SPIN_NS = 100_000  # longer than the host needs to enqueue start event + call + end event

_SPIN_SOURCE = r"""
extern "C" __global__ void tw_bench_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


@dataclass
class Timing:
    """Milliseconds of one timed callable: median, minimum and the number of timed calls (and
    every call's time, in order)."""

    ms: float
    ms_min: float
    reps: int
    samples: tuple = ()

    def tflops(self, flops: float) -> float:
        return flops / (self.ms * 1e-3) / 1e12


class Timer:
    """``Timer().time(fn, warmup, rep)``: the method above, for any callable that enqueues GPU
    work on the default stream (our kernels, torch.matmul, cupy.matmul all do)."""

    def __init__(self, flush_bytes: int = FLUSH_BYTES, spin_ns: int = SPIN_NS):
        import cupy

        _check_same_stream()
        self._flush = cupy.empty(max(flush_bytes // 4, 1), dtype=cupy.int32) if flush_bytes else None
        self._spin = cupy.RawKernel(_SPIN_SOURCE, "tw_bench_spin")
        self._spin_ns = spin_ns
        self.flush_bytes = flush_bytes

    def time(self, fn, warmup: int = 10, rep: int = 50) -> Timing:
        import cupy

        for _ in range(warmup):
            fn()
        cupy.cuda.runtime.deviceSynchronize()  # raises here if a warm-up launch failed
        events = [self._timed_call(fn) for _ in range(rep)]
        cupy.cuda.runtime.deviceSynchronize()
        times = [cupy.cuda.get_elapsed_time(s, e) for s, e in events]
        return Timing(statistics.median(times), min(times), rep, tuple(times))

    def time_alternating(self, fns: list, rounds: int, warmup: int = 2) -> list[tuple]:
        """Each of ``fns`` called once a round, one after another (each call timed as ``time``
        times one), the order rotated each round: ``rounds`` milliseconds per callable, in round
        order. The calls of a round run within milliseconds of each other, so the GPU's clock,
        which drifts over a run by more than the differences some benchmarks look for (a warming
        GPU: 7-15% between turns of eight calls, BENCHMARKS.md), is alike for all of them: the
        ratio of two callables' times in one round leaves the drift out."""
        import cupy

        for fn in fns:
            for _ in range(warmup):
                fn()
        cupy.cuda.runtime.deviceSynchronize()
        events = [[] for _ in fns]
        for turn in range(rounds):
            shift = turn % len(fns)
            for i in list(range(shift, len(fns))) + list(range(shift)):
                events[i].append(self._timed_call(fns[i]))
        cupy.cuda.runtime.deviceSynchronize()
        return [tuple(cupy.cuda.get_elapsed_time(s, e) for s, e in calls) for calls in events]

    def _timed_call(self, fn) -> tuple:
        """One call of ``fn`` between two recorded events, after the flush and the spin."""
        import cupy

        if self._flush is not None:
            self._flush.fill(0)
        self._spin((1,), (1,), (cupy.uint64(self._spin_ns),))
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        return start, end


def round_ratios(samples, baseline) -> tuple[float, list[float]]:
    """(median, [first quartile, third quartile]) of ``samples[i] / baseline[i]``: each round's call
    of one callable over the baseline's call in the same round (``Timer.time_alternating``)."""
    ratios = [t / b for t, b in zip(samples, baseline)]
    if len(ratios) == 1:
        return ratios[0], [ratios[0], ratios[0]]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), [q1, q3]


RETURN_MODES = ("mean", "median", "min", "max")


def do_bench(fn, warmup: float = 25, rep: float = 100, _n_warmup: int = 0, _n_repeat: int = 0, quantiles=None,
             fast_flush: bool = True, backend: str = "event", return_mode: str = "mean") -> float | list:
    """TileLang's ``do_bench``: milliseconds of ``fn``. ``warmup`` and ``rep`` are time budgets in
    milliseconds (the call counts follow from a first estimate, which counts the L2 flush too),
    ``_n_warmup`` / ``_n_repeat`` fix the counts instead. Timed as ``Timer`` times (CUDA events
    after a spin kernel, so host launch gaps are not in the time; the L2 flushed before every call
    unless ``fast_flush`` is False), whichever of ``"event"`` and ``"cupti"`` is asked for."""
    import time

    import cupy

    if backend not in ("event", "cupti"):
        raise ValueError(f"do_bench: backend {backend!r} is not supported here (use 'event' or 'cupti', both "
                         "timed with CUDA events)")
    if return_mode not in RETURN_MODES:
        raise ValueError(f"do_bench: return_mode must be one of {', '.join(RETURN_MODES)}, not {return_mode!r}")
    timer = Timer(flush_bytes=FLUSH_BYTES if fast_flush else 0)
    fn()
    cupy.cuda.runtime.deviceSynchronize()
    start = time.perf_counter()
    timer.time(fn, 0, 5)
    estimate_ms = max((time.perf_counter() - start) * 1e3 / 5, 1e-3)
    n_warmup = _n_warmup or max(1, int(warmup / estimate_ms))
    n_repeat = _n_repeat or max(1, int(rep / estimate_ms))
    samples = sorted(timer.time(fn, n_warmup, n_repeat).samples)
    if quantiles is not None:
        return [samples[min(len(samples) - 1, int(q * len(samples)))] for q in quantiles]
    return {"mean": statistics.fmean(samples), "median": statistics.median(samples), "min": samples[0],
            "max": samples[-1]}[return_mode]


def _check_same_stream():
    """Events are recorded on CuPy's current stream; torch must enqueue on that same stream or
    the events would not bracket its work."""
    import cupy

    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        theirs, ours = torch.cuda.current_stream().cuda_stream, cupy.cuda.get_current_stream().ptr
        if theirs != ours:
            raise RuntimeError(f"torch's current stream ({theirs:#x}) is not CuPy's ({ours:#x}); "
                               "CUDA events would not time torch's work")


def rel_err(out, ref) -> float:
    """‖out − ref‖_F / ‖ref‖_F in float64 for torch tensors (or CuPy arrays). NaN or inf in
    ``out`` (e.g. an element never written over the NaN poison) gives ``nan``, which never passes."""
    if type(out).__module__.startswith("torch"):
        o, r = out.double(), ref.double()
        if not bool(o.isfinite().all()):
            return float("nan")
        return float((o - r).norm() / r.norm())
    import cupy

    o, r = cupy.asarray(out, dtype=cupy.float64), cupy.asarray(ref, dtype=cupy.float64)
    if not bool(cupy.isfinite(o).all()):
        return float("nan")
    return float(cupy.linalg.norm(o - r) / cupy.linalg.norm(r))


def passes(err: float, threshold: float) -> bool:
    return not math.isnan(err) and err < threshold  # NaN fails
