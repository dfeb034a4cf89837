import pytest
from bench_helpers import synthetic_record


@pytest.fixture
def record():
    return synthetic_record()
