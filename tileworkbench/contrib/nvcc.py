"""``tilelang.contrib.nvcc`` in part: the GPU's compute capability as TileLang's answers it
(``"9.0"`` on a Hopper GPU), which TileLang's example scripts check before they run. The rest of
it (compiling with nvcc, finding the toolkit) is not here: tileworkbench compiles with NVRTC."""

from __future__ import annotations

from ..errors import NoDeviceError
from ..not_here import backend_part
from ..target import detect_arch


def get_target_compute_version(target=None) -> str:
    """The compute capability of GPU 0 as ``"major.minor"`` (``"9.0"``); ``target`` (a TileLang
    target) is accepted and not read: tileworkbench compiles for the GPU it finds. Without a GPU a
    ``NoDeviceError`` (a ``RuntimeError``, as TileLang's error is)."""
    arch = detect_arch()
    if arch is None:
        raise NoDeviceError("get_target_compute_version: no CUDA GPU here (tileworkbench found none through the "
                            "CUDA driver)")
    digits = arch.removeprefix("sm_").rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``; anything else a ``RuntimeError`` naming it, as TileLang's."""
    parts = str(compute_version).split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise RuntimeError(f"compute version parsing error: {compute_version!r} is not major.minor")
    return int(parts[0]), int(parts[1])


__getattr__ = backend_part(__name__)
