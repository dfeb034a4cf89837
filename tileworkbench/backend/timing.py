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
    """Milliseconds of one timed callable: median, minimum and the number of timed calls."""

    ms: float
    ms_min: float
    reps: int

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
        events = []
        for _ in range(rep):
            if self._flush is not None:
                self._flush.fill(0)
            self._spin((1,), (1,), (cupy.uint64(self._spin_ns),))
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            events.append((start, end))
        cupy.cuda.runtime.deviceSynchronize()
        times = [cupy.cuda.get_elapsed_time(s, e) for s, e in events]
        return Timing(statistics.median(times), min(times), rep)


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
