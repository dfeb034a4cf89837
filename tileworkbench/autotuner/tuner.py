"""``autotune``: compile candidate configs in parallel processes, time them on the GPU, keep the best.

Lowering and NVRTC are CPU work in Python and C, so the compile step runs in a process pool.
Each worker compiles one config (``tw.compile(..., load_device=False)``: lowering and NVRTC for
the target arch, no GPU needed; registers and spills come from ptxas's report) and so fills the
tileworkbench disk cache, cubin included, for the parent, which then only loads modules. Configs
that fail to compile are skipped and reported. The parent then loads each valid kernel on the GPU, times it, and remembers the
fastest per (builder, problem, device) on disk (``memory.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from ..target import PassContext, Target
from . import memory
from .capture import captured_inputs
from .space import Config, config_space


@dataclass
class Compiled:
    """The compile step's verdict on one config."""

    config: Config
    ok: bool
    seconds: float = 0.0
    error: str | None = None
    error_type: str | None = None
    registers: int | None = None
    spills_bytes: int | None = None
    smem_bytes: int | None = None
    worker_pid: int | None = None  # which process compiled it (the parallel step's evidence)


@dataclass
class Trial:
    config: Config
    ms: float | None
    error: str | None = None


@dataclass
class AutotuneResult:
    config: Config | None  # the best config (None when benchmark=False)
    ms: float | None
    kernel: object | None  # the compiled best Kernel
    compiled: list = field(default_factory=list)  # Compiled, in the order of the configs given
    trials: list = field(default_factory=list)  # Trial per benchmarked config
    skipped: list = field(default_factory=list)  # (Config, reason): did not compile, or failed to run/check
    from_memory: bool = False
    key: str = ""
    phase_s: dict = field(default_factory=dict)  # wall seconds of the steps that ran: "compile", "benchmark"

    @property
    def valid_configs(self) -> list:
        return [c.config for c in self.compiled if c.ok]

    def to_dataframe(self):
        """One row per config: its fields, the compile step's verdict (registers, spills, shared
        memory, error) and the timing (``ms``, or the error that stopped it); fastest first.
        Needs pandas (the ``[lab]`` extra)."""
        from ..errors import lab_dependency

        pd = lab_dependency("pandas", "AutotuneResult.to_dataframe")
        rows = {}
        for c in self.compiled:
            rows[c.config] = {**c.config.as_kwargs(), "compiled": c.ok, "registers": c.registers,
                              "spills_bytes": c.spills_bytes, "smem_bytes": c.smem_bytes, "ms": None,
                              "error": None if c.ok else f"{c.error_type}: {c.error}"}
        for t in self.trials:
            row = rows.setdefault(t.config, {**t.config.as_kwargs(), "compiled": True})
            row.update(ms=t.ms, error=t.error if t.error is not None else row.get("error"))
        frame = pd.DataFrame(list(rows.values()))
        return frame.sort_values("ms", na_position="last").reset_index(drop=True) if len(frame) else frame


class NeedsGPUError(RuntimeError):
    """Raised after the compile step where no GPU can benchmark; ``.result`` holds what compiled."""

    def __init__(self, result: AutotuneResult):
        super().__init__(f"autotune compiled {len(result.valid_configs)} of {len(result.compiled)} configs, but "
                         "benchmarking them needs a CUDA GPU and none is present; pass benchmark=False to get "
                         "the compiled candidates (or a timer= to rank them another way)")
        self.result = result


class IncorrectResult(AssertionError):
    pass


# ---- compile step ------------------------------------------------------------------------------

