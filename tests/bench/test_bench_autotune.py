"""autotune: the parallel compile step (no GPU needed), skipping invalid configs, and its disk memory."""

import json
import os

import pytest

from tileworkbench.autotuner import (
    Config,
    NeedsGPUError,
    autotune,
    compile_candidates,
    config_space,
    memory_path,
    recall,
)
from tileworkbench.autotuner.tuner import gpu_present
from tileworkbench.examples.gemm import matmul
from tileworkbench.jit import cache

SMALL = [Config(64, 64, 32, 2, 128), Config(128, 128, 64, 2, 128)]
INVALID = Config(64, 64, 8, 2, 128)  # T.gemm needs K a multiple of 16: a CompileError
PROBLEM = dict(args=(256, 256, 256), kwargs={"dtype": "float16"}, out_idx=[2])


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path, monkeypatch):
    """Workers inherit the environment, so they fill this folder too."""
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    cache.MEMORY.clear()
    yield tmp_path / "cache"
    cache.MEMORY.clear()


def test_parallel_compile_step_keeps_order_and_skips_invalid_configs(own_cache_dir):
    results = compile_candidates(matmul, SMALL + [INVALID], (256, 256, 256), {"dtype": "float16"}, [2],
                                 target={"kind": "cuda", "arch": "sm_90"}, max_workers=2, progress=False)
    assert [r.config for r in results] == SMALL + [INVALID]
    assert [r.ok for r in results] == [True, True, False]
    assert all(r.registers and r.registers > 0 and r.spills_bytes == 0 for r in results[:2])
    # two stages of A and B tiles (fp16), the persistent kernel's epilogue tile (fp16), then the
    # warp-specialised pipeline's full and empty barriers (one 8-byte mbarrier a stage each)
    assert results[1].smem_bytes == 2 * (128 * 64 + 64 * 128) * 2 + 128 * 128 * 2 + 2 * 2 * 8
    assert results[2].error_type == "CompileError" and "multiple of 16" in results[2].error
    assert all(r.worker_pid not in (None, os.getpid()) for r in results)  # compiled in worker processes
    assert len(list(own_cache_dir.glob("*.json"))) == 2  # the workers filled the parent's disk cache


@pytest.mark.skipif(gpu_present(), reason="checks the behaviour without a GPU")
def test_without_a_gpu_autotune_compiles_then_says_benchmarking_needs_one(capsys):
    with pytest.raises(NeedsGPUError, match="needs a CUDA GPU") as info:
        autotune(matmul, SMALL + [INVALID], max_workers=2, **PROBLEM)
    result = info.value.result
    assert result.valid_configs == SMALL
    assert [c for c, _ in result.skipped] == [INVALID] and "CompileError" in result.skipped[0][1]
    assert "skipped 64x64x8 s2 t128: CompileError" in capsys.readouterr().err


def test_benchmark_false_returns_the_compiled_candidates():
    result = autotune(matmul, SMALL + [INVALID], benchmark=False, max_workers=2, progress=False, **PROBLEM)
    assert result.config is None and result.kernel is None
    assert result.valid_configs == SMALL and len(result.skipped) == 1


def test_a_builder_defined_in_a_function_compiles_too():
    def local_builder(M, N, K, **tile):  # cannot be pickled by reference: the fork path
        return matmul(M, N, K, **tile)

    result = autotune(local_builder, SMALL[:1], benchmark=False, max_workers=1, progress=False, **PROBLEM)
    assert result.valid_configs == SMALL[:1]


def test_no_valid_config_is_an_error():
    with pytest.raises(ValueError, match="none of the 1 configs compiled"):
        autotune(matmul, [INVALID], benchmark=False, max_workers=1, progress=False, **PROBLEM)


def test_best_config_is_remembered_on_disk_and_reused(own_cache_dir):
    speeds = {SMALL[0]: 2.0, SMALL[1]: 1.0}
    timed = []

    def timer(kernel, config):
        timed.append(config)
        return speeds[config]

    first = autotune(matmul, SMALL, timer=timer, max_workers=2, progress=False, **PROBLEM)
    assert first.config == SMALL[1] and first.ms == 1.0 and not first.from_memory
    assert sorted(timed) == sorted(SMALL)
    assert memory_path() == own_cache_dir / "autotune" / "best.json"
    entry = json.loads(memory_path().read_text())[first.key]
    assert entry["config"]["block_M"] == 128 and entry["params"][0]["shape"] == [256, 256]
    assert entry["params"][0]["dtype"] == "float16" and "matmul" in entry["builder"]

    cache.clear()  # the compile cache's clear must not forget tuning results
    cache.MEMORY.clear()

    def no_timer(kernel, config):
        raise AssertionError("a remembered problem must not be benchmarked again")

    again = autotune(matmul, SMALL, timer=no_timer, progress=False, **PROBLEM)
    assert again.from_memory and again.config == SMALL[1] and again.kernel is not None
    assert recall(first.key)["config"] == SMALL[1]

    other = autotune(matmul, SMALL, args=(512, 256, 256), kwargs={"dtype": "float16"}, out_idx=[2], timer=timer,
                     max_workers=2, progress=False)  # another shape: another key, tuned afresh
    assert not other.from_memory and other.key != first.key
    retuned = autotune(matmul, SMALL, timer=timer, use_memory=False, max_workers=2, progress=False, **PROBLEM)
    assert not retuned.from_memory


def test_a_config_failing_at_benchmark_time_is_skipped():
    def timer(kernel, config):
        if config == SMALL[0]:
            raise RuntimeError("launch failed")
        return 1.0

    result = autotune(matmul, SMALL, timer=timer, use_memory=False, max_workers=2, progress=False, **PROBLEM)
    assert result.config == SMALL[1]
    assert [(c, r) for c, r in result.skipped] == [(SMALL[0], "RuntimeError: launch failed")]


def test_config_space_drops_configs_that_cannot_fit_in_shared_memory():
    space = config_space(block_M=(128, 256), block_N=(256,), block_K=(64, 128), num_stages=(4,), threads=(256,))
    assert Config(128, 256, 64, 4, 256) in space  # 192 KiB
    assert Config(256, 256, 128, 4, 256) not in space  # 512 KiB
    assert all(c.pipeline_smem_bytes() <= 227 * 1024 for c in space)
    assert Config(128, 128, 32, 3, 256).as_kwargs() == {"block_M": 128, "block_N": 128, "block_K": 32,
                                                        "num_stages": 3, "threads": 256}


def test_default_space_holds_the_configs_the_bench_found_best():
    # 1024^3: 64x128x64 with 8 stages; 4096^3: 128x256x64 with 3 (BENCHMARKS.md)
    space = config_space()
    assert Config(64, 128, 64, 8, 128) in space and Config(128, 256, 64, 3, 256) in space
    assert all(c.pipeline_smem_bytes() <= 227 * 1024 for c in space)
