"""TileLang's autotuner interface: ``@autotune(configs=..., warmup=..., rep=...)`` stacked on
``@jit``, and the ``AutoTuner`` class.

    @tileworkbench.autotune(configs=[{"block_N": 64}, {"block_N": 128}], warmup=3, rep=20)
    @tileworkbench.jit
    def gemv(A, B, block_N=None):
        ...

    kernel = gemv.compile(N=4096, K=4096)   # the fastest config's Kernel (.config, .latency)
    c = gemv(a, b)                          # tuned on the first call, then runs the best

Each config (a dict of the function's parameters) is compiled, its output checked against
``ref_prog`` when one is given (a config whose output differs is skipped), and timed with
``tileworkbench.profiler.do_bench`` (``warmup``/``rep`` in milliseconds); the best is kept per
call form in this process. ``tileworkbench.autotuner.tuner.autotune`` is the other interface:
a builder, ``Config`` objects, a process pool for the compiles and a memory on disk.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ..errors import CompileError, caller_location
from ..jit.decorator import JitFunction, jit
from ..jit.profiler import TensorSupplyType
from .capture import captured_inputs


@dataclass
class AutotuneResult:
    """What a tuning run found (TileLang's names): the best ``config`` and its ``latency`` (ms),
    its ``kernel``, the reference's latency when one was timed, and what was skipped and why."""

    latency: float | None = None
    config: dict | None = None
    ref_latency: float | None = None
    kernel: object = None
    skipped: list | None = None


class AutoTuner:
    """``AutoTuner(fn, configs).set_compile_args(...).set_profile_args(...).run(warmup, rep)``."""

    def __init__(self, fn, configs):
        self.fn = fn if isinstance(fn, JitFunction) else None
        self.raw_fn = fn
        self.configs = configs
        self.compile_args: dict = {}
        self.profile_args: dict = {"supply_type": TensorSupplyType.Auto, "ref_prog": None, "rtol": 1e-2,
                                   "atol": 1e-2, "max_mismatched_ratio": 0.01, "skip_check": False}
        self.call_args: tuple = ()
        self.call_kwargs: dict = {}
        self.compile_config = None  # config -> Kernel (default: the function's compile with the call's values)

    @classmethod
    def from_kernel(cls, kernel, configs):
        return cls(kernel, configs)

    def set_compile_args(self, out_idx=None, target="auto", pass_configs=None, **_ignored):
        self.compile_args = {"out_idx": out_idx, "target": target, "pass_configs": pass_configs}
        return self

    def set_profile_args(self, supply_type=None, ref_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01,
                         skip_check=False, **_ignored):
        self.profile_args = {"supply_type": supply_type or TensorSupplyType.Auto, "ref_prog": ref_prog,
                             "rtol": rtol, "atol": atol, "max_mismatched_ratio": max_mismatched_ratio,
                             "skip_check": skip_check}
        return self

    def _jit(self) -> JitFunction:
        if self.fn is None:
            opts = {k: v for k, v in self.compile_args.items() if v is not None}
            self.fn = jit(self.raw_fn, **opts)
        return self.fn

    def _configs(self) -> list:
        configs = self.configs(*self.call_args, **self.call_kwargs) if callable(self.configs) else self.configs
        configs = list(configs or [])
        if not configs:
            raise CompileError("autotune: no configs to try (configs=[...] of dicts of parameter values)",
                               caller_location())
        for c in configs:
            if not isinstance(c, dict):
                raise CompileError(f"autotune: each config is a dict of parameter values, not {type(c).__name__}",
                                   caller_location())
        return configs

    def run(self, warmup: float = 25, rep: float = 100, timeout: float = 100, **_ignored) -> AutotuneResult:
        from ..backend.timing import do_bench

        fn = self._jit()
        configs = self._configs()
        best, skipped = None, []
        for i, config in enumerate(configs):
            _progress(i, len(configs), config)
            try:
                kernel = (self.compile_config(config) if self.compile_config is not None else
                          fn.compile(*self.call_args, **{**self.call_kwargs, **config}))
            except CompileError as err:
                skipped.append((config, f"does not compile: {err.message}"))
                continue
            profiler = kernel.get_profiler(self.profile_args["supply_type"])
            inputs = captured_inputs() or profiler.inputs()  # set_autotune_inputs's tensors, else the supply's
            ref = self.profile_args["ref_prog"]
            if ref is not None and not self.profile_args["skip_check"]:
                try:
                    profiler.assert_allclose(ref, input_tensors=inputs, atol=self.profile_args["atol"],
                                             rtol=self.profile_args["rtol"],
                                             max_mismatched_ratio=self.profile_args["max_mismatched_ratio"])
                except AssertionError as err:
                    skipped.append((config, f"wrong result: {err}"))
                    continue
            ms = do_bench(lambda: kernel(*inputs), warmup, rep)
            if best is None or ms < best.latency:
                best = AutotuneResult(ms, dict(config), None, kernel)
        _progress(len(configs), len(configs), None)
        if best is None:
            reasons = "; ".join(f"{c}: {why}" for c, why in skipped[:3])
            raise CompileError(f"autotune: none of the {len(configs)} configs compiled and passed its check ({reasons})",
                               caller_location())
        best.skipped = skipped
        best.kernel.config, best.kernel.latency = best.config, best.latency
        return best


def _progress(done: int, total: int, config):
    text = f"autotune [{done}/{total}]" + (f" {config}" if config is not None else " done")
    print(f"\r{text[:120]:<120}", end="\n" if config is None else "", file=sys.stderr, flush=True)


class Autotuned:
    """A ``@jit`` function under ``@autotune(...)`` (module doc)."""

    def __init__(self, fn: JitFunction, configs, warmup, rep, timeout, profile: dict):
        self.fn, self.configs, self.warmup, self.rep, self.timeout = fn, configs, warmup, rep, timeout
        self.profile = profile
        self.tuned: dict = {}  # call form -> AutotuneResult

    def _tuned(self, key, compile_config, args, kwargs) -> AutotuneResult:
        if key not in self.tuned:
            tuner = AutoTuner(self.fn, self.configs).set_profile_args(**self.profile)
            tuner.call_args, tuner.call_kwargs, tuner.compile_config = args, kwargs, compile_config
            self.tuned[key] = tuner.run(self.warmup, self.rep, self.timeout)
        return self.tuned[key]

    def _tunables_given(self, args, kwargs) -> bool:
        """Whether the call gives a parameter the configs tune, by keyword or by position: then,
        as TileLang does, it is compiled as given and nothing is tuned (an example's default
        config, ``f.compile(M=..., block_M=128, ...)``)."""
        configs = self.configs
        if callable(configs):
            try:
                configs = configs(*args, **kwargs)
            except Exception:  # noqa: BLE001 - the tuner calls it again and reports what it raises
                return False
        tuned = {k for c in configs or () if isinstance(c, dict) for k in c}
        given = set(kwargs) | set(list(self.fn.signature.parameters)[:len(args)])
        return bool(tuned & given)

    def compile(self, *args, **kwargs):
        """The best config's Kernel (``kernel.config``, ``kernel.latency``), for these sizes; the
        Kernel as given where the call gives a tuned parameter itself."""
        if self._tunables_given(args, kwargs):
            return self.fn.compile(*args, **kwargs)
        key = ("compile", _call_form(args, kwargs))
        return self._tuned(key, lambda cfg: self.fn.compile(*args, **{**kwargs, **cfg}), args, kwargs).kernel

    def __call__(self, *args, **kwargs):
        if self._tunables_given(args, kwargs):  # compiled as given (``_tunables_given``)
            return self.fn(*args, **kwargs)
        if not self.fn.eager:  # a builder: the best Kernel for these arguments
            key = ("build", _call_form(args, kwargs))
            return self._tuned(key, lambda cfg: self.fn._built(args, {**kwargs, **cfg}), args, kwargs).kernel
        bound = self.fn._bind(args, kwargs)
        tensors = {k: v for k, v in bound.items() if hasattr(v, "shape") and hasattr(v, "dtype")}
        values = {k: v for k, v in bound.items() if k not in tensors}
        shapes = {k: (tuple(v.shape), str(v.dtype)) for k, v in tensors.items()}
        key = ("call", _call_form((), values), repr(sorted(shapes.items())))
        best = self._tuned(key, lambda cfg: self.fn._kernel({**values, **cfg}, shapes), (), values)
        return self.fn(*args, **{**kwargs, **best.config})


def _call_form(args, kwargs) -> str:
    def form(value):
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return ("tensor", tuple(value.shape), str(value.dtype))
        return value

    return repr((tuple(form(a) for a in args), sorted((k, form(v)) for k, v in kwargs.items())))


def _search_style(func, args, configs, options) -> bool:
    """``autotune(builder, [Config(...)], args=...)``: the process-pool search of ``tuner.py``."""
    from .space import Config

    if func is None or isinstance(func, JitFunction):
        return False
    return bool(args) or "args" in options or "kwargs" in options or configs is None or (
        all(isinstance(c, Config) for c in configs) if isinstance(configs, (list, tuple)) else False)


def autotune(func=None, *args, configs=None, warmup: float | None = None, rep: float | None = None,
             timeout: float = 100, supply_type=None, ref_prog=None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False, **options):
    """``@autotune(configs=[{...}, ...], warmup=25, rep=100)`` over a ``@jit`` function (module doc).
    Called with a builder and ``Config`` objects (``autotune(builder, configs, args=...)``), it is
    ``tuner.autotune``, the process-pool search with its memory on disk."""
    if _search_style(func, args, configs, options):
        from .tuner import autotune as search

        given = {k: v for k, v in (("warmup", warmup), ("rep", rep)) if v is not None}
        return search(func, *args, **({"configs": configs} if configs is not None else {}), **given, **options)
    unknown = set(options) - {"supply_prog", "manual_check_prog", "cache_input_tensors", "do_not_specialize",
                              "early_stop", "early_stop_factor"}
    if unknown or args:
        what = repr(sorted(unknown)[0]) if unknown else "positional arguments after the function"
        raise CompileError(f"autotune: unsupported {what}", caller_location())
    profile = {"supply_type": supply_type, "ref_prog": ref_prog, "rtol": rtol, "atol": atol,
               "max_mismatched_ratio": max_mismatched_ratio, "skip_check": skip_check}
    warmup, rep = 25 if warmup is None else warmup, 100 if rep is None else rep

    def wrap(fn):
        if not isinstance(fn, JitFunction):
            fn = jit(fn)
        return Autotuned(fn, configs, warmup, rep, timeout, profile)

    return wrap(func) if func is not None else wrap