def _compile_one(builder, args, kwargs, config: Config, target: Target, pass_configs: dict, out_idx,
                 keep: bool = False):
    """Runs in a worker process; returns plain data (exceptions become strings, so nothing that
    fails to pickle can break the pool). With ``keep`` a pair: the ``Compiled`` and the kernel
    (None where it did not compile)."""
    start = time.perf_counter()
    kernel = None
    try:
        from ..backend.nvrtc import compile_check
        from ..jit.kernel import compile as tw_compile

        func = builder(*args, **kwargs, **config.as_kwargs())
        kernel = tw_compile(func, out_idx=out_idx, target=target, pass_configs=pass_configs, load_device=False)
        nv = kernel.record.get("nvrtc")  # compile() ran NVRTC (or found its result on disk)
        if nv is None:  # NVRTC could not be loaded: this raises a CompileError that says so
            nv = compile_check(kernel.get_kernel_source(), target.arch, name=f"{kernel.name}.cu").to_json()
        done = Compiled(config, True, time.perf_counter() - start, registers=nv["registers"],
                        spills_bytes=nv["spills_bytes"], smem_bytes=kernel.record.get("smem_bytes"),
                        worker_pid=os.getpid())
    except Exception as exc:
        done, kernel = Compiled(config, False, time.perf_counter() - start, error=str(exc),
                                error_type=type(exc).__name__, worker_pid=os.getpid()), None
    return (done, kernel) if keep else done


_WORKER_BUILDER = None  # set in each worker by the pool initializer


def _set_worker_builder(builder):
    global _WORKER_BUILDER
    _WORKER_BUILDER = builder


def _compile_in_worker(args, kwargs, config, target, pass_configs, out_idx) -> Compiled:
    return _compile_one(_WORKER_BUILDER, args, kwargs, config, target, pass_configs, out_idx)


def _start_method(builder) -> str:
    """spawn is the safe default (no forked CUDA or torch threads). A builder defined in
    ``__main__`` or inside a function (a notebook cell, a test) cannot be pickled by reference,
    so such builders use fork, where the platform has it: the pool initializer's arguments then
    reach the workers through the fork, unpickled."""
    importable = getattr(builder, "__module__", "__main__") != "__main__" and "<locals>" not in getattr(
        builder, "__qualname__", "<locals>")
    if importable or "fork" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return "fork"


class _Progress:
    """tqdm when installed; otherwise one ``[i/n]`` line per finished item on stderr."""

    def __init__(self, total: int, desc: str, enabled: bool = True):
        self.total, self.desc, self.enabled, self.done = total, desc, enabled, 0
        self.bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=True)
            except ImportError:
                pass

    def update(self, text: str):
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        elif self.enabled:
            print(f"[{self.done}/{self.total}] {self.desc}: {text}", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def compile_candidates(builder, configs, args=(), kwargs=None, out_idx=None, target="auto", pass_configs=None,
                       max_workers: int | None = None, progress: bool = True, mp_context: str | None = None) -> list:
    """Lower + NVRTC-compile every config in worker processes; a ``Compiled`` per config, in order.
    ``max_workers=0`` compiles in this process (for debugging)."""
    configs = list(configs)
    tgt = Target.of(target)
    configs_pc = PassContext.merged_configs(pass_configs)  # a plain dict: travels to the workers
    kwargs = dict(kwargs or {})
    results: list = [None] * len(configs)
    bar = _Progress(len(configs), "autotune: compile", progress)
    try:
        if max_workers == 0:
            for i, cfg in enumerate(configs):
                results[i] = _compile_one(builder, args, kwargs, cfg, tgt, configs_pc, out_idx)
                bar.update(_status(results[i]))
            return results
        workers = max_workers or max(1, min(len(configs), os.cpu_count() or 1))
        ctx = multiprocessing.get_context(mp_context or _start_method(builder))
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_set_worker_builder,
                                 initargs=(builder,)) as pool:
            futures = {pool.submit(_compile_in_worker, args, kwargs, cfg, tgt, configs_pc, out_idx): i
                       for i, cfg in enumerate(configs)}
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as exc:  # the worker died (or the builder could not be pickled)
                    results[i] = Compiled(configs[i], False, error=str(exc) or repr(exc), error_type=type(exc).__name__)
                bar.update(_status(results[i]))
    finally:
        bar.close()
    return results


def _status(c: Compiled) -> str:
    if c.ok:
        return f"{c.config.name} ok ({c.seconds:.2f} s, {c.registers} regs)"
    return f"{c.config.name} skipped ({c.error_type})"


# ---- benchmark step ----------------------------------------------------------------------------

