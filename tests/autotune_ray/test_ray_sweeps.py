"""autotune(backend="ray") on a local Ray cluster (no GPU): compile-only sweeps against the local
process pool, CPU-timed sweeps (gpus_per_trial=0, a timer reading the kernel each task received),
and faults: a worker that dies while compiling, a trial that hangs past its time limit, a sweep
resumed from its record. The GPU timing path is GpuBenchmark, the same as on one machine."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from tileworkbench.autotuner import Config, autotune, compile_candidates  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ray_helpers  # noqa: E402

CONFIGS = [Config(128, 128, 32, 2, 128), Config(128, 64, 32, 2, 128), Config(64, 128, 32, 2, 128)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster whose workers import this folder and the source tree, with a compile
    cache of their own."""
    cache = tmp_path_factory.mktemp("ray-cache")
    meeting = tmp_path_factory.mktemp("ray-meeting")  # ray_helpers.side_by_side_matmul's
    repo = str(HERE.parents[1])
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), repo]),
                                       "TILEWORKBENCH_CACHE_DIR": str(cache),
                                       "TW_MEETING_DIR": str(meeting)}})
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def own_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path / "cache"))  # the driver's memory of best configs


def sweep(builder, **kw):
    return autotune(builder, CONFIGS, out_idx=[2], target="sm_90a", backend="ray", use_memory=False,
                    progress=False, **kw)


def test_a_compile_only_sweep_finds_what_the_local_pool_finds(cluster):
    on_ray = sweep(ray_helpers.side_by_side_matmul, benchmark=False)
    here = compile_candidates(ray_helpers.plain_matmul, CONFIGS, out_idx=[2], target="sm_90a", progress=False)
    assert [c.config for c in on_ray.compiled] == CONFIGS
    assert [(c.ok, c.registers, c.spills_bytes, c.smem_bytes) for c in on_ray.compiled] == \
           [(c.ok, c.registers, c.spills_bytes, c.smem_bytes) for c in here]
    assert all(c.ok for c in on_ray.compiled) and on_ray.trials == []
    assert len({c.worker_pid for c in on_ray.compiled}) > 1  # the compiles ran side by side


def test_a_timed_sweep_picks_the_fastest_and_returns_its_kernel(cluster):
    result = sweep(ray_helpers.plain_matmul, timer=ray_helpers.source_timer, gpus_per_trial=0)
    assert result.config == Config(128, 128, 32, 2, 128)
    assert sorted(t.config for t in result.trials) == sorted(CONFIGS) and all(t.ms for t in result.trials)
    local = compile_candidates(ray_helpers.plain_matmul, [result.config], out_idx=[2], target="sm_90a",
                               progress=False, max_workers=0)
    assert local[0].ok and result.kernel.get_kernel_source() == result.kernel.record["device_source"]
    assert result.ms == pytest.approx(ray_helpers.source_timer(result.kernel, result.config))


def test_a_worker_that_dies_costs_its_config_not_the_sweep(cluster):
    result = sweep(ray_helpers.crashing_matmul, timer=ray_helpers.source_timer, gpus_per_trial=0)
    dead = next(c for c in result.compiled if c.config.block_N == 64)
    assert not dead.ok and dead.error_type == "WorkerCrashedError" and "died" in dead.error
    assert [c.config for c in result.compiled if c.ok] == [CONFIGS[0], CONFIGS[2]]
    assert result.config == CONFIGS[0] and any(cfg == CONFIGS[1] for cfg, _ in result.skipped)


def test_a_trial_that_hangs_is_stopped_at_its_time_limit(cluster):
    start = time.monotonic()
    result = sweep(ray_helpers.plain_matmul, timer=ray_helpers.hanging_timer, gpus_per_trial=0, trial_timeout_s=20)
    assert time.monotonic() - start < 120  # not the hour the hanging trial asked for
    hung = next(t for t in result.trials if t.config.block_N == 64)
    assert hung.ms is None and "TrialTimeout" in hung.error and "20 s" in hung.error
    assert result.config == CONFIGS[0]


def test_a_sweep_resumes_from_its_record(cluster, tmp_path):
    record = tmp_path / "sweep.jsonl"
    first = autotune(ray_helpers.plain_matmul, CONFIGS[2:], out_idx=[2], target="sm_90a", backend="ray",
                     use_memory=False, progress=False, timer=ray_helpers.source_timer, gpus_per_trial=0, record=record)
    assert first.config == CONFIGS[2]
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [entry["config"] for entry in lines] == [CONFIGS[2].as_kwargs()] and lines[0]["ms"] > 0
    # the same sweep over all three: the finished config comes from the record, the rest run
    again = sweep(ray_helpers.plain_matmul, timer=ray_helpers.refusing_timer, gpus_per_trial=0, record=record)
    assert again.config == CONFIGS[0]
    assert {t.config: t.ms for t in again.trials}[CONFIGS[2]] == lines[0]["ms"]
    assert [c.config for c in again.compiled] == CONFIGS[:2]  # only the unfinished ones compiled
    assert len(record.read_text().splitlines()) == 3


