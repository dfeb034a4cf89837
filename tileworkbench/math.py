"""TileLang's ``tilelang.math``: integer helpers for sizes outside kernels."""

from __future__ import annotations


def cdiv(a, b):
    """``ceil(a / b)`` of two integers (TileLang's ``tilelang.cdiv``)."""
    return -(-a // b)


def next_power_of_2(x: int) -> int:
    """The least power of two at least ``x`` (1 for ``x`` <= 1; TileLang's ``tilelang.next_power_of_2``)."""
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()