def gpu_present() -> bool:
    from ..target import detect_arch

    return detect_arch() is not None


def device_name(target: Target) -> str:
    """Part of the memory key: the same config is not the best on every GPU."""
    if not gpu_present():
        return f"no-gpu {target.arch}"
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return f"{name.decode() if isinstance(name, bytes) else name} {target.arch}"
    except Exception:
        return f"gpu {target.arch}"


class GpuBenchmark:
    """The default timer: random inputs made once (every config solves the same problem),
    an optional check against ``ref_program``, then ``backend.timing.Timer`` (CUDA events, L2
    flushed, median)."""

    def __init__(self, ref_program=None, max_rel_err: float = 1e-2, warmup: int = 10, rep: int = 50,
                 inputs: list | None = None):
        self.ref_program, self.max_rel_err, self.warmup, self.rep = ref_program, max_rel_err, warmup, rep
        self._inputs, self._timer = inputs, None  # inputs: set_autotune_inputs's tensors, else made once

    def __call__(self, kernel, config: Config) -> float:
        from ..backend.timing import Timer, passes, rel_err

        if self._inputs is None:
            self._inputs = kernel.get_profiler().inputs()
        if self._timer is None:
            self._timer = Timer()
        outs = kernel(*self._inputs)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        full = list(self._inputs)
        for i, o in zip(kernel.out_idx, outs):
            full.insert(i, o)
        if self.ref_program is not None:
            for o in outs:
                o.fill_(float("nan")) if hasattr(o, "fill_") else o.fill(float("nan"))
            kernel(*full)
            refs = self.ref_program(*self._inputs)
            refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
            for o, r in zip(outs, refs):
                err = rel_err(o, r)
                if not passes(err, self.max_rel_err):
                    raise IncorrectResult(f"relative error {err:.2e} exceeds {self.max_rel_err:.0e}")
        return self._timer.time(lambda: kernel(*full), self.warmup, self.rep).ms


