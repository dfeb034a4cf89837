import os

import pytest

# Every lowering in the suite runs the IR verifier after each pass (ir/verify.py).
os.environ.setdefault("TILEWORKBENCH_VERIFY_IR", "1")
os.environ.setdefault("TILEWORKBENCH_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tw"))


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def nvrtc_check():
    """``backend.nvrtc.compile_check`` (NVRTC compiles for sm_90a without a GPU); skips where
    cuda-bindings or NVRTC is missing."""
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    return compile_check
