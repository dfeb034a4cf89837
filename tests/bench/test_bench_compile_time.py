"""The compile-time benchmark's plumbing: fresh processes, fresh caches, the three cases.
NVRTC runs with or without a GPU (cold only: the disk hit loads the cached cubin); on the H200
the module load and the CUDA context (created before the timer) are measured too."""

from tileworkbench.bench.compile_time import measure_compile_times
from tileworkbench.target import detect_arch


def test_cold_then_disk_hit_then_in_process_hit():
    result = measure_compile_times(runs=2)
    assert result["problems"] == []
    runs = result["runs_s"]
    assert len(runs["cold"]) == len(runs["disk_hit"]) == 2 and result["cold"]["total_s"] in runs["cold"]
    assert [r["total_s"] for r in result["cold_runs"]] == runs["cold"]  # each cold run's parts, in order
    assert all(r["nvrtc_s"] > 0 and r["lower_s"] > 0 for r in result["cold_runs"])
    cold, disk = result["cold"], result["disk_hit"]
    assert cold["cache"] == "lowered" and cold["lower_s"] > 0
    assert cold["nvrtc_compiles"] == 1 and cold["nvrtc_s"] > 0 and 0 <= cold["nvrtc_wait_s"] <= cold["nvrtc_s"]
    assert disk["cache"] == "disk" and disk["lower_s"] is None and disk["nvrtc_s"] is None
    assert disk["nvrtc_compiles"] == 0 and result["memory_hit"]["nvrtc_compiles"] == 0
    assert result["memory_hit"]["same_kernel"] is True
    assert result["memory_hit"]["total_s"] < disk["total_s"] < cold["total_s"]
    assert result["cubin_bytes"] > 0 and result["nvrtc_version"]
    assert result["device_loaded"] is (detect_arch() is not None)
    if result["device_loaded"]:  # the context was made before the timer; the cubin loaded
        assert cold["context_init_s"] > 0 and disk["context_init_s"] > 0
        assert cold["module_load_s"] > 0 and disk["module_load_s"] > 0
        assert result["cupy_cache_files_after_cold"] == 0  # CuPy's compiler never ran
    else:
        assert cold["load_s"] is None and cold["context_init_s"] is None


def test_side_by_side_compiles_are_timed_after_a_collection_and_count_the_collectors_time():
    import gc

    from tileworkbench.bench.tilelang_programs import _timed_compile

    def full_collections():
        return gc.get_stats()[2]["collections"]

    before = full_collections()
    seen = {}

    def make():
        seen["collected_first"] = full_collections() - before
        gc.collect()  # a collection inside the compile: its time is counted
        return "kernel"

    kernel, seconds, collecting = _timed_compile(make)
    assert kernel == "kernel" and seen["collected_first"] >= 1
    assert 0 < collecting <= seconds
    assert _timed_compile(lambda: "quiet")[2] == 0
