"""Sweeps on Ray: ``autotune(..., backend="ray")`` (``tuner.py``).

Compiles fan out as CPU tasks (lowering and NVRTC need no GPU); each returns its kernel record,
cubin included, so nothing depends on a disk cache shared between machines. Timing runs as tasks
that each hold ``gpus_per_trial`` GPUs (one by default: Ray gives each task its own device, so one
kernel runs per GPU at a time), loading the record and timing it with the timer autotune uses on
one machine (``GpuBenchmark``: CUDA events, L2 flushed, medians). Results come back as they
finish, with a progress bar, into the same ``AutotuneResult``.

Faults cost a config, not the sweep: a task whose worker dies (a crash, an ``os._exit``, a killed
process) and a task that runs past ``trial_timeout_s`` (cancelled, its worker killed) count as that
config failing, with the reason kept. Tasks are submitted no faster than the cluster has room for
them, so a task's time limit runs from about when it starts. With ``record=PATH`` every timed or
failed config is appended to a JSON-lines file as it finishes; a sweep given the same file takes
those results from it and runs only the rest (a sweep cut short resumes).

Ray is an optional extra (``pip install tileworkbench[ray]``); without it ``backend="ray"`` raises an
ImportError that says so. ``address=None`` starts a local cluster for the sweep (and stops it
after); an address (``"auto"``, ``"ray://host:10001"``) joins a running one.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from .space import Config

DEFAULT_TRIAL_TIMEOUT_S = 600.0


def _ray():
    try:
        import ray
    except ImportError as exc:
        raise ImportError("autotune(backend='ray') needs Ray: pip install 'tileworkbench[ray]' (or ray)") from exc
    return ray


@dataclass
class Outcome:
    """What became of one task: its value, or why there is none."""

    value: object = None
    error: str | None = None
    error_type: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _failure(exc: BaseException) -> Outcome:
    cause = getattr(exc, "cause", None) or exc  # a RayTaskError wraps what the task raised
    text = str(cause).strip().splitlines()
    return Outcome(error=text[-1] if text else repr(cause), error_type=type(cause).__name__)


# ---- what runs on the workers (module level: Ray pickles them by reference) ---------------------

def compile_task(builder, args, kwargs, config, target, pass_configs, out_idx):
    """(Compiled, kernel record or None) for one config, on a CPU worker."""
    from .tuner import _compile_one

    compiled, kernel = _compile_one(builder, args, kwargs, config, target, pass_configs, out_idx, keep=True)
    return compiled, (kernel.record if kernel is not None else None)


# The timer each worker process keeps for the sweep it is timing (sweep id -> timer): a worker times
# trial after trial of one sweep, and the default timer (GpuBenchmark) makes its inputs and its
# CUDA timer on its first trial. Kept, later trials reuse them as one machine's sweep does; a task
# would otherwise get a fresh copy of the driver's timer each time and make them again.
_WORKER_TIMERS: dict = {}


def time_task(record, out_idx, config, timer, load_device: bool, sweep_id: str | None = None):
    """Milliseconds of one compiled config, on a worker holding its GPU(s); with ``sweep_id``, the
    timer this worker kept from its earlier trials of that sweep (the one before is let go)."""
    from ..jit.kernel import Kernel

    if sweep_id is not None:
        if sweep_id not in _WORKER_TIMERS:
            _WORKER_TIMERS.clear()  # another sweep's inputs would hold GPU memory for nothing
        timer = _WORKER_TIMERS.setdefault(sweep_id, timer)
    return float(timer(Kernel(record, list(out_idx) if out_idx is not None else None, load_device=load_device),
                       config))


# ---- the sweep -----------------------------------------------------------------------------------

class RaySweep:
    """One sweep's connection to Ray, its time limit and its record (module doc)."""

    def __init__(self, address: str | None = None, trial_timeout_s: float | None = None, record=None,
                 gpus_per_trial: float = 1.0):
        if trial_timeout_s is not None and not trial_timeout_s > 0:
            raise ValueError(f"trial_timeout_s must be positive seconds, not {trial_timeout_s!r}")
        if gpus_per_trial < 0:
            raise ValueError(f"gpus_per_trial must be >= 0, not {gpus_per_trial!r}")
        self.address = address
        self.timeout = float(trial_timeout_s or DEFAULT_TRIAL_TIMEOUT_S)
        self.record = Path(record) if record is not None else None
        self.gpus_per_trial = gpus_per_trial

    @contextlib.contextmanager
    def session(self):
        """Ray initialised for the sweep: joined at ``address``, or, without one, a new local
        cluster started (and stopped afterwards; ``address="local"``, so a ``RAY_ADDRESS`` or an
        earlier ``ray start`` is not joined by surprise). Where Ray is initialised already, that
        connection is used."""
        ray = _ray()
        started = False
        if not ray.is_initialized():
            ray.init(address=self.address or "local", include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            started = True
        try:
            yield ray
        finally:
            if started:
                ray.shutdown()

    def cluster_gpus(self) -> float:
        return float(_ray().cluster_resources().get("GPU", 0))

    def require_gpus(self, suite: str) -> float:
        """The cluster's GPUs; a RuntimeError (the benchmark commands' one-line refusal) where it
        has none, since each of ``suite``'s rows needs one."""
        gpus = self.cluster_gpus()
        if gpus < 1:
            raise RuntimeError(f"the Ray cluster has no GPU: the {suite}'s rows each need one "
                               "(its compiles alone would run on CPU workers)")
        return gpus

    # ---- running tasks ----

    def run(self, fn, payloads: list, resources: dict, slots: int, on_done=None) -> list:
        """``fn(*payload)`` for every payload as Ray tasks, at most ``slots`` at once; an
        ``Outcome`` per payload, in order. ``on_done(index, outcome)`` as each finishes."""
        ray = _ray()
        remote = ray.remote(fn).options(max_retries=0, **resources)
        queue = list(enumerate(payloads))
        pending: dict = {}  # ObjectRef -> (index, deadline)
        results: list = [None] * len(payloads)

        def finish(i, outcome):
            results[i] = outcome
            if on_done is not None:
                on_done(i, outcome)

        while queue or pending:
            while queue and len(pending) < max(1, slots):
                i, payload = queue.pop(0)
                pending[remote.remote(*payload)] = (i, time.monotonic() + self.timeout)
            wait_s = max(0.05, min(deadline for _, deadline in pending.values()) - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
            for ref in ready:
                i, _ = pending.pop(ref)
                try:
                    finish(i, Outcome(ray.get(ref)))
                except Exception as exc:  # the task raised, its worker died, or it was cancelled
                    finish(i, _failure(exc))
            now = time.monotonic()
            for ref, (i, deadline) in list(pending.items()):
                if now > deadline:
                    ray.cancel(ref, force=True)  # kills the worker running it
                    del pending[ref]
                    finish(i, Outcome(error=f"ran past the trial time limit of {self.timeout:g} s and was stopped",
                                      error_type="TrialTimeout"))
        return results

    def cpu_slots(self) -> int:
        # the cluster's CPUs, not those free this instant (a task just finished may not have
        # given its CPU back yet, which cost a compile slot)
        return max(1, int(_ray().cluster_resources().get("CPU", 1)))

    def gpu_slots(self) -> int:
        if self.gpus_per_trial == 0:
            return self.cpu_slots()
        return max(1, int(self.cluster_gpus() // self.gpus_per_trial))

    # ---- the record a sweep resumes from ----

    def finished(self) -> dict:
        """Config -> (ms or None, error or None) from the record, for configs it has."""
        if self.record is None or not self.record.exists():
            return {}
        out = {}
        for line in self.record.read_text().splitlines():
            try:
                entry = json.loads(line)
                out[Config(**entry["config"])] = (entry.get("ms"), entry.get("error"))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short when the sweep was stopped: that config runs again
        return out

    def remember(self, config: Config, ms: float | None, error: str | None) -> None:
        if self.record is None:
            return
        self.record.parent.mkdir(parents=True, exist_ok=True)
        with self.record.open("a") as f:
            f.write(json.dumps({"config": config.as_kwargs(), "ms": ms, "error": error}) + "\n")
