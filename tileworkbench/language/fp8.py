"""``tilelang.language.fp8``: which FP8 types a program should use on this platform. On NVIDIA GPUs
(the only ones tileworkbench targets) those are E4M3FN and E5M2, whatever the device."""

from __future__ import annotations

from .types import float8_e4m3fn, float8_e5m2


def _format(fp8_format: str) -> str:
    if fp8_format not in ("e4m3", "e5m2"):
        raise ValueError(f"unsupported FP8 format {fp8_format!r}: 'e4m3' or 'e5m2'")
    return fp8_format


def determine_fp8_type(fp8_format: str = "e4m3", device=None):
    """``T.float8_e4m3fn`` for ``"e4m3"``, ``T.float8_e5m2`` for ``"e5m2"`` (``device`` is TileLang's
    for ROCm's other FP8 types, which tileworkbench does not target)."""
    return float8_e4m3fn if _format(fp8_format) == "e4m3" else float8_e5m2


def determine_torch_fp8_type(fp8_format: str = "e4m3", device=None):
    """torch's dtype of ``determine_fp8_type``'s type."""
    import torch

    return torch.float8_e4m3fn if _format(fp8_format) == "e4m3" else torch.float8_e5m2