def autotune(builder, configs=None, args=(), out_idx=None, *, kwargs=None, target="auto", pass_configs=None,
             benchmark: bool = True, timer=None, ref_program=None, max_rel_err: float = 1e-2, warmup: int = 10,
             rep: int = 50, use_memory: bool = True, max_workers: int | None = None, progress: bool = True,
             mp_context: str | None = None, backend: str = "local", ray_address: str | None = None,
             trial_timeout_s: float | None = None, record=None, gpus_per_trial: float = 1.0) -> AutotuneResult:
    """Find the fastest ``config`` for ``builder(*args, **kwargs, **config.as_kwargs())``.

    ``configs``: ``Config`` objects (default ``config_space()``). ``timer(kernel, config) -> ms``
    replaces the GPU benchmark (default ``GpuBenchmark``, with ``ref_program`` checked first when
    given). ``benchmark=False`` stops after the compile step. Without a GPU (and no ``timer``)
    the compile step still runs, then ``NeedsGPUError`` is raised. The best config is remembered
    per (builder, args/kwargs, device) and reused next time (``use_memory=False`` re-tunes).

    ``backend="ray"`` runs the sweep on a Ray cluster (``ray_backend.py``): compiles on CPU workers,
    timing on workers holding ``gpus_per_trial`` GPUs each, a config that crashes its worker or
    runs past ``trial_timeout_s`` failing alone, finished configs appended to ``record`` (a
    JSON-lines file a later sweep resumes from). ``ray_address``: a running cluster to join
    (default: a local one for the sweep).

    Example::

        from tileworkbench.examples.gemm import matmul
        best = autotune(matmul, config_space(), args=(4096, 4096, 4096), kwargs={"dtype": "float16"},
                        out_idx=[2])
        best.kernel(a, b)
    """
    from ..jit.kernel import compile as compile_kernel

    if backend not in ("local", "ray"):
        raise ValueError(f"autotune: backend must be 'local' or 'ray', not {backend!r}")
    configs = list(configs if configs is not None else config_space())
    tgt = Target.of(target)
    kwargs = dict(kwargs or {})

    def build(cfg):
        return compile_kernel(builder(*args, **kwargs, **cfg.as_kwargs()), out_idx=out_idx, target=tgt,
                          pass_configs=pass_configs)

    inputs = captured_inputs()
    if backend == "ray":
        from .ray_backend import RaySweep

        if inputs is not None:
            raise ValueError("set_autotune_inputs: the Ray sweep times each config on a worker, which makes its own "
                             "inputs; tune locally (backend='local') to time on given tensors")

        sweep = RaySweep(ray_address, trial_timeout_s, record, gpus_per_trial)
        with sweep.session():
            return _autotune_on_ray(sweep, builder, configs, args, kwargs, out_idx, tgt, pass_configs, benchmark,
                                    timer or (GpuBenchmark(ref_program, max_rel_err, warmup, rep)
                                              if gpus_per_trial > 0 else None),
                                    use_memory, progress, build)

    device = device_name(tgt)
    key = memory.memory_key(builder, args, kwargs, device)
    recalled = _recalled(key, configs, build) if benchmark and use_memory else None
    if recalled is not None:
        return recalled

    start = time.perf_counter()
    compiled = compile_candidates(builder, configs, args, kwargs, out_idx, tgt, pass_configs, max_workers,
                                  progress, mp_context)
    compile_s = time.perf_counter() - start
    result = _compiled_result(compiled, key, len(configs))
    result.phase_s["compile"] = compile_s
    if not benchmark:
        return result
    if timer is None:
        if not gpu_present():
            raise NeedsGPUError(result)
        timer = GpuBenchmark(ref_program, max_rel_err, warmup, rep, inputs)

    kernels = {}
    start = time.perf_counter()
    bar = _Progress(len(result.valid_configs), "autotune: benchmark", progress)
    try:
        for cfg in result.valid_configs:
            try:
                kernels[cfg] = build(cfg)
                ms = float(timer(kernels[cfg], cfg))
                result.trials.append(Trial(cfg, ms))
                bar.update(f"{cfg.name} {ms:.4f} ms")
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                result.trials.append(Trial(cfg, None, reason))
                result.skipped.append((cfg, reason))
                bar.update(f"{cfg.name} failed ({type(exc).__name__})")
    finally:
        bar.close()
    result.phase_s["benchmark"] = time.perf_counter() - start
    best = _best_trial(result)
    result.config, result.ms, result.kernel = best.config, best.ms, kernels[best.config]
    _remember(result, builder, device)
    return result


def _recalled(key: str, configs: list, build) -> AutotuneResult | None:
    """The remembered best config for ``key``, built, when it is among ``configs``; else None."""
    hit = memory.recall(key)
    if hit is None or hit["config"] not in configs:
        return None
    return AutotuneResult(hit["config"], hit["ms"], build(hit["config"]), from_memory=True, key=key)


def _compiled_result(compiled: list, key: str, how_many: int) -> AutotuneResult:
    """The result after the compile step: what did not compile is skipped, and said so."""
    result = AutotuneResult(None, None, None, compiled, key=key)
    for c in compiled:
        if not c.ok:
            first = (c.error or "").strip().splitlines()[0] if c.error else ""
            result.skipped.append((c.config, f"{c.error_type}: {first}"))
            print(f"autotune: skipped {c.config.name}: {c.error_type}: {first}", file=sys.stderr)
    if not result.valid_configs:
        raise ValueError(f"autotune: none of the {how_many} configs compiled; first error: "
                         f"{result.skipped[0][1] if result.skipped else 'no configs given'}")
    return result


def _best_trial(result: AutotuneResult) -> Trial:
    timed = [t for t in result.trials if t.ms is not None]
    if not timed:
        raise RuntimeError(f"autotune: no config ran; first failure: {result.trials[0].error}")
    return min(timed, key=lambda t: t.ms)


def _remember(result: AutotuneResult, builder, device: str) -> None:
    memory.remember(result.key, result.config, result.ms, builder=memory.builder_name(builder), device=device,
                    params=[{k: p.get(k) for k in ("name", "shape", "dtype")} for p in result.kernel.params])


