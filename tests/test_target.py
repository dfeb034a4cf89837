"""Target detection: GPU 0's arch comes from the CUDA driver library through ctypes."""

import ctypes

import pytest

from tileworkbench import target


class _FakeDriver:
    """The four driver entry points the probe calls, for a machine with ``count`` GPUs of
    compute capability ``cc``; ``init`` is cuInit's result (100: CUDA_ERROR_NO_DEVICE)."""

    def __init__(self, count=1, cc=(9, 0), init=0):
        self.count, self.cc, self.init = count, cc, init

    def cuInit(self, flags):
        return self.init

    def cuDeviceGetCount(self, out):
        out._obj.value = self.count
        return 0

    def cuDeviceGet(self, out, ordinal):
        out._obj.value = ordinal
        return 0

    def cuDeviceGetAttribute(self, out, attribute, device):
        out._obj.value = {target._CC_MAJOR: self.cc[0], target._CC_MINOR: self.cc[1]}[attribute]
        return 0


@pytest.mark.parametrize("driver, arch", [
    (_FakeDriver(cc=(9, 0)), "sm_90a"),
    (_FakeDriver(cc=(10, 0)), "sm_100a"),
    (_FakeDriver(cc=(8, 6)), "sm_86"),
    (_FakeDriver(count=0), None),
    (_FakeDriver(init=100), None),
])
def test_the_probe_reads_the_compute_capability_from_the_driver(monkeypatch, driver, arch):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: driver)
    assert target._probe_arch() == arch


def test_no_driver_library_means_no_gpu(monkeypatch):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert target._probe_arch() is None
