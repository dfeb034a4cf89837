"""The command line, the thin benchmarks/gemm.py wrapper, machine metadata, and the rule that the
GPU-side modules never import pandas or matplotlib (the H200 image may not have them)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_helpers import synthetic_record

from tileworkbench.bench import machine, schema, table
from tileworkbench.target import detect_arch

REPO = Path(__file__).resolve().parents[2]


def run(*args, env=None):
    env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_update_md_from_the_newest_record_in_a_folder(tmp_path):
    results = tmp_path / "results"
    schema.write_record(synthetic_record(date="2026-12-01T00:00:00Z", commit="old0001"), results)
    schema.write_record(synthetic_record(date="2026-12-03T00:00:00Z", commit="new0002"), results)
    md = tmp_path / "B.md"
    md.write_text(f"head\n{table.MARK_START}\n{table.NO_MEASUREMENT}\n{table.MARK_END}\n")
    done = run("-m", "tileworkbench.bench", "update-md", "--md", str(md), "--results", str(results))
    assert done.returncode == 0, done.stderr
    text = md.read_text()
    assert "`new0002`" in text and "old0001" not in text and table.NO_MEASUREMENT not in text
    assert "updated" in done.stdout


def test_update_md_without_any_record_leaves_the_file_alone(tmp_path):
    md = tmp_path / "B.md"
    md.write_text(f"{table.MARK_START}\n{table.NO_MEASUREMENT}\n{table.MARK_END}\n")
    before = md.read_text()
    done = run("-m", "tileworkbench.bench", "update-md", "--md", str(md), "--results", str(tmp_path / "none"))
    assert done.returncode == 2 and "no tileworkbench bench record" in done.stderr
    assert md.read_text() == before


def test_update_md_with_an_explicit_record_and_table_command(tmp_path):
    path = schema.write_record(synthetic_record(commit="exp0003"), tmp_path)
    md = tmp_path / "B.md"
    md.write_text(f"{table.MARK_START}\n{table.MARK_END}\n")
    assert run("-m", "tileworkbench.bench", "update-md", str(path), "--md", str(md)).returncode == 0
    assert "`exp0003`" in md.read_text()
    done = run("-m", "tileworkbench.bench", "table", str(path))
    assert done.returncode == 0 and "| 4096x4096x4096 | fp16 | 687.2 |" in done.stdout


@pytest.mark.skipif(detect_arch() is not None, reason="checks the behaviour without a GPU")
def test_gemm_without_a_gpu_fails_plainly_and_writes_nothing(tmp_path):
    done = run("-m", "tileworkbench.bench", "gemm", "--quick", "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_gemm_rejects_unknown_dtypes(tmp_path):
    done = run("-m", "tileworkbench.bench", "gemm", "--dtypes", "float32", "--out", str(tmp_path))
    assert done.returncode == 2 and "unknown dtype(s) float32" in done.stderr


def test_benchmarks_gemm_py_is_the_same_command():
    done = run("benchmarks/gemm.py", "--help")
    assert done.returncode == 0
    for flag in ("--sizes", "--dtypes", "--quick", "--out", "--no-compile-time"):
        assert flag in done.stdout


def test_gpu_side_modules_import_without_pandas_or_matplotlib():
    code = ("import sys\n"
            "sys.modules['pandas'] = None; sys.modules['matplotlib'] = None  # importing them now fails\n"
            "import tileworkbench.bench.cli, tileworkbench.bench.gemm, tileworkbench.backend.timing\n"
            "import tileworkbench.bench.compile_time, tileworkbench.bench.machine, tileworkbench.autotuner\n"
            "from tileworkbench.bench import schema, table\n"
            "rec = schema.make_record(tileworkbench.bench.machine.machine_info(), [])\n"
            "print(table.summary_table(rec))\n")
    done = run("-c", code)
    assert done.returncode == 0, done.stderr
    assert "0 rows, 0 failed" in done.stdout


def test_commit_comes_from_tw_commit_when_set_else_from_git(tmp_path, monkeypatch):
    monkeypatch.setenv("TW_COMMIT", "feed123")
    assert machine.commit_info(tmp_path) == ("feed123", None)  # not a work tree (no .git)
    assert machine.commit_info(REPO) == ("feed123", None)  # set explicitly: wins over a (stale) .git
    monkeypatch.delenv("TW_COMMIT")
    assert machine.commit_info(tmp_path) == ("unknown", None)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    if head.returncode == 0:
        assert machine.commit_info(REPO)[0] == head.stdout.strip()


def test_machine_info_has_the_schema_fields():
    info = machine.machine_info()
    for key in schema.MACHINE_KEYS + ("hostname",):
        assert key in info
    assert info["date"].endswith("Z") and info["date"][:2] == "20"
    schema.validate(schema.make_record(info, []))


class FakeRunner:
    """Stands in for the GPU: rows from the suite's own make_row, so the CLI's record, table and
    summary handling run on any machine."""

    fail_at = None

    def __init__(self, settings):
        self.settings = settings

    def run(self, job, index):
        from bench_helpers import fake
        from tileworkbench.bench import gemm

        if index == self.fail_at:
            raise RuntimeError("the device went away")
        flops = 2.0 * job.M * job.N * job.K
        results = [fake(c.name, 1.0 + i, 1e-4, True, flops) for i, c in enumerate(job.candidates)]
        return gemm.make_row(job, results, {"torch": fake("torch", 0.9, 1e-4, True, flops)}, "float64",
                             gemm.THRESHOLDS[job.dtype])


@pytest.fixture
def fake_gpu(monkeypatch):
    import types

    from tileworkbench.bench import compile_time, gemm

    matmul_ns = types.SimpleNamespace(allow_fp16_reduced_precision_reduction=True)
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True),
                                       backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=matmul_ns)))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(gemm, "GemmRunner", FakeRunner)
    monkeypatch.setattr(compile_time, "measure_compile_times", lambda: synthetic_record()["compile"])
    monkeypatch.setattr(FakeRunner, "fail_at", None)
    return FakeRunner


def test_gemm_command_writes_record_table_and_ends_with_the_summary(tmp_path, fake_gpu, capsys):
    from tileworkbench.bench.cli import main

    assert main(["gemm", "--quick", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    (path,) = tmp_path.glob("gemm-*.json")
    record = schema.read_record(path)
    assert record["complete"] is True and len(record["rows"]) == 8
    assert record["settings"]["quick"] is True and record["settings"]["rep"] == 15
    assert record["compile"]["cold"]["total_s"] == 1.25
    assert (tmp_path / "table.md").read_text() == table.gemm_table(record)
    assert out.strip().splitlines()[-1] == "8 rows, 0 failed the correctness check"
    assert out.strip().splitlines()[0].startswith("| kernel | MxNxK |")
    progress = [line for line in err.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] + "]" for line in progress] == [f"[{i}/8]" for i in range(1, 9)]


def test_a_run_cut_short_keeps_the_rows_it_finished(tmp_path, fake_gpu):
    from tileworkbench.bench.cli import main

    fake_gpu.fail_at = 3
    with pytest.raises(RuntimeError, match="went away"):
        main(["gemm", "--sizes", "1024,2048", "--out", str(tmp_path), "--no-compile-time"])
    (path,) = tmp_path.glob("gemm-*.json")
    record = schema.read_record(path)
    assert record["complete"] is False and len(record["rows"]) == 2
    assert "**Partial run**: 2 rows" in (tmp_path / "table.md").read_text()
