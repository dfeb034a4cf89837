import os

import pytest

os.environ.setdefault("TILEWORKBENCH_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "tw"))


@pytest.fixture
def torch():
    return pytest.importorskip("torch")
