"""Autotuning, in two interfaces. TileLang's (``decorator.py``): ``@autotune(configs=[{...}],
warmup=..., rep=...)`` over a ``@jit`` function, and ``AutoTuner``. And the search of tile
configs for a kernel builder, in parallel processes, remembered on disk (``tuner.py``):

    from tileworkbench.autotuner import autotune, config_space
    from tileworkbench.examples.gemm import matmul

    result = autotune(matmul, config_space(), args=(4096, 4096, 4096), kwargs={"dtype": "float16"},
                      out_idx=[2])
    result.config, result.ms, result.kernel

See ``tuner.py`` for the steps (parallel compile, GPU benchmark, disk memory); with
``backend="ray"`` the compiles and the timing run on a Ray cluster instead, faults costing a config
and not the sweep, a sweep resuming from its record (``ray_backend.py``).
"""

from ..not_here import module_getattr
from .capture import set_autotune_inputs
from .decorator import AutoTuner, AutotuneResult as TunedResult, autotune
from .memory import forget, memory_path, recall, remember
from .space import Config, config_space
from .tuner import (
                    AutotuneResult,
                    Compiled,
                    GpuBenchmark,
                    IncorrectResult,
                    NeedsGPUError,
                    Trial,
                    compile_candidates,
)

__all__ = [
                    "AutoTuner",
                    "set_autotune_inputs",
                    "AutotuneResult",
                    "TunedResult",
                    "Compiled",
                    "Config",
                    "GpuBenchmark",
                    "IncorrectResult",
                    "NeedsGPUError",
                    "Trial",
                    "autotune",
                    "compile_candidates",
                    "config_space",
                    "forget",
                    "memory_path",
                    "recall",
                    "remember",
]
__getattr__ = module_getattr(__name__, "autotuner")  # TileLang's other names: an ImportError naming them
