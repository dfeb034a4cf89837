"""On the H200: the quick GEMM suite end to end, the timer, and autotune's GPU step."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)
REPO = Path(__file__).resolve().parents[2]


def test_quick_suite_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tileworkbench.bench", "gemm", "--quick", "--out", str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=580, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = list(tmp_path.glob("gemm-*.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["complete"] is True and len(record["rows"]) == 8
    for row in record["rows"]:
        assert row["correct"], row
        assert row["tflops"] > 1 and row["cublas_tflops"] > 1 and row["ratio"] > 0
        assert row["rel_err"] < row["threshold"]
        assert row["cublas"]["torch"]["correct"], row["cublas"]
        if row["kernel"] != "tileworkbench":  # the spec kernels' rows: timed once, alone
            assert "head_to_head" not in row
            continue
        final = row["head_to_head"]  # --quick: 3 rounds, cuBLAS and two finalists once each per round
        assert final["library"] in ("torch", "cupy") and len(final["finalists"]) == 2
        assert all(len(turns) == 3 for turns in final["ms"].values()) and len(final["ms"]) == 3
        assert row["config"] in final["finalists"] and row["ms"] == statistics.median(final["ms"][row["config"]])
        assert row["ratio"] == final["median_ms"][final["cublas"]] / row["ms"] and row["selection"]["ratio"] > 0
    assert record["machine"]["gpu"] and record["machine"]["cuda"]
    comp = record["compile"]
    assert comp["problems"] == [] and comp["device_loaded"]
    # What each case did, not how long it took (speed belongs to the benchmark: a cold compile beat a
    # disk hit once on a busy host): NVRTC ran once cold, never on a disk or in-process hit.
    assert comp["cold"]["cache"] == "lowered" and comp["cold"]["nvrtc_compiles"] == 1, comp
    assert comp["disk_hit"]["cache"] != "lowered" and comp["disk_hit"]["nvrtc_compiles"] == 0, comp
    assert comp["memory_hit"]["same_kernel"] and comp["memory_hit"]["nvrtc_compiles"] == 0, comp
    assert "[8/8]" in done.stderr
    md = (tmp_path / "table.md").read_text()
    assert "| 1024x1024x1024 | fp16 |" in md and "| 4096x4096x4096 | bf16 |" in md
    assert "| matmul_tma_copy_store s3 | 4096x4096x4096 | fp16 |" in md
    assert done.stdout.strip().splitlines()[-1] == "8 rows, 0 failed the correctness check"


def test_timer_measures_a_cublas_gemm_plausibly(torch):
    from tileworkbench.backend.timing import Timer, rel_err

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
    timing = Timer().time(lambda: torch.matmul(a, b, out=c), warmup=5, rep=20)
    assert 50 < timing.tflops(2 * 4096 ** 3) < 1200  # an H200 does ~700 dense fp16
    assert timing.ms_min <= timing.ms
    ref = a.double() @ b.double()
    assert rel_err(c, ref) < 2e-3
    c.fill_(float("nan"))
    assert rel_err(c, ref) != rel_err(c, ref)  # NaN: an unwritten output never passes


def test_autotune_benchmarks_on_the_gpu(torch, tmp_path, monkeypatch):
    from tileworkbench.autotuner import Config, autotune
    from tileworkbench.examples.gemm import matmul

    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    configs = [Config(64, 64, 32, 2, 128), Config(128, 128, 32, 3, 128)]
    result = autotune(matmul, configs, args=(1024, 1024, 1024), kwargs={"dtype": "float16"}, out_idx=[2],
                      ref_program=lambda a, b: a.double() @ b.double(), max_rel_err=2e-3, warmup=3, rep=10,
                      progress=False)
    assert result.config in configs and result.ms > 0 and len(result.trials) == 2
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    c = result.kernel(a, b)
    assert ((c.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()).item() < 2e-3
    again = autotune(matmul, configs, args=(1024, 1024, 1024), kwargs={"dtype": "float16"}, out_idx=[2],
                     progress=False)
    assert again.from_memory and again.config == result.config


def test_quick_attention_suite_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tileworkbench.bench", "attention", "--quick", "--ours-only",
                           "--out", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=580,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = tmp_path.glob("attention-*.json")
    record = json.loads(path.read_text())
    assert record["complete"] and len(record["rows"]) == 3 and record["copy_gbps"] > 1000
    for row in record["rows"]:
        ours = row["impls"]["tileworkbench"]
        assert ours["correct"] and ours["max_abs_err"] < 1e-2 and ours["tflops"] > 1, row
        assert len(ours["rounds_ms"]) == 3 and ours["ms"] == statistics.median(ours["rounds_ms"])
        assert row["sdpa_best"].startswith("sdpa_") and row["vs_sdpa"] > 0
        assert "tilelang" not in row["impls"]
    assert "[3/3]" in done.stderr and "Goals:" in done.stdout
