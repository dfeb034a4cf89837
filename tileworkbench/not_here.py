"""TileLang's top-level names and modules that tileworkbench does not have, each with why.

``import tileworkbench as tilelang`` runs TileLang programs unchanged where they use what we
support (docs/tilelang.md). What they may also reach for, TVM and TileLang's other targets and
tools, is refused by name: ``tileworkbench.<name>`` (an attribute) and ``import
tileworkbench.<name>...`` (a module, at any depth) raise an ``ImportError`` that says it is not
supported and why, never an ``AttributeError`` or a bare "No module named". The package's
``__getattr__`` and ``NotHereFinder`` (on ``sys.meta_path``) read this table.
"""

from __future__ import annotations

_TVM = "tileworkbench has no TVM underneath: it compiles its own IR to CUDA"
_TARGET = ("tileworkbench compiles for NVIDIA Hopper (sm_90a) only, and runs kernels on the CPU with its own "
           "interpreter (compile(..., target=\"cpu\")); TileLang's per-target modules are not available")

NOT_HERE = {
    # TVM and what TileLang builds on it
    "tvm": _TVM + ". Write kernels with tileworkbench.language (T.*); TVM's own APIs (tvm.tir, tvm.IRModule, ...) "
           "are not available",
    "tir": "tileworkbench has no TVM TIR; kernels are written with tileworkbench.language (T.*)",
    "DataType": _TVM + "; dtypes are strings (\"float16\") or T.float16 ...",
    "tileop": _TVM + "; tile operators are T.copy, T.gemm, T.reduce_* ... in tileworkbench.language",
    "register_cuda_postproc": _TVM + "; there is no hook into its code generation",
    "register_hip_postproc": _TVM + "; there is no hook into its code generation",
    "register_c_postproc": _TVM + "; there is no hook into its code generation",
    # other targets
    "cpu": _TARGET, "rocm": _TARGET, "metal": _TARGET, "webgpu": _TARGET, "ascend": _TARGET,
    # tools around TileLang's own compiler
    "tools": "TileLang's tools (lowering traces, plotting) are not available: tileworkbench.lower(func).trace and "
             "the workbench (%%tilekernel, the HTML report) show every pass",
    "instrumentation": "TileLang's instrumentation is not available: pass_configs={\"tw.timeline\": True} records "
                       "what a kernel did (kernel.timeline())",
    "autodd": "TileLang's autodd is not available",
    "env": "TileLang's environment object is not available: tileworkbench reads TILEWORKBENCH_CACHE_DIR, "
           "TILEWORKBENCH_DISABLE_CACHE and TILEWORKBENCH_INTERPRET; disable_cache() / enable_cache() are here",
    "par_compile": "TileLang's par_compile is not available: tileworkbench.autotune compiles configs in parallel "
                   "processes (or on Ray)",
    "Fragment": "TileLang's layout objects are not available: the compiler lays out every fragment itself",
    "get_runtime_library_dirs": "TileLang's runtime libraries are not part of tileworkbench",
    "prepend_dll_search_path": "TileLang's runtime libraries are not part of tileworkbench",
    "runtime_library_dirs": "TileLang's runtime libraries are not part of tileworkbench",
    "libinfo": "TileLang's build information is not part of tileworkbench: tileworkbench.__version__ is its version",
    "build_date": "TileLang's build information is not part of tileworkbench: tileworkbench.__version__ is its version",
    "cache": "TileLang's kernel cache module is not available: tileworkbench keeps every compile in memory and on "
             "disk (TILEWORKBENCH_CACHE_DIR) by itself; disable_cache() / enable_cache() / is_cache_enabled() are here",
    "logger": "TileLang's logger is not available: tileworkbench logs to logging.getLogger(\"tileworkbench\"); "
              "set_log_level() is here",
}


def not_supported(name: str) -> ImportError:
    return ImportError(f"tileworkbench.{name} is not supported: {NOT_HERE[name]}", name=f"tileworkbench.{name}")


# Submodules of TileLang's packages we have that we do not: why (else Python's bare "No module named")
SUBMODULES_NOT_HERE = {
    "language.dtypes": "TileLang's dtype objects and torch-dtype tables are not here: dtypes are strings "
                       "(\"float16\") or T.float16 ..., and tensors' dtypes are read from torch or numpy directly "
                       "(TileLang's sparse GEMM helpers import it; T.gemm_sp is not supported either)",
}

