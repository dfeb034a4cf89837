import os

import pytest

# Every lowering in the suite runs the IR verifier after each pass (ir/verify.py).
os.environ.setdefault("TILEWORKBENCH_VERIFY_IR", "1")
os.environ.setdefault("TILEWORKBENCH_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tw"))


@pytest.fixture
def torch():
    return pytest.importorskip("torch")
