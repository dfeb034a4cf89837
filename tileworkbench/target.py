"""Compilation targets, pass configuration keys and the context that carries them.

``Target`` says what we generate code for; ``PassContext`` is a context manager carrying pass
configs (and optionally a target) to every ``lower``/``compile`` inside it, as in TileLang.
"""

from __future__ import annotations

import enum
import numbers
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import TileworkbenchWarning, user_error


class PassConfigKey(str, enum.Enum):
    """Pass configuration keys; the values match TileLang's spelling."""

    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"  # NVRTC's --use_fast_math
    TW_DEBUG_BARRIER_TIMEOUT = "tw.debug_barrier_timeout"  # seconds; 0 disables debug waits
    TW_BARRIER_CHECK = "tw.barrier_check"  # "error" (default), "warn" or "off"
    TW_DISABLE_WGMMA = "tw.disable_wgmma"  # keep T.gemm on the mma.sync path
    TW_DISABLE_RASTERIZATION = "tw.disable_rasterization"  # GEMM blocks in hardware order
    TW_KEEP_PROXY_FENCES = "tw.keep_proxy_fences"  # keep every pipeline fence (for comparison)
    TW_REGISTER_EPILOGUE = "tw.register_epilogue"  # GEMMs store their result from registers, no TMA store
    TW_DISABLE_PERSISTENT = "tw.disable_persistent"  # warp-specialised GEMMs: one block per tile, no tile loop
    TW_DISABLE_MATRIX_STORES = "tw.disable_matrix_stores"  # accumulators to shared tiles by store_pair, no stmatrix
    TW_WS_TILE_BARRIERS = "tw.ws_tile_barriers"  # a warp-specialised two-gemm loop: a full/empty pair per tile
    TW_GEMM_OVERLAP = "tw.gemm_overlap"  # two-gemm loops: the softmax beside the previous P @ V (default: on)
    TW_TIMELINE = "tw.timeline"  # True or k: the kernel records a measured timeline in every (k-th) block
    TW_TIMELINE_CAPACITY = "tw.timeline_capacity"  # events each recording thread keeps (default 2048)
    TW_VERIFY_IR = "tw.verify_ir"  # the IR verifier after every pass (as TILEWORKBENCH_VERIFY_IR=1)
    TW_CODE_OFFSET = "tw.code_offset"  # k fillers at the top of the kernel: its code moved 16 k bytes (a placement probe)
    TW_REREAD_THREAD_INDEX = "tw.reread_thread_index"  # the main loop reads %tid.x again (unset: where ptxas spills less)
    TW_PTXAS_OPTIONS = "tw.ptxas_options"  # ptxas options for NVRTC (a list: ["--register-usage-level=10"])
    TW_EXP2_EMULATION = "tw.exp2_emulation"  # k: one float32 exp2 in k of an unrolled loop off the MUFU (passes/emulate_exp2.py)
    # TileLang 0.1.15's other keys. tl.disable_wgmma is tw.disable_wgmma; the rest are accepted and
    # have no effect here (TILELANG_ONLY_KEYS says why, and a warning says so once).
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"

    def __str__(self) -> str:
        return self.value


# TileLang's keys that do nothing here, each with why (the warning a use of one gives, once).
_PASSES = "it tunes one of TVM's or TileLang's own passes, which this compiler does not have"
_SYNCS = "this compiler puts a barrier wherever its analysis finds threads sharing data and nowhere else"
_INDEX_BITS = "this compiler uses 64-bit offsets wherever the sizes could pass 2^31"
_CHECKS = "it switches off a check TileLang makes before lowering; this compiler's checks always run"
_DEBUG = "it asks for TileLang's debug output; the trace shows this compiler's IR after every pass"
_FLAGS = ("it passes flags to nvcc; this compiler compiles with NVRTC and its own flags (ptxas's options go "
          "in tw.ptxas_options, or in jit's compile_flags as --ptxas-options=...)")


def _each(reason: str, *names: str) -> dict:
    return {PassConfigKey[n].value: reason for n in names}


