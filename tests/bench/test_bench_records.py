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
    assert "0.900x" in [t.get_text() for t in axes[1].texts]
    for ax in axes:  # the highest point's ratio label has room below the top of the axes
        highest = max(max(line.get_ydata()) for line in ax.get_lines())
        assert ax.get_ylim()[1] >= 1.1 * highest
    fig.savefig(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="no rows"):
        plot_tflops(load_records(tmp_path), kernel="nonexistent")


def test_head_to_head_rotates_who_runs_first_and_takes_medians():
    from tileworkbench.bench import gemm
    from tileworkbench.backend.timing import Timing

    calls = []
    clock = {"lib": iter([2.0, 2.2, 2.1]), "a": iter([1.0, 1.4, 9.0]), "b": iter([1.5, 1.3, 1.2])}

    def time_fn(fn, warmup, rep):
        calls.append((fn(), warmup, rep))
        ms = next(clock[calls[-1][0]])
        return Timing(ms, ms * 0.9, rep)

    contenders = {name: (lambda n=name: n) for name in ("lib", "a", "b")}
    result = gemm.head_to_head(time_fn, contenders, rounds=3, warmup=3, rep=20)
    assert [c[0] for c in calls] == ["lib", "a", "b", "a", "b", "lib", "b", "lib", "a"]
    assert {(w, r) for _, w, r in calls} == {(3, 20)}
    assert result["ms"] == {"lib": [2.0, 2.2, 2.1], "a": [1.0, 1.4, 9.0], "b": [1.5, 1.3, 1.2]}
    assert result["median_ms"] == {"lib": 2.1, "a": 1.4, "b": 1.3}  # one slow turn does not decide
    assert result["min_ms"]["a"] == pytest.approx(0.9)


def test_row_takes_the_faster_finalist_and_its_ratio_from_the_head_to_head_phase():
    from bench_helpers import fake

    from tileworkbench.bench import gemm

    flops = 2.0 * 4096 ** 3
    job = gemm.Job("tileworkbench", 4096, 4096, 4096, "float16", [])
    results = [fake("a", 0.19, 3e-4, True, flops), fake("b", 0.21, 4e-4, True, flops)]
    final = {"rounds": 2, "rep": 10, "ms": {"cublas (torch)": [0.2, 0.2], "a": [0.22, 0.22], "b": [0.19, 0.19]},
             "median_ms": {"cublas (torch)": 0.2, "a": 0.22, "b": 0.19},
             "min_ms": {"cublas (torch)": 0.195, "a": 0.21, "b": 0.185},
             "library": "torch", "cublas": "cublas (torch)", "finalists": ["a", "b"]}
    row = gemm.make_row(job, results, {"torch": fake("torch", 0.18, 2e-4, True, flops)}, "float32", 2e-3, final)
    # selection said a (0.19 ms); in the final b beat it: b's numbers make the row
    assert row["config"] == "b" and row["ms"] == 0.19 and row["ms_min"] == 0.185 and row["rel_err"] == 4e-4
    assert row["cublas_ms"] == 0.2 and row["ratio"] == pytest.approx(0.2 / 0.19)
    assert row["tflops"] == pytest.approx(flops / 0.19e-3 / 1e12)
    assert row["selection"]["config"] == "a" and row["selection"]["ratio"] == pytest.approx(0.18 / 0.19)
    assert row["head_to_head"]["library"] == "torch"
