"""tileworkbench: write, understand and tune GPU tile kernels.

A TileLang-compatible DSL (``import tileworkbench.language as T``), a compiler core in Python
(AST -> IR -> passes -> CUDA C++ for sm_90a), CuPy/NVRTC to run it, and a notebook workbench
that shows every step.
"""

from .version import __version__  # noqa: E402
from .errors import CompileError, KernelRuntimeError, SourceLocation, TileworkbenchWarning  # noqa: E402
from .target import PassConfigKey, PassContext, Target  # noqa: E402
from .jit.lower import Artifact, lower  # noqa: E402
from .jit.kernel import Kernel, compile  # noqa: E402,A004
from . import language  # noqa: E402


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
