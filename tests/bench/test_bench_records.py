"""Bench records: the row the suite assembles, writing, reading, finding the newest, DataFrames."""

import json

import pytest
from bench_helpers import synthetic_record

from tileworkbench.bench import schema
from tileworkbench.bench.records import latest_record, load_records


def test_best_row_is_the_fastest_correct_candidate(record):
    row = record["rows"][0]
    assert row["config"] == "matmul 128x256x32 s3 t256"  # not the faster but wrong "matmul broken"
    assert row["correct"] is True
    assert row["cublas_tflops"] == pytest.approx(2 * 4096 ** 3 / 0.18e-3 / 1e12)  # torch beat cupy
    assert row["ratio"] == pytest.approx(0.18 / 0.20)
    bf16 = record["rows"][1]
    assert bf16["cublas_cupy_tflops"] is None and "bfloat16" in bf16["cublas"]["cupy"]["error"]
    assert len(bf16["candidates"]) == 4


def test_row_without_any_working_candidate_is_not_correct():
    from tileworkbench.bench import gemm

    job = gemm.Job("tileworkbench", 64, 64, 64, "float16", [])
    row = gemm.make_row(job, [{"name": "x", "error": "CompileError: no", "correct": False}], {}, "float64", 2e-3)
    assert row["correct"] is False and row["tflops"] is None and "CompileError" in row["error"]
    wrong = {"name": "w", "ms": 1.0, "ms_min": 1.0, "tflops": 1.0, "rel_err": float("nan"), "correct": False}
    assert gemm.make_row(job, [wrong], {}, "float64", 2e-3)["correct"] is False


def test_write_and_read_back(tmp_path, record):
    path = schema.write_record(record, tmp_path)
    assert path.name == "gemm-20261130-230000-nvidia-h200-abc1234.json"
    doc = json.loads(path.read_text())
    assert doc["schema"] == "tileworkbench.bench" and doc["version"] == 1
    assert schema.read_record(path)["rows"] == json.loads(json.dumps(record["rows"]))


def test_readers_refuse_unknown_schema_or_version(tmp_path, record):
    bad = dict(record, version=99)
    (tmp_path / "v99.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="version 99"):
        schema.read_record(tmp_path / "v99.json")
    (tmp_path / "trace.json").write_text(json.dumps({"schema": "tileworkbench.trace", "version": 1}))
    with pytest.raises(ValueError, match="not a tileworkbench bench record"):
        schema.read_record(tmp_path / "trace.json")
    row_missing = dict(record, rows=[{"suite": "gemm"}])
    with pytest.raises(ValueError, match="row 0 lacks"):
        schema.validate(row_missing)


def test_the_fixture_of_the_schema_doc_is_readable():
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "fixtures" / "bench_sample.json"
    assert len(schema.read_record(sample)["rows"]) == 5


def test_latest_record_goes_by_date_in_the_record_not_by_file_name(tmp_path):
    newer = schema.write_record(synthetic_record(date="2026-12-02T10:00:00Z", commit="bbb2222"), tmp_path, "a.json")
    schema.write_record(synthetic_record(date="2026-12-01T10:00:00Z", commit="ccc3333"), tmp_path, "z.json")
    (tmp_path / "notes.json").write_text("{}")  # not a record: passed over
    assert latest_record(tmp_path) == newer
    with pytest.raises(FileNotFoundError):
        latest_record(tmp_path / "nothing-here")


def test_load_records_one_row_per_measured_row_with_machine_columns(tmp_path):
    pytest.importorskip("pandas")
    schema.write_record(synthetic_record(date="2026-12-01T10:00:00Z", commit="aaa1111"), tmp_path)
    schema.write_record(synthetic_record(date="2026-12-02T10:00:00Z", commit="bbb2222"), tmp_path)
    df = load_records(tmp_path)
    assert len(df) == 6
    for col in ("gpu", "driver", "cuda", "cupy", "torch", "commit", "date", "hostname", "tflops", "ratio", "record"):
        assert col in df.columns, col
    assert sorted(df["commit"].unique()) == ["aaa1111", "bbb2222"]
    assert set(df["shape"]) == {"4096x4096x4096", "16x4096x4096"}
    one = load_records(schema.latest_record(tmp_path))
    assert len(one) == 3 and set(one["commit"]) == {"bbb2222"}
    cands = load_records(schema.latest_record(tmp_path), candidates=True)
    assert len(cands) == 4 + 4 + 1 and "candidate_ms" in cands.columns


def test_plot_tflops_draws_ours_and_cublas_with_ratios(tmp_path):
    pytest.importorskip("matplotlib")
    from tileworkbench.bench.plots import plot_tflops

    schema.write_record(synthetic_record(), tmp_path)
    fig = plot_tflops(load_records(tmp_path))
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["GEMM bfloat16 (M x N x K)", "GEMM float16 (M x N x K)"]
    assert all(len(ax.get_lines()) == 2 for ax in axes)
    assert "0.90x" in [t.get_text() for t in axes[1].texts]
    fig.savefig(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="no rows"):
        plot_tflops(load_records(tmp_path), kernel="nonexistent")


def test_head_to_head_alternates_who_runs_first_and_takes_medians():
    from tileworkbench.bench import gemm
    from tileworkbench.bench.timing import Timing

    calls = []
    clock = {"ours": iter([1.0, 1.4, 1.1, 9.0]), "lib": iter([2.0, 2.2, 2.1, 2.05])}

    def time_fn(fn, warmup, rep):
        calls.append((fn(), warmup, rep))
        ms = next(clock[calls[-1][0]])
        return Timing(ms, ms * 0.9, rep)

    result = gemm.head_to_head(time_fn, lambda: "ours", lambda: "lib", rounds=4, warmup=3, rep=20)
    assert [c[0] for c in calls] == ["ours", "lib", "lib", "ours", "ours", "lib", "lib", "ours"]
    assert {(w, r) for _, w, r in calls} == {(3, 20)}
    assert result["ours_ms"] == [1.0, 1.4, 1.1, 9.0] and result["cublas_ms"] == [2.0, 2.2, 2.1, 2.05]
    assert result["ms"] == pytest.approx(1.25)  # the median: one slow turn does not move it far
    assert result["cublas_ms_median"] == pytest.approx(2.075)
    assert result["ms_min"] == pytest.approx(0.9) and result["cublas_ms_min"] == pytest.approx(1.8)


def test_row_takes_its_times_and_ratio_from_the_head_to_head_phase():
    from bench_helpers import fake

    from tileworkbench.bench import gemm

    flops = 2.0 * 4096 ** 3
    job = gemm.Job("tileworkbench", 4096, 4096, 4096, "float16", [])
    final = {"rounds": 2, "rep": 10, "ours_ms": [0.19, 0.19], "cublas_ms": [0.2, 0.2], "ms": 0.19, "ms_min": 0.185,
             "cublas_ms_median": 0.2, "cublas_ms_min": 0.195, "library": "torch"}
    row = gemm.make_row(job, [fake("a", 0.21, 3e-4, True, flops)], {"torch": fake("torch", 0.18, 2e-4, True, flops)},
                        "float32", 2e-3, final)
    assert row["ms"] == 0.19 and row["cublas_ms"] == 0.2
    assert row["ratio"] == pytest.approx(0.2 / 0.19)
    assert row["tflops"] == pytest.approx(flops / 0.19e-3 / 1e12)
    assert row["selection"]["ratio"] == pytest.approx(0.18 / 0.21)  # what the one-after-the-other phase said
    assert row["head_to_head"]["library"] == "torch" and row["config"] == "a"