# Modules of TileLang's that are here in part: (module path below tileworkbench) -> the submodules
# that are (any other is refused), and why the rest is not (by the top module)
IN_PART = {"cuda": ("intrinsics",), "carver": ("arch",), "carver.arch": ("driver",), "contrib": ("nvcc",),
           "engine": ("callback",)}
_BACKEND = ("tileworkbench compiles with its own passes and NVRTC, not TileLang's CUDA backend; of tilelang.cuda "
            "only intrinsics.make_mma_swizzle_layout (a layout hint for T.annotate_layout) is here")
_CARVER = ("TileLang's hint generator (carver: templates, roller, its arch models) is not available: tune with "
           "tileworkbench.autotune(configs=...); of tilelang.carver only arch.driver's device queries "
           "(get_num_sms, get_device_name, ...) are here")
_CONTRIB = ("TileLang's contrib (nvcc, hipcc, ... wrappers) is not available: tileworkbench compiles with NVRTC; "
            "of tilelang.contrib only nvcc.get_target_compute_version and parse_compute_version are here")
_ENGINE = (_TVM + "; tileworkbench.lower(func) gives the generated sources and the pass trace; of tilelang.engine "
           "only callback.register_cuda_postproc_callback is here, and it refuses to register")
_IN_PART_WHY = {"cuda": _BACKEND, "carver": _CARVER, "contrib": _CONTRIB, "engine": _ENGINE}


def backend_part(qualname: str):
    """A ``__getattr__`` for a module of ``IN_PART``: any name it lacks is an ImportError saying why."""
    why = _IN_PART_WHY[qualname.split(".")[1]]

    def __getattr__(name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {qualname!r} has no attribute {name!r}")
        raise ImportError(f"{qualname}.{name} is not supported: {why}", name=f"{qualname}.{name}")

    return __getattr__


class NotHereFinder:
    """A ``sys.meta_path`` finder: ``import tileworkbench.<name>`` of a name in ``NOT_HERE`` (or a
    module under it), or of a submodule in ``SUBMODULES_NOT_HERE``, raises its ``ImportError``;
    every other import it leaves to the others."""

    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if len(parts) >= 2 and parts[0] == "tileworkbench" and parts[1] in NOT_HERE:
            raise not_supported(parts[1])
        for depth in range(2, len(parts) if parts[0] == "tileworkbench" else 0):
            parent = ".".join(parts[1:depth])
            if parent in IN_PART and parts[depth] not in IN_PART[parent]:
                raise ImportError(f"{fullname} is not supported: {_IN_PART_WHY[parts[1]]}", name=fullname)
        inner = ".".join(parts[1:3])
        if parts[0] == "tileworkbench" and inner in SUBMODULES_NOT_HERE:
            raise ImportError(f"tileworkbench.{inner} is not supported: {SUBMODULES_NOT_HERE[inner]}", name=fullname)
        return None


def missing_name(module: str, name: str) -> Exception:
    """The error for ``tileworkbench.<module>.<name>`` that is not here: an ImportError naming it where
    TileLang's ``tilelang.<module>`` has that name (``tilelang_names.MODULES``), so that
    ``from tilelang.<module> import <name>`` says so; else an AttributeError saying neither has it."""
    from .tilelang_names import MODULES, VERSION

    if name in MODULES.get(module, ()):
        return ImportError(f"tileworkbench.{module}.{name} is not supported: TileLang {VERSION}'s "
                           f"tilelang.{module}.{name} has no counterpart in tileworkbench (yet); docs/tilelang.md "
                           "lists what is supported", name=f"tileworkbench.{module}.{name}")
    return AttributeError(f"module 'tileworkbench.{module}' has no attribute {name!r}, and TileLang {VERSION}'s "
                          f"tilelang.{module} has none either")


def module_getattr(qualname: str, module: str):
    """A module ``__getattr__`` for ``tileworkbench.<module>`` (``qualname`` its ``__name__``): a
    submodule not imported yet is imported (``from package import submodule`` asks for it first),
    Python's own dunders stay plain AttributeErrors, and any other missing name is ``missing_name``'s
    error."""
    import importlib
    import importlib.util

    def __getattr__(name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {qualname!r} has no attribute {name!r}")
        try:
            found = importlib.util.find_spec(f"{qualname}.{name}")
        except (ImportError, ValueError):  # not a package, or a name that is no module name
            found = None
        if found is not None:
            return importlib.import_module(f"{qualname}.{name}")
        raise missing_name(module, name)

    return __getattr__