TILELANG_ONLY_KEYS = {
    **_each(_PASSES, "TL_SIMPLIFY", "TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES",
            "TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS", "TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES",
            "TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL",
            "TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS", "TL_SIMPLIFY_ENABLE_LET_INLINE",
            "TL_ENABLE_AUTO_SCHEDULE", "TL_ENABLE_AUTO_WARP_SPECIALIZATION", "TL_LAYOUT_COST_MODEL",
            "TL_REDUCER_FORCE_BASELINE", "TL_DISABLE_VECTORIZE_256", "TL_ENABLE_FP32X2_REDUCTION",
            "TL_ENABLE_ASYNC_COPY", "TL_ENABLE_LOWER_LDGSTG", "TL_ENABLE_LOWER_LDGSTG_PREDICATED",
            "TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS", "TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE",
            "TL_DISABLE_SHARED_MEMORY_REUSE", "TL_DISABLE_SHUFFLE_ELECT", "TL_DISABLE_LOOP_UNSWITCHING",
            "TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE", "TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS",
            "TL_FORCE_LET_INLINE", "TL_STORAGE_REWRITE_DETECT_INPLACE", "TIR_ENABLE_EQUIV_TERMS_IN_CSE",
            "TIR_DISABLE_CSE", "TIR_SIMPLIFY", "TIR_DISABLE_STORAGE_REWRITE", "TIR_DISABLE_VECTORIZE",
            "TIR_USE_ASYNC_COPY", "TIR_MERGE_STATIC_SMEM", "TIR_ADD_LOWER_PASS", "TIR_NOALIAS"),
    **_each(_SYNCS, "TL_DISABLE_THREAD_STORAGE_SYNC"),
    **_each(_INDEX_BITS, "TL_CONFIG_INDEX_BITWIDTH"),
    **_each(_CHECKS, "TL_DISABLE_BUFFER_INIT_CHECK", "TL_DISABLE_DATA_RACE_CHECK",
            "TL_DISABLE_PRELOWER_SEMANTIC_CHECK", "TL_DISABLE_OUT_OF_BOUND_WARNING"),
    **_each(_DEBUG, "TL_EMIT_LINE_DIRECTIVES", "TL_ENABLE_REDUCER_PLAN_VERBOSE",
            "TL_ENABLE_VECTORIZE_PLANNER_VERBOSE", "TL_AST_PRINT_ENABLE", "TL_LAYOUT_VISUALIZATION_ENABLE",
            "TL_LAYOUT_VISUALIZATION_FORMATS", "TIR_ENABLE_DEBUG", "CUDA_KERNELS_OUTPUT_DIR",
            "TL_ENABLE_DUMP_IR", "TL_DUMP_IR_DIR", "TL_PASS_PROFILE", "TL_PASS_PROFILE_THRESHOLD_MS"),
    **_each(_FLAGS, "TL_DEVICE_COMPILE_FLAGS"),
}
# TileLang's names for keys of ours
ALIASES = {PassConfigKey.TL_DISABLE_WGMMA.value: PassConfigKey.TW_DISABLE_WGMMA.value}
_KNOWN_KEYS = {k.value for k in PassConfigKey} - set(TILELANG_ONLY_KEYS) - set(ALIASES)
_warned_keys: set = set()
# The values each key takes (every other key is a switch: True or False).
BARRIER_CHECK_MODES = ("error", "warn", "off")


def barrier_check_mode(configs) -> str:
    """The ``tw.barrier_check`` mode pass configs ask for: "error" by default (and for True),
    "off" for False, else the mode named; any other value is a CompileError."""
    value = (configs or {}).get(PassConfigKey.TW_BARRIER_CHECK.value, "error")
    if value is True or value is None:
        return "error"
    if value is False:
        return "off"
    text = str(value).strip().lower()
    if text not in BARRIER_CHECK_MODES:
        raise user_error(f"pass config {PassConfigKey.TW_BARRIER_CHECK.value} must be 'error', 'warn' or 'off', "
                         f"not {value!r}")
    return text
CODE_OFFSET_MAX = 64  # tw.code_offset: 64 fillers move the code a kilobyte, past any fetch block


