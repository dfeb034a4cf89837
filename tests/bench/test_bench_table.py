"""Markdown tables of a record and the BENCHMARKS.md table section."""

from pathlib import Path

import pytest

from tileworkbench.bench import table

REPO = Path(__file__).resolve().parents[2]


def test_gemm_table_has_one_line_per_row_and_the_numbers(record):
    text = table.gemm_table(record)
    assert "NVIDIA H200, driver 580.159.04, CUDA 13.0" in text and "`abc1234`" in text
    ours = [line for line in text.splitlines() if line.startswith("| 4096x4096x4096 | fp16")]
    assert len(ours) == 1
    cells = [c.strip() for c in ours[0].strip("|").split("|")]
    # ours 2*4096^3 / 0.20 ms; cuBLAS best of torch (0.18 ms) and cupy (0.19 ms); ratio 0.90
    assert cells[2] == "687.2" and cells[3].startswith("763.5 (torch 763.5, cupy 723.4)")
    assert cells[4] == "0.900" and cells[6] == "ok" and cells[7] == "matmul 128x256x32 s3 t256"
    assert "| matmul_tma_copy s2 | 4096x4096x4096 | fp16 | 274.9 |" in text
    assert "cold: empty tileworkbench + CuPy caches | 1.250 |" in text


def test_a_ratio_just_under_one_is_not_rounded_up_to_it(record):
    # The target is ours / cuBLAS >= 1.0: 758.1 / 758.6 must read 0.999, not 1.00.
    record["rows"][0].update(tflops=758.1, cublas_tflops=758.6, ratio=758.1 / 758.6)
    row = next(line for line in table.gemm_table(record).splitlines() if line.startswith("| 4096x4096x4096 | fp16"))
    assert "| 0.999 |" in row
    assert "| 0.999 | ok |" in table.summary_table(record)


@pytest.mark.parametrize("ratio, text", [(0.99982, "0.9998"), (0.9996, "0.9996"), (1.0004, "1.000"),
                                         (1.0006, "1.001"), (0.9994, "0.999"), (0.8999, "0.900")])
def test_ratio_text_never_reads_as_met_when_it_is_not(ratio, text):
    assert table.ratio_text(ratio) == text


def test_wrong_rows_are_marked(record):
    record["rows"][0].update(correct=False, rel_err=float("nan"))
    text = table.gemm_table(record)
    assert "| NaN | **WRONG** |" in text
    assert "1 failed the correctness check" in table.summary_table(record)


def test_summary_table_is_short_and_ends_with_the_counts(record):
    text = table.summary_table(record)
    lines = text.strip().splitlines()
    assert len(lines) == 2 + len(record["rows"]) + 3 and lines[-3] == ""
    assert lines[2].startswith("| ours | 4096x4096x4096 | fp16 | 687.2 | 763.5 | 0.900 | ok |")
    assert lines[-2].startswith("compile: cold 1.25 s, disk hit 0.31 s")
    assert lines[-1] == "3 rows, 0 failed the correctness check"


def test_partial_record_says_so(record):
    record["complete"] = False
    assert "**Partial run**: 3 rows" in table.gemm_table(record)


def test_update_markdown_replaces_only_the_section(tmp_path, record):
    md = tmp_path / "BENCHMARKS.md"
    md.write_text(f"# Title\n\nintro\n\n{table.MARK_START}\nold stuff\n{table.MARK_END}\n\ntrailer\n")
    assert table.update_markdown(md, record, "benchmarks/results/x.json") is True
    text = md.read_text()
    assert text.startswith("# Title\n\nintro\n\n") and text.endswith(f"{table.MARK_END}\n\ntrailer\n")
    assert "old stuff" not in text and "From `benchmarks/results/x.json`." in text
    assert "| 4096x4096x4096 | fp16 | 687.2 |" in text
    assert table.update_markdown(md, record, "benchmarks/results/x.json") is False  # already current
    table.update_markdown(md, None)
    assert f"{table.MARK_START}\n{table.NO_MEASUREMENT}\n{table.MARK_END}" in md.read_text()


def test_update_markdown_without_markers_is_an_error(tmp_path, record):
    md = tmp_path / "x.md"
    md.write_text("no markers\n")
    with pytest.raises(ValueError, match="markers"):
        table.update_markdown(md, record)
    assert md.read_text() == "no markers\n"


