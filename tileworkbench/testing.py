"""Test helpers mirroring ``tilelang.testing``: skip GPU tests cleanly where there is no GPU."""

from __future__ import annotations


from .target import detect_arch


def cuda_compute_version() -> tuple[int, int] | None:
    arch = detect_arch()
    if arch is None:
        return None
    digits = arch.removeprefix("sm_").rstrip("a")
    return int(digits[:-1]), int(digits[-1])


def _mark(fn, condition, reason):
    import pytest

    fn = pytest.mark.gpu(fn)
    return pytest.mark.skipif(condition, reason=reason)(fn)


def requires_cuda(fn):
    """Marks a test as a GPU test and skips it when no CUDA GPU is present."""
    return _mark(fn, cuda_compute_version() is None, "needs a CUDA GPU; none is present")


def requires_cuda_compute_version_ge(major: int, minor: int = 0):
    def deco(fn):
        version = cuda_compute_version()
        return _mark(fn, version is None or version < (major, minor),
                     f"needs compute capability >= {major}.{minor}; "
                     f"this machine has {'no GPU' if version is None else '%d.%d' % version}")

    return deco


def gpu_marks(major: int = 9, minor: int = 0) -> list:
    """``pytestmark = gpu_marks(9, 0)``: a whole module of GPU tests, skipped without one."""
    import pytest

    version = cuda_compute_version()
    reason = (f"needs compute capability >= {major}.{minor}; "
              f"this machine has {'no GPU' if version is None else '%d.%d' % version}")
    return [pytest.mark.gpu, pytest.mark.skipif(version is None or version < (major, minor), reason=reason)]


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, numpy's and (where installed) torch's generators, CUDA's too, as
    ``tilelang.testing.set_random_seed`` does for the examples that call it."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def main():
    import sys

    import pytest

    sys.exit(pytest.main([sys.argv[0], "-v"]))


__all__ = ["gpu_marks", "requires_cuda", "requires_cuda_compute_version_ge", "cuda_compute_version", "main",
           "set_random_seed"]
