"""tileworkbench: write, understand and tune GPU tile kernels.

A TileLang-compatible DSL (``import tileworkbench.language as T``), a compiler core in Python
(AST -> IR -> passes -> CUDA C++ for sm_90a), CuPy/NVRTC to run it, and a notebook workbench
that shows every step.
"""

from .version import __version__  # noqa: E402
from .errors import CompileError, KernelRuntimeError, SourceLocation  # noqa: E402
from .target import PassConfigKey, PassContext, Target  # noqa: E402
from .jit.lower import Artifact, lower  # noqa: E402
from .jit.kernel import Kernel, compile  # noqa: E402,A004
from . import language  # noqa: E402
from .analysis import attach as _attach_analyses  # noqa: E402
from .analysis import barriers as _barriers  # noqa: E402
from .analysis import checker as _checker  # noqa: E402
from .analysis.checker import TileworkbenchWarning  # noqa: E402
from .jit import lower as _lower_module  # noqa: E402

# The barrier-protocol checker rides along every barrier simulation (so the trace's findings and
# timeline marks include it) and, after the analyses are attached, turns its findings into a
# CompileError or warnings (pass config tw.barrier_check).
if _checker.observe not in _barriers.OBSERVERS:
    _barriers.OBSERVERS.append(_checker.observe)
for _hook in (_attach_analyses, _checker.enforce):
    if _hook not in _lower_module.POST_LOWER_HOOKS:
        _lower_module.POST_LOWER_HOOKS.append(_hook)


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None):
    """Decorator: ``@tileworkbench.jit(out_idx=[2])`` on a builder that returns a prim_func
    compiles what it returns (cached per argument values)."""

    def wrap(builder):
        compiled = {}

        def call(*args, **kwargs):
            key = repr((args, sorted(kwargs.items())))  # lists among the arguments are fine too
            if key not in compiled:
                compiled[key] = compile(builder(*args, **kwargs), out_idx=out_idx, target=target,
                                        pass_configs=pass_configs)
            return compiled[key]

        call.__wrapped__ = builder
        call.__name__ = getattr(builder, "__name__", "kernel")
        return call

    return wrap(func) if func is not None else wrap


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt extension (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "tileworkbench"}]


def load_ipython_extension(ipython):
    """``%load_ext tileworkbench``: registers the ``%%tilekernel`` cell magic."""
    from .notebook.magic import register_magics

    register_magics(ipython)


__all__ = ["CompileError", "KernelRuntimeError", "SourceLocation", "TileworkbenchWarning", "PassConfigKey",
           "PassContext", "Target",
           "Artifact", "lower", "Kernel", "compile", "jit", "language", "__version__"]