def test_timing_on_gpus_the_cluster_lacks_is_refused_plainly(cluster):
    with pytest.raises(RuntimeError, match="the Ray cluster has 0 GPUs; each timing task needs 1"):
        sweep(ray_helpers.plain_matmul, timer=ray_helpers.source_timer)


def test_bad_sweep_arguments_are_refused(cluster):
    with pytest.raises(ValueError, match="backend must be 'local' or 'ray'"):
        autotune(ray_helpers.plain_matmul, CONFIGS, out_idx=[2], backend="slurm")
    with pytest.raises(ValueError, match="trial_timeout_s must be positive"):
        sweep(ray_helpers.plain_matmul, trial_timeout_s=0)
    with pytest.raises(ValueError, match="pass a timer="):
        sweep(ray_helpers.plain_matmul, gpus_per_trial=0)


def test_without_ray_the_backend_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install 'tileworkbench\[ray\]'"):
        autotune(ray_helpers.plain_matmul, CONFIGS, out_idx=[2], target="sm_90a", backend="ray", progress=False)


def test_the_public_autotune_takes_the_ray_backend(cluster):
    import tileworkbench as tw

    result = tw.autotune(ray_helpers.plain_matmul, CONFIGS[:2], out_idx=[2], target="sm_90a", backend="ray",
                         benchmark=False, progress=False)
    assert [c.ok for c in result.compiled] == [True, True]


def test_the_sweep_reads_as_a_dataframe_fastest_first(cluster):
    pytest.importorskip("pandas")
    result = sweep(ray_helpers.plain_matmul, timer=ray_helpers.hanging_timer, gpus_per_trial=0, trial_timeout_s=20)
    frame = result.to_dataframe()
    assert list(frame["block_N"]) == [128, 128, 64] and frame["ms"].iloc[0] == result.ms
    assert frame["compiled"].all() and frame["registers"].notna().all()
    assert "TrialTimeout" in frame["error"].iloc[2] and frame["ms"].isna().iloc[2]


# ---- the GEMM suite on Ray (bench/gemm_ray.py) ----------------------------------------------------

def test_the_gemm_suite_compiles_every_candidate_on_the_cluster(cluster):
    from tileworkbench.bench import gemm
    from tileworkbench.bench.gemm_ray import compile_all
    from tileworkbench.autotuner.ray_backend import RaySweep

    jobs = gemm.plan([(256, 256, 256)], ["float16"], spec=False)
    records = compile_all(RaySweep(), jobs)
    cands = jobs[0].candidates
    assert set(records) == {gemm.candidate_key(c) for c in cands} and len(records) == len(cands)
    import tileworkbench as tw

    for cand in cands[:2]:  # each record is that candidate's kernel, cubin included
        record = records[gemm.candidate_key(cand)]
        here = tw.lower(cand.build(), pass_configs=cand.pass_configs, target="sm_90a")
        assert record["device_source"] == here.device_source and record["cubin"]


def test_the_gemm_suite_on_a_cluster_without_gpus_is_refused(cluster):
    from tileworkbench.bench import gemm
    from tileworkbench.bench.gemm_ray import run_suite_on_ray

    jobs = gemm.plan([(256, 256, 256)], ["float16"], spec=False)
    with pytest.raises(RuntimeError, match="the Ray cluster has no GPU"):
        run_suite_on_ray(jobs, gemm.Settings(), None)


def test_gemm_ray_command_without_gpus_fails_plainly_and_keeps_no_record(tmp_path):
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    done = subprocess.run([sys.executable, "-m", "tileworkbench.bench", "gemm", "--quick", "--sizes", "256",
                           "--ray", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300, env=env,
                          check=False)
    assert done.returncode == 2 and "gemm --ray: the Ray cluster has no GPU" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not list(tmp_path.glob("gemm-*.json"))


def test_a_worker_keeps_one_timer_for_its_trials_of_a_sweep(cluster):
    configs = [Config(m, n, 32, stages, 128) for m in (64, 128) for n in (64, 128) for stages in (2, 3)]

    def trials():
        result = autotune(ray_helpers.plain_matmul, configs, out_idx=[2], target="sm_90a", backend="ray",
                          use_memory=False, progress=False, timer=ray_helpers.CountingTimer(), gpus_per_trial=0)
        per_worker: dict = {}
        for trial in sorted(result.trials, key=lambda t: t.ms):
            count, pid = round(trial.ms), round((trial.ms - round(trial.ms)) * 1e9)
            per_worker.setdefault(pid, []).append(count)
        return per_worker

    first = trials()
    assert sum(len(v) for v in first.values()) == len(configs)
    for counts in first.values():  # each worker counted its own trials of this sweep: 1, 2, 3...
        assert counts == list(range(1, len(counts) + 1))
    assert len(first) < len(configs)  # 8 trials on 4 CPU slots: some worker timed more than one
    again = trials()  # a new sweep: every worker starts from a fresh timer
    assert all(counts[0] == 1 for counts in again.values())
