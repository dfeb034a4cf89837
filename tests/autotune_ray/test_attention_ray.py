"""``python -m tileworkbench.bench attention --ray`` (bench/attention_ray.py) on local Ray clusters
without a GPU: our kernel of every row compiled on CPU workers and shipped as the records a local
compile makes (cubin included, loadable as the kernel ``run_row`` calls); rows streamed into the
record in the suite's order, each failed row with the error its GPU task died of (a cluster with
logical GPUs but no torch on the workers); a cluster without GPUs refused in one line, by the
function and by the command, with nothing written."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from tileworkbench.autotuner.ray_backend import RaySweep  # noqa: E402
from tileworkbench.bench import attention, attention_ray, cli  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
QUICK = attention.select_rows(None, quick=True)
REFUSAL = ("attention --ray: the Ray cluster has no GPU: the attention suite's rows each need one "
           "(its compiles alone would run on CPU workers)")


def _start(cache: Path, **resources):
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False, **resources,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)]),
                                       "TILEWORKBENCH_CACHE_DIR": str(cache)}})


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")


@pytest.fixture
def logical_gpu_cluster(tmp_path):
    """Two GPUs the scheduler counts but that are not there (nor is torch): every row's GPU task
    fails. Function-scoped and first in the file, so it is shut down before ``cluster`` starts."""
    _start(tmp_path / "ray-cache", num_gpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local cluster of CPUs only; yields its address for the command to join."""
    _start(tmp_path_factory.mktemp("ray-cache"))
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="the rows would get further than "
                                                                           "importing torch here")
def test_rows_stream_into_the_record_in_order_each_with_the_error_its_task_died_of(logical_gpu_cluster, tmp_path,
                                                                                   capsys):
    log = io.StringIO()
    rc = attention_ray.run_on_ray(QUICK, tmp_path / "out", None, ours_only=True, seed=5, log=log)
    assert rc == 1  # ours did not run correctly on any row
    (path,) = (tmp_path / "out").glob("attention-*.json")
    record = json.loads(path.read_text())
    assert record["schema"] == attention.SCHEMA and record["suite"] == "attention" and record["complete"] is True
    assert record["settings"]["seed"] == 5 and record["settings"]["rounds"] == attention.ROUNDS
    assert record["settings"]["ray"] == {"address": "local", "gpus": 2.0, "cpus": 4, "compiled_for": None,
                                         "row_timeout_s": attention_ray.ROW_TIMEOUT_S}
    assert record["machine"]["gpu"] is None and record["tilelang"] is None and "copy_gbps" not in record
    assert [r["row"] for r in record["rows"]] == [r.name for r in QUICK]
    for row, got in zip(QUICK, record["rows"], strict=True):
        assert got["shape"] == attention.asdict(row) and got["flops"] == row.flops
        assert got["impls"] == {"tileworkbench": {"error": "ModuleNotFoundError: No module named 'torch'"}}
    assert record["goals"] == [f"{r.name}: ours did not run correctly" for r in QUICK]
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("attention suite on Ray: 3 rows over 2 GPU(s) (None); record ")
    compiled = [line for line in lines if line.startswith("[compile ")]
    assert len(compiled) == 3 and all(" failed " not in line for line in compiled)  # the CPU compiles worked
    assert sorted(line.split()[1] for line in compiled) == ["1/3]", "2/3]", "3/3]"]
    progress = [line for line in lines if line.startswith("[") and not line.startswith("[compile")]
    assert [line.split()[0] for line in progress] == ["[1/3]", "[2/3]", "[3/3]"]
    assert all("ModuleNotFoundError: No modu" in line for line in progress)
    out = capsys.readouterr().out
    assert all(f"| {r.name} | ModuleNotFoundError: No modu" in out for r in QUICK)
    assert "- decode 8x32x1x8192x128: ours did not run correctly" in out


def test_the_compile_fan_out_ships_each_rows_kernel_as_a_local_compile_makes_it(cluster):
    log = io.StringIO()
    sweep = RaySweep(None, attention_ray.COMPILE_TIMEOUT_S)
    with sweep.session():  # the cluster's connection
        shipped = attention_ray.compile_rows(sweep, QUICK, log=log)
    assert len(log.getvalue().splitlines()) == len(QUICK) and " failed " not in log.getvalue()
    for row, got in zip(QUICK, shipped, strict=True):
        assert got is not None and got["row"] == row.name and got["compile_s"] > 0
        local = attention.ours(row, load_device=False)
        parts = getattr(local, "kernels", None) or [local]
        assert got["sequence"] is row.decode and len(got["records"]) == (2 if row.decode else 1) == len(parts)
        assert [r["device_source"] for r in got["records"]] == [k.record["device_source"] for k in parts]
        assert [r["host_source"] for r in got["records"]] == [k.record["host_source"] for k in parts]
        assert all(r["cubin"] and r["target"] == {"kind": "cuda", "arch": "sm_90a"} for r in got["records"])
        loaded = attention_ray.load_ours(got, load_device=False)  # what the row's GPU task calls
        assert type(loaded) is type(local) and loaded.name == local.name
        assert loaded.out_idx == local.out_idx == [3] and loaded.params == local.params
        assert loaded.get_kernel_source() == local.get_kernel_source()


def test_the_function_refuses_a_cluster_without_gpus_before_writing(cluster, tmp_path):
    with pytest.raises(RuntimeError) as info:
        attention_ray.run_on_ray(QUICK, tmp_path / "out", None, log=io.StringIO())
    assert f"attention --ray: {info.value}" == REFUSAL
    assert not (tmp_path / "out").exists()


def test_the_command_refuses_a_cluster_without_gpus_in_one_line(cluster, tmp_path, capsys):
    assert cli._parser().parse_args(["attention", "--ray"]).ray == "local"
    assert cli._parser().parse_args(["attention"]).ray is None
    assert cli.main(["attention", "--quick", "--ray", cluster, "--out", str(tmp_path / "in-process")]) == 2
    assert capsys.readouterr().err.strip() == REFUSAL
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-m", "tileworkbench.bench", "attention", "--quick", "--ray", cluster,
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300, env=env,
                          cwd=str(REPO), check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == REFUSAL and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "in-process").exists()