def _config_value_problem(name: str, value) -> str | None:
    """Why ``value`` is not a value of pass config ``name``, or None. A switch takes True or False
    (0 and 1 too); a string such as "no" is refused rather than read as true."""
    if name == PassConfigKey.TW_BARRIER_CHECK.value:
        return None if isinstance(value, str) and value in BARRIER_CHECK_MODES else \
            "must be 'error', 'warn' or 'off'"
    if name == PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT.value:
        if value is None or value is False:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
            return "is a time limit in seconds (0, False or None switch debug mode off)"
        return None
    if name == PassConfigKey.TW_TIMELINE.value:
        if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value >= 0):
            return None
        return "is True (every block records), k (every k-th block, or tile of a persistent kernel) or False"
    if name == PassConfigKey.TW_TIMELINE_CAPACITY.value:
        if not isinstance(value, bool) and isinstance(value, numbers.Integral) and 1 <= value <= 1 << 20:
            return None
        return "is the number of events each recording thread keeps (1 to 1048576)"
    if name == PassConfigKey.TW_PTXAS_OPTIONS.value:
        if isinstance(value, (list, tuple)) and all(isinstance(o, str) and o.startswith("-") and o.strip() == o
                                                    and " " not in o for o in value):
            return None
        return "is a list of ptxas options, each one word starting with '-' (\"--register-usage-level=10\")"
    if name == PassConfigKey.TW_EXP2_EMULATION.value:
        if value is None or value is False or (not isinstance(value, bool) and isinstance(value, numbers.Integral)
                                               and (value == 0 or 2 <= value <= 64)):
            return None
        return "is k, 2 to 64 (one exponential in k computed on the FMA pipe), or 0, False or None (off)"
    if name == PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL.value:
        if not isinstance(value, bool) and isinstance(value, numbers.Integral) and 0 <= value <= 10:
            return None
        return "is ptxas's register usage level, 0 to 10"
    if name == PassConfigKey.TW_CODE_OFFSET.value:
        if not isinstance(value, bool) and isinstance(value, numbers.Integral) and 0 <= value <= CODE_OFFSET_MAX:
            return None
        return f"is the number of one-instruction fillers before the kernel's code (0 to {CODE_OFFSET_MAX})"
    if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return None
    return "is a switch: True or False"


def normalize_pass_configs(configs) -> dict:
    """Accept keys as PassConfigKey or strings; reject unknown keys and bad values with a clear
    message (a CompileError at the user's line)."""
    if configs is None:
        return {}
    if not isinstance(configs, Mapping):
        raise user_error(f"pass_configs must be a dict of pass config keys to values, not a "
                         f"{type(configs).__name__}")
    out = {}
    for key, value in configs.items():
        if not isinstance(key, str):
            raise user_error(f"pass config keys are strings or PassConfigKey members, not {key!r}")
        name = key.value if isinstance(key, PassConfigKey) else key
        name = ALIASES.get(name, name)
        if name in TILELANG_ONLY_KEYS:
            _warn_no_effect(name)
            continue
        if name not in _KNOWN_KEYS:
            known = ", ".join(sorted(_KNOWN_KEYS))
            raise user_error(f"unknown pass config {name!r}; known keys: {known}")
        problem = _config_value_problem(name, value)
        if problem:
            raise user_error(f"pass config {name} {problem}, not {value!r}")
        out[name] = value
    return out


def _warn_no_effect(name: str):
    if name not in _warned_keys:
        _warned_keys.add(name)
        warnings.warn(f"pass config {name} has no effect in tileworkbench: {TILELANG_ONLY_KEYS[name]}",
                      TileworkbenchWarning, stacklevel=4)


_ARCHS = {"sm_90": "sm_90a", "sm_90a": "sm_90a", "sm_100": "sm_100a", "sm_100a": "sm_100a",
          "sm_80": "sm_80", "sm_89": "sm_89"}


