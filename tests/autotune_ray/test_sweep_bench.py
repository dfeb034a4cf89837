"""``python -m tileworkbench.bench sweep`` (bench/sweep.py) on CPU: a compile-only sweep on the local
process pool and on a local Ray cluster (the command joins it by address, as it would a real one),
the refusals (no GPU to time on, a cluster without GPUs, bad arguments) and the config space."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileworkbench.autotuner import Config, config_space
from tileworkbench.bench import cli, sweep

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster, as in test_ray_sweeps.py; yields its address for the command to join."""
    ray = pytest.importorskip("ray")
    cache = tmp_path_factory.mktemp("ray-cache")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)]),
                                       "TILEWORKBENCH_CACHE_DIR": str(cache)}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def bench(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "tileworkbench.bench", "sweep", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(REPO), check=False)


def _gpu_here() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def test_the_space_is_spread_deterministically_and_fits_in_shared_memory():
    full = config_space(**sweep.SPACE)
    assert len(full) == 72 and sweep.sweep_configs(72) == full
    picked = sweep.sweep_configs(64)
    assert picked == sweep.sweep_configs(64) and len(set(picked)) == 64 and set(picked) <= set(full)
    assert sweep.sweep_configs(4) == [full[0], full[18], full[36], full[54]]
    assert {c.block_N for c in sweep.sweep_configs(8)} == {64, 128, 256}
    with pytest.raises(ValueError, match="between 1 and 72"):
        sweep.sweep_configs(73)


def test_a_compile_only_sweep_runs_on_both_backends_with_cold_caches(cluster, tmp_path):
    done = bench("--compile-only", "--configs", "4", "--size", "512x256x1024", "--ray", cluster,
                 "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    records = list(tmp_path.glob("sweep-*.json"))
    assert len(records) == 1, records
    record = json.loads(records[0].read_text())
    commit = record["machine"]["commit"]
    assert records[0].name.endswith(f"-{commit}.json") and record["complete"] is True
    assert record["schema"] == sweep.SCHEMA and record["suite"] == "sweep"
    settings = record["settings"]
    assert (settings["M"], settings["N"], settings["K"], settings["dtype"]) == (512, 256, 1024, "float16")
    assert settings["compile_only"] is True and settings["n_configs"] == 4 and settings["ray"] == cluster
    assert record["configs"] == [c.name for c in sweep.sweep_configs(4)]

    local, on_ray = record["runs"]
    assert (local["backend"], on_ray["backend"]) == ("local", "ray")
    assert on_ray["address"] == cluster and on_ray["cpus"] == 4 and on_ray["cluster_gpus"] == 0
    for run in (local, on_ray):
        assert "error" not in run, run
        assert [c["name"] for c in run["configs"]] == record["configs"]
        assert all(c["compiled"] and c["registers"] and c["error"] is None and c["ms"] is None
                   for c in run["configs"])
        assert (run["compiled"], run["failed"], run["timed"], run["gpus"], run["best"]) == (4, 0, 0, 0, None)
        assert 0 < run["compile_s"] <= run["wall_s"] and run["benchmark_s"] is None
        assert run["cache_entries"] == 4  # each backend compiled all four into its own fresh cache
    # the same kernels either way
    assert [(c["registers"], c["smem_bytes"]) for c in local["configs"]] == \
           [(c["registers"], c["smem_bytes"]) for c in on_ray["configs"]]
    assert record["speedup"] == pytest.approx(local["wall_s"] / on_ray["wall_s"])
    assert "| local |" in done.stdout and "| ray |" in done.stdout
    assert f"{record['speedup']:.2f}x" in done.stdout and "compile-only sweep" in done.stdout


@pytest.mark.skipif(_gpu_here(), reason="this machine has a GPU to time on")
def test_timing_without_a_gpu_is_refused_in_one_line(tmp_path):
    done = bench("--configs", "4", "--out", str(tmp_path), timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("timing the sweep (--compile-only skips it) needs a CUDA GPU")
    assert len(done.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())


def test_timing_on_a_cluster_without_gpus_is_refused_and_keeps_no_record(cluster, tmp_path):
    done = bench("--configs", "2", "--no-local", "--ray", cluster, "--out", str(tmp_path))
    assert done.returncode == 2, done.stderr[-3000:]
    assert "sweep (ray): RuntimeError: the Ray cluster has 0 GPUs; each timing task needs 1" in done.stderr
    assert "Traceback" not in done.stderr and not list(tmp_path.glob("sweep-*.json"))


@pytest.mark.parametrize("argv, message", [
    (["--size", "4096x0x4096"], "--size takes positive sizes, not '4096x0x4096'"),
    (["--size", "4096x4096"], "--size takes N or MxNxK, not '4096x4096'"),
    (["--size", "big"], "--size takes N or MxNxK (positive integers), not 'big'"),
    (["--configs", "0"], "--configs must be between 1 and 72"),
    (["--dtype", "float32"], "--dtype must be one of float16, bfloat16"),
    (["--no-local"], "--no-local leaves nothing to run without --ray"),
])
def test_bad_arguments_are_refused_plainly(argv, message, tmp_path, capsys):
    assert cli.main(["sweep", "--compile-only", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"sweep: {message}" or err.startswith(f"sweep: {message}"), err
    assert not list(tmp_path.iterdir())


def test_parse_size_reads_squares_and_triples():
    assert sweep.parse_size("4096") == (4096, 4096, 4096)
    assert sweep.parse_size("512X256x1024") == (512, 256, 1024)
    assert isinstance(sweep.sweep_configs(1)[0], Config)
