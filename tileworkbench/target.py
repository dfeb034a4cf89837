"""Compilation targets, pass configuration keys and the context that carries them.

``Target`` says what we generate code for; ``PassContext`` is a context manager carrying pass
configs (and optionally a target) to every ``lower``/``compile`` inside it, as in TileLang.
"""

from __future__ import annotations

import enum
import numbers
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import user_error


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
    TW_GEMM_OVERLAP = "tw.gemm_overlap"  # two-gemm loops: the softmax beside the previous P @ V (default: constant trip counts)
    TW_TIMELINE = "tw.timeline"  # True or k: the kernel records a measured timeline in every (k-th) block
    TW_TIMELINE_CAPACITY = "tw.timeline_capacity"  # events each recording thread keeps (default 2048)
    TW_VERIFY_IR = "tw.verify_ir"  # the IR verifier after every pass (as TILEWORKBENCH_VERIFY_IR=1)
    TW_CODE_OFFSET = "tw.code_offset"  # k fillers at the top of the kernel: its code moved 16 k bytes (a placement probe)

    def __str__(self) -> str:
        return self.value


_KNOWN_KEYS = {k.value for k in PassConfigKey}
# The values each key takes (every other key is a switch: True or False).
BARRIER_CHECK_MODES = ("error", "warn", "off")
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
        if name not in _KNOWN_KEYS:
            known = ", ".join(sorted(_KNOWN_KEYS))
            raise user_error(f"unknown pass config {name!r}; known keys: {known}")
        problem = _config_value_problem(name, value)
        if problem:
            raise user_error(f"pass config {name} {problem}, not {value!r}")
        out[name] = value
    return out


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