@dataclass(frozen=True)
class Target:
    kind: str = "cuda"
    arch: str = "sm_90a"

    @staticmethod
    def of(value) -> "Target":
        """``"auto"``, ``"cuda"``, ``{"kind": "cuda", "arch": "sm_90"}``, or a Target."""
        if isinstance(value, Target):
            return value
        if value is None or value == "auto":
            ctx = PassContext.current()
            if ctx is not None and ctx.target is not None:
                return ctx.target
            return Target(arch=detect_arch() or "sm_90a")
        if value == "cuda":
            return Target(arch=detect_arch() or "sm_90a")
        if isinstance(value, dict):
            kind = value.get("kind", "cuda")
            if kind != "cuda":
                raise user_error(f"unsupported target kind {kind!r}; only 'cuda' is supported")
            arch = value.get("arch", "sm_90a")
            if not isinstance(arch, str) or arch not in _ARCHS:
                raise user_error(f"unsupported arch {arch!r}; expected one of {', '.join(_ARCHS)}")
            return Target("cuda", _ARCHS[arch])
        if isinstance(value, str) and value.startswith("cuda -arch="):
            return Target.of({"kind": "cuda", "arch": value.split("=", 1)[1]})
        if isinstance(value, str) and value.startswith("sm_"):
            return Target.of({"kind": "cuda", "arch": value})
        raise user_error(f"cannot interpret target {value!r}; use 'auto', 'cuda', an arch such as 'sm_90a', "
                         f"'cuda -arch=sm_90a', a dict {{'kind': 'cuda', 'arch': ...}} or a Target")

    @property
    def compute_version(self) -> tuple[int, int]:
        digits = self.arch.removeprefix("sm_").rstrip("a")
        return int(digits[:-1]), int(digits[-1])

    def __enter__(self):
        PassContext(target=self).__enter__()  # lowering inside picks this target for "auto"
        return self

    def __exit__(self, *exc):
        _ctx_state.stack = _ctx_state.stack[:-1]

    def to_json(self) -> dict:
        return {"kind": self.kind, "arch": self.arch}


def detect_arch() -> str | None:
    """The arch of GPU 0 when one is visible (cached), else None. Never initialises a context
    on machines without a GPU."""
    global _DETECTED
    if _DETECTED is None:
        _DETECTED = _probe_arch() or ""
    return _DETECTED or None


_DETECTED: str | None = None


def _probe_arch() -> str | None:
    """GPU 0's compute capability from the CUDA driver API (``cuda.bindings.driver``), None without
    a driver or a GPU. The driver API rather than ``cuda.bindings.runtime``: the runtime module's
    import (8-10 ms on the CPU machine) and, on a GPU, the CUDA runtime's own initialisation ran
    before NVRTC could start in every process's first compile, and nothing else on the compile
    path uses the runtime API; ``cuda.bindings.driver`` is imported by NVRTC's bindings anyway."""
    try:
        from cuda.bindings import driver
    except ImportError:  # no cuda-bindings: no way to run anything on a GPU either
        return None
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return None
        err, count = driver.cuDeviceGetCount()
        if int(err) != 0 or count == 0:
            return None
        err, device = driver.cuDeviceGet(0)
        if int(err) != 0:
            return None
        attr = driver.CUdevice_attribute
        err, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
        err2, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
        if int(err) or int(err2):
            return None
    except (RuntimeError, OSError):  # the bindings found no libcuda (a machine without a driver)
        return None
    return _ARCHS.get(f"sm_{major}{minor}", f"sm_{major}{minor}")


_ctx_state = threading.local()


@dataclass
class PassContext:
    """``with PassContext(config={...}):`` — pass configs (and a target) for lowering inside."""

    config: dict = field(default_factory=dict)
    target: Target | None = None
    opt_level: int = 2

    def __post_init__(self):
        self.config = normalize_pass_configs(self.config)

    def __enter__(self):
        stack = getattr(_ctx_state, "stack", [])
        _ctx_state.stack = stack + [self]
        return self

    def __exit__(self, *exc):
        _ctx_state.stack = _ctx_state.stack[:-1]

    @staticmethod
    def current() -> "PassContext | None":
        stack = getattr(_ctx_state, "stack", [])
        return stack[-1] if stack else None

    @staticmethod
    def ambient() -> str:
        """What the enclosing contexts change about a compile (their configs and target), as a
        cache-key part: "" outside any. A kernel cached by its arguments alone would be handed
        back unchanged inside a context that asks for other configs."""
        stack = getattr(_ctx_state, "stack", None)
        if not stack:
            return ""
        target = next((c.target for c in reversed(stack) if c.target is not None), None)
        return repr((sorted(PassContext.merged_configs(None).items()), target))

    @staticmethod
    def merged_configs(explicit) -> dict:
        """Configs of every enclosing context, innermost winning, then the explicit ones."""
        out = {}
        for ctx in getattr(_ctx_state, "stack", []):
            out.update(ctx.config)
        out.update(normalize_pass_configs(explicit))
        return out
