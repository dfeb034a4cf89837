"""Target detection: GPU 0's arch comes from the CUDA driver API (cuda.bindings.driver)."""

import types

import pytest

from tileworkbench import target


def _fake_driver(count=1, cc=(9, 0), init=0, missing_library=False):
    """The driver entry points the probe calls, for a machine with ``count`` GPUs of compute
    capability ``cc``; ``init`` is cuInit's result (100: CUDA_ERROR_NO_DEVICE)."""
    attr = types.SimpleNamespace(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
                                 CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor")

    def cu_init(flags):
        if missing_library:  # what cuda.bindings raises where libcuda cannot be found
            raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')
        return (init,)

    return types.SimpleNamespace(
        CUdevice_attribute=attr, cuInit=cu_init,
        cuDeviceGetCount=lambda: (0, count),
        cuDeviceGet=lambda ordinal: (0, ordinal),
        cuDeviceGetAttribute=lambda attribute, device: (0, {"major": cc[0], "minor": cc[1]}[attribute]))


@pytest.mark.parametrize("driver, arch", [
    (_fake_driver(cc=(9, 0)), "sm_90a"),
    (_fake_driver(cc=(10, 0)), "sm_100a"),
    (_fake_driver(cc=(8, 6)), "sm_86"),
    (_fake_driver(count=0), None),
    (_fake_driver(init=100), None),
    (_fake_driver(missing_library=True), None),
])
def test_the_probe_reads_the_compute_capability_from_the_driver(monkeypatch, driver, arch):
    import cuda.bindings

    monkeypatch.setattr(cuda.bindings, "driver", driver, raising=False)
    assert target._probe_arch() == arch


def test_the_probe_does_not_touch_the_runtime_api(monkeypatch):
    """The runtime module's import and initialisation ran before NVRTC in every first compile."""
    import sys

    import cuda.bindings

    monkeypatch.setattr(cuda.bindings, "driver", _fake_driver(), raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", None)  # importing it now raises
    monkeypatch.delattr(cuda.bindings, "runtime", raising=False)
    assert target._probe_arch() == "sm_90a"