def _autotune_on_ray(sweep, builder, configs, args, kwargs, out_idx, tgt, pass_configs, benchmark, timer,
                     use_memory, progress, build) -> AutotuneResult:
    """``autotune``'s steps with Ray doing the compiling and the timing (``ray_backend.py``)."""
    from ..jit.kernel import Kernel
    from .ray_backend import compile_task, time_task

    gpus = sweep.gpus_per_trial
    if benchmark and gpus > 0 and sweep.cluster_gpus() < gpus:  # its tasks would wait for GPUs forever
        raise RuntimeError(f"the Ray cluster has {sweep.cluster_gpus():g} GPUs; each timing task needs {gpus:g}")
    on_gpu = {"num_gpus": gpus} if gpus > 0 and sweep.cluster_gpus() >= gpus else {"num_cpus": 1}
    device = sweep.run(device_name, [(tgt,)], on_gpu, 1)[0].value or f"unknown {tgt.arch}"
    key = memory.memory_key(builder, args, kwargs, device)
    recalled = _recalled(key, configs, build) if benchmark and use_memory else None
    if recalled is not None:
        return recalled
    if benchmark and timer is None:
        raise ValueError("autotune(backend='ray', gpus_per_trial=0) times on CPU workers: pass a timer=")

    done = sweep.finished() if benchmark else {}  # configs a previous sweep with this record finished
    todo = [c for c in configs if c not in done]
    records: dict = {}
    configs_pc = PassContext.merged_configs(pass_configs)
    bar = _Progress(len(todo), "autotune: compile (ray)", progress)
    start = time.perf_counter()

    def compiled_one(i, outcome):
        if outcome.ok:
            c, records[todo[i]] = outcome.value
        else:  # the worker died or the compile ran past the time limit
            c = Compiled(todo[i], False, error=outcome.error, error_type=outcome.error_type)
            outcome.value = (c, None)
        bar.update(_status(c))

    try:
        outcomes = sweep.run(compile_task, [(builder, args, kwargs, c, tgt, configs_pc, out_idx) for c in todo],
                             {"num_cpus": 1}, sweep.cpu_slots(), compiled_one)
    finally:
        bar.close()
    compile_s = time.perf_counter() - start
    compiled = [o.value[0] for o in outcomes]
    result = _compiled_result(compiled, key, len(todo)) if compiled else AutotuneResult(None, None, None, key=key)
    result.phase_s["compile"] = compile_s
    for cfg, (ms, error) in done.items():
        if cfg in configs:
            result.trials.append(Trial(cfg, ms, error))
            if error is not None:
                result.skipped.append((cfg, error))
    if not benchmark:
        return result

    valid = [c for c in result.valid_configs if c in records]
    bar = _Progress(len(valid), "autotune: benchmark (ray)", progress)

    def timed_one(i, outcome):
        cfg = valid[i]
        if outcome.ok:
            result.trials.append(Trial(cfg, outcome.value))
            bar.update(f"{cfg.name} {outcome.value:.4f} ms")
        else:
            reason = f"{outcome.error_type}: {outcome.error}"
            result.trials.append(Trial(cfg, None, reason))
            result.skipped.append((cfg, reason))
            bar.update(f"{cfg.name} failed ({outcome.error_type})")
        sweep.remember(cfg, result.trials[-1].ms, result.trials[-1].error)

    start = time.perf_counter()
    try:
        sweep_id = uuid.uuid4().hex  # each worker keeps one timer for this sweep's trials (ray_backend)
        sweep.run(time_task, [(records[c], out_idx, c, timer, gpus > 0, sweep_id) for c in valid], on_gpu,
                  sweep.gpu_slots(), timed_one)
    finally:
        bar.close()
    result.phase_s["benchmark"] = time.perf_counter() - start
    best = _best_trial(result)
    result.config, result.ms = best.config, best.ms
    # the driver loads the best kernel where it has a GPU of its own (as compile(load_device=False) otherwise)
    result.kernel = (Kernel(records[best.config], out_idx, load_device=gpu_present()) if best.config in records
                     else build(best.config))
    _remember(result, builder, device)
    return result
