"""The compile-time benchmark's plumbing: fresh processes, fresh caches, the three cases.
Without a GPU it measures the tileworkbench side only; on the H200 it includes NVRTC and load."""

from tileworkbench.bench.compile_time import measure_compile_times
from tileworkbench.target import detect_arch


def test_cold_then_disk_hit_then_in_process_hit():
    result = measure_compile_times()
    assert result["problems"] == []
    assert result["cold"]["cache"] == "lowered" and result["cold"]["lower_s"] > 0
    assert result["disk_hit"]["cache"] == "disk" and result["disk_hit"]["lower_s"] is None
    assert result["memory_hit"]["same_kernel"] is True
    assert result["memory_hit"]["total_s"] < result["cold"]["total_s"]
    assert result["device_loaded"] is (detect_arch() is not None)
    if result["device_loaded"]:  # NVRTC ran cold and CuPy's disk cache served the second process
        assert result["cold"]["load_s"] > result["disk_hit"]["load_s"]
        assert result["cupy_cache_files_after_cold"] > 0