def test_benchmarks_md_has_the_markers_and_no_invented_numbers():
    text = (REPO / "BENCHMARKS.md").read_text()
    section = table.replace_section(text, "X").split(table.MARK_START)[1]  # raises without markers
    assert section.startswith("\nX\n")
    current = text.split(table.MARK_START)[1].split(table.MARK_END)[0]
    results = list((REPO / "benchmarks" / "results").glob("gemm-*.json"))
    if not results:  # numbers may only come from a committed record of a real run
        assert current.strip() == table.NO_MEASUREMENT
    else:
        assert "From `benchmarks/results/gemm-" in current


def test_progress_line_has_the_counter_and_the_verdict(record):
    from tileworkbench.bench.gemm import progress_line

    line = progress_line(3, 20, record["rows"][0], 12.34)
    assert line.startswith("[3/20] ours 4096x4096x4096 float16: 687.2 TFLOP/s (matmul 128x256x32 s3 t256)")
    assert "cuBLAS 763.5 | ratio 0.900 | err 3.0e-04 ok (12.3 s)" in line
    spec = progress_line(20, 20, record["rows"][2], 1.0)
    assert spec.startswith("[20/20] matmul_tma_copy s2 4096x4096x4096 float16:")
    broken = dict(record["rows"][0], error="CompileError: bad\nmore", tflops=None)
    assert progress_line(1, 2, broken, 0.5) == "[1/2] ours 4096x4096x4096 float16: ERROR CompileError: bad (0.5 s)"


def test_compile_lines_name_nvrtc_module_load_and_the_context_apart(record):
    record["compile"] = {
        "kernel": "matmul_tma_copy 4096^3", "device_loaded": True, "problems": [],
        "cold": {"total_s": 0.29, "parse_s": 0.003, "lower_s": 0.08, "nvrtc_s": 0.23, "nvrtc_wait_s": 0.17,
                 "load_s": 0.012, "module_load_s": 0.004, "cache": "lowered", "context_init_s": 0.41,
                 "cupy_import_s": 0.15},
        "disk_hit": {"total_s": 0.06, "load_s": 0.011, "module_load_s": 0.003, "cache": "disk",
                     "context_init_s": 0.40, "cupy_import_s": 0.14},
        "memory_hit": {"total_s": 0.002, "parse_s": 0.0019, "same_kernel": True}}
    text = table.gemm_table(record)
    assert "| cold: empty tileworkbench cache | 0.290 |" in text
    assert "NVRTC 0.230 (overlapping the analyses; 0.170 waited for), module load 0.012" in text
    assert "| disk-cache hit (cubin from the cache), new process | 0.060 |" in text
    assert "CUDA context creation before the timer, 0.410 s in the cold process" in text


def test_head_to_head_rows_say_which_cublas_path_and_how_it_was_timed(record):
    row = record["rows"][0]
    row.update(cublas_tflops=700.0, head_to_head={"library": "torch"})
    record["settings"].update(head_to_head_rounds=6, head_to_head_rep=20)
    text = table.gemm_table(record)
    assert "| 700.0 (torch; selection: torch 763.5, cupy 723.4) |" in text
    assert "our two fastest candidates and cuBLAS timed in turn in 6 rounds of 20 runs" in text


def test_the_launch_table_shows_ratios_floors_and_a_call_that_failed():
    from tileworkbench.bench.launch import table

    record = {"rows": [
        {"implementation": "tileworkbench kernel(a, b)", "mode": "plain", "correct": True, "us_per_call": 8.0},
        {"implementation": "torch.matmul(a, b)", "mode": "plain", "correct": True, "us_per_call": 12.0},
        {"implementation": "tilelang matmul(a, b, ...), the @jit function called", "mode": "plain",
         "correct": False, "error": "TypeError: takes no tensors"},
        {"implementation": "tileworkbench kernel(a, b, c)", "mode": "graph", "correct": True, "us_per_call": 0.05,
         "wall_us_per_call": 4.3}],
        "driver_floor_us": 6.2, "c_floor_us": 4.4, "launch_path": "C"}
    lines = table(record).splitlines()
    assert "| torch.matmul(a, b) | plain | 12.00 | 1.50x |  |" in lines
    assert "| tilelang matmul(a, b, ...), the @jit function called | plain | TypeError: takes no tensors | |  |" in lines
    assert "| tileworkbench kernel(a, b, c) | graph | 0.05 |  | 4.30 |" in lines
    assert lines[-1] == "ours launched through: C" and any("| 4.40 |" in line for line in lines)
