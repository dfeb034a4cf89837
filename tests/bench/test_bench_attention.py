"""The attention suite without a GPU: its rows, the kernels they compile (NVRTC for sm_90a, no
spills), the goal lines and the table from rows built by the suite's own summary code, and the
command line's refusals."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.bench import attention
from tileworkbench.examples.attention import (
    DEFAULT_CONFIG,
    PASS_CONFIGS,
    best_config,
    flash_decode,
    gqa_fwd,
    mha_fwd,
)
from tileworkbench.jit.lower import nvrtc_extra_options
from tileworkbench.target import detect_arch

REPO = Path(__file__).resolve().parents[2]
SM90 = {"kind": "cuda", "arch": "sm_90"}


def test_the_rows_are_the_issues():
    names = [r.name for r in attention.ROWS]
    for shape in ("1x16x4096x128", "1x16x8192x128", "1x16x16384x128", "1x16x8192x64", "4x32x8192x128"):
        assert shape in names and f"{shape} causal" in names
    assert "1x32x8192x128 gqa8" in names and "decode 64x32x1x8192x128" in names
    full, causal = (next(r for r in attention.ROWS if r.name == n) for n in ("1x16x8192x128", "1x16x8192x128 causal"))
    assert full.flops == 4 * 16 * 8192 * 8192 * 128 and causal.flops == full.flops / 2
    decode = attention.ROWS[-1]
    assert decode.decode and decode.kv_bytes == 2 * 64 * 32 * 8192 * 128 * 2
    assert next(r for r in attention.ROWS if "gqa8" in r.name).groups == 4


def test_rows_are_chosen_by_words_and_unknown_words_are_refused():
    assert [r.name for r in attention.select_rows("8192x64")] == ["1x16x8192x64", "1x16x8192x64 causal"]
    assert [r.name for r in attention.select_rows("decode")] == ["decode 64x32x1x8192x128"]
    assert len(attention.select_rows(None, quick=True)) == 3
    with pytest.raises(ValueError, match="no row matches 'bogus'"):
        attention.select_rows("bogus")


@pytest.mark.parametrize("make", [
    lambda: mha_fwd(1, 16, 8192, 128, False),
    lambda: mha_fwd(1, 16, 8192, 128, True),
    lambda: mha_fwd(1, 16, 8192, 64, False, block_N=256),
    lambda: mha_fwd(1, 16, 8192, 64, True, **best_config(64, True)),
    lambda: gqa_fwd(1, 32, 8, 8192, 128, True),
    lambda: flash_decode(64, 32, 1, 8192, 128),
], ids=["d128", "d128-causal", "d64", "d64-causal", "gqa-causal", "decode"])
def test_every_kernel_of_the_suite_compiles_for_sm90a_without_spills(make):
    func = make()
    for kernel in getattr(func, "kernels", None) or [func]:  # decoding: the split pass, then the combine
        art = tw.lower(kernel, target=SM90, pass_configs=PASS_CONFIGS)
        # with the options the suite compiles it with (fast math: without it the IEEE division of the
        # epilogue alone spills the head-dim-64 causal kernel's 160 registers)
        result = compile_check(art.device_source, "sm_90a", "attention.cu", extra_options=nvrtc_extra_options(PASS_CONFIGS))
        assert result.cubin and result.spills_bytes == 0, result


def test_the_forward_kernel_is_warp_specialised_with_p_in_registers():
    src = tw.lower(mha_fwd(1, 16, 8192, 128, True), target=SM90, pass_configs=PASS_CONFIGS).device_source
    assert "// producer warpgroup" in src and "tw::setmaxnreg_inc<240>()" in src
    assert "tw::wgmma_gemm_rs<" in src  # P @ V with P as the register operand
    # causal: the longest query blocks first, four heads (16 MB of keys and values) at a time
    assert "const int bx = 63 - tw_in_panel / 4;" in src


@pytest.mark.parametrize("call, message", [
    (lambda: mha_fwd(1, 16, 1024, 128, False, groups=3), "groups=3 must divide heads=16"),
    (lambda: gqa_fwd(1, 32, 7, 1024, 128, False), "kv_heads=7 must divide heads=32"),
    (lambda: flash_decode(1, 8, 1, 1000, 128), "must be a multiple of num_split"),
])
def test_bad_shapes_are_refused_by_name(call, message):
    with pytest.raises(tw.CompileError, match=message) as caught:
        call()
    assert caught.value.loc.file.endswith("examples/attention.py")  # the builder's line that refused it, with a caret


def _impl(ms, flops, kv_bytes, correct=True):
    return {"ms": ms, "tflops": flops / ms / 1e9, "gbps": kv_bytes / ms / 1e6, "correct": correct, "compile_s": 0.4}


def _row(row, ours_ms, sdpa_ms, tilelang_ms, ours_correct=True):
    out = {"row": row.name, "shape": attention.asdict(row), "flops": row.flops, "kv_bytes": row.kv_bytes,
           "impls": {"tileworkbench": _impl(ours_ms, row.flops, row.kv_bytes, ours_correct),
                     "sdpa_flash": _impl(sdpa_ms * 1.5, row.flops, row.kv_bytes),
                     "sdpa_cudnn": _impl(sdpa_ms, row.flops, row.kv_bytes),
                     "sdpa_efficient": {"error": "RuntimeError: No available kernel"},
                     "tilelang": _impl(tilelang_ms, row.flops, row.kv_bytes)}}
    attention.summarise(out)
    return out


def test_goals_and_table_from_summarised_rows():
    full, causal = (next(r for r in attention.ROWS if r.name == n) for n in ("1x16x8192x128", "1x16x8192x128 causal"))
    decode = attention.ROWS[-1]
    ms_at = full.flops / 620e9  # 620 TFLOP/s
    rows = [_row(full, ms_at, ms_at * 1.02, ms_at * 1.2),  # beats cuDNN by 2%, TileLang by 1.2x
            _row(causal, causal.flops / 500e9, 1.0, 1.0),  # 500 of 620: 0.806x its non-causal rate
            _row(decode, decode.kv_bytes / 3.5e9, 2.0, 2.0)]  # 3.5 TB/s
    assert rows[0]["sdpa_best"] == "sdpa_cudnn" and rows[0]["vs_sdpa"] == pytest.approx(1.02)
    assert rows[0]["vs_tilelang"] == pytest.approx(1.2)
    goals = attention.goal_checks(rows, copy_gbps=4200.0)
    assert "1x16x8192x128: 620 TFLOP/s (goal >= 600): met" in goals
    assert "1x16x8192x128: 1.020x the best SDPA (sdpa_cudnn; goal >= 1.0): met" in goals
    assert "1x16x8192x128: 1.200x TileLang (goal >= 1.15): met" in goals
    assert "1x16x8192x128 causal: 0.806x its non-causal rate (goal >= 0.9): MISSED" in goals
    assert "decode 64x32x1x8192x128: 83% of the copy bandwidth (goal >= 80%): met" in goals
    text = attention.table({"rows": rows, "copy_gbps": 4200.0})
    assert "| 1x16x8192x128 | 620 | 405 | 608 | RuntimeError: No available k | 517 | 1.020x | 1.200x | 0.40 / 0.40 |" in text
    assert "| decode 64x32x1x8192x128 | 3500 GB/s |" in text and "copy in the same run: 4200 GB/s" in text


def test_the_progress_line_names_the_clock_each_implementation_ran_at():
    full = next(r for r in attention.ROWS if r.name == "1x16x8192x128")
    row = _row(full, 1.0, 1.0, 1.0)
    assert "sampled" not in attention.progress_line(1, 2, row, 3.0)
    row["impls"]["tileworkbench"]["gpu_clock"] = {"samples": 9, "sm_mhz": 1455.0, "power_w": 698.6,
                                                  "max_temp_c": 70.0, "power_capped": 1.0}
    row["impls"]["tilelang"]["gpu_clock"] = {"samples": 9, "sm_mhz": 1755.0, "power_w": 612.0,
                                             "max_temp_c": 66.0, "power_capped": 0.5}
    line = attention.progress_line(1, 2, row, 3.0)
    assert line.endswith("sampled while timed: tileworkbench 1455 MHz 699 W; tilelang 1755 MHz 612 W")


def test_a_wrong_kernel_is_marked_and_meets_no_goal():
    full = next(r for r in attention.ROWS if r.name == "1x16x8192x128")
    row = _row(full, 0.1, 1.0, 1.0, ours_correct=False)
    assert "vs_sdpa" not in row and "vs_tilelang" not in row
    assert attention.goal_checks([row], None) == ["1x16x8192x128: ours did not run correctly"]
    assert " WRONG |" in attention.table({"rows": [row]})


@pytest.mark.skipif(detect_arch() is not None, reason="checks the behaviour without a GPU")
def test_the_command_without_a_gpu_fails_plainly_and_writes_nothing(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tileworkbench.bench", "attention", "--quick", "--out",
                           str(tmp_path / "out")], cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 2 and "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_tilelang_counts_at_the_faster_of_its_configurations():
    d64 = next(r for r in attention.ROWS if r.name == "1x16x8192x64")
    assert set(attention.tilelang_configs(d64)) == {"tilelang", "tilelang_alt"}  # ours differs at head dim 64
    assert set(attention.tilelang_configs(attention.ROWS[0])) == {"tilelang"}
    d64_causal = next(r for r in attention.ROWS if r.name == "1x16x8192x64 causal")
    assert attention.tilelang_configs(d64_causal)["tilelang_alt"] == best_config(64, True) == {
        "block_M": 192, "block_N": 128, "num_stages": 2, "threads": 384}  # ours for causal rows at head dim 64
    row = _row(d64, 1.0, 1.2, 1.3)
    row["impls"]["tilelang_alt"] = _impl(1.1, d64.flops, d64.kv_bytes)
    attention.summarise(row)
    assert row["tilelang_best"] == "tilelang_alt" and row["vs_tilelang"] == pytest.approx(1.1)
    assert f"| {d64.flops / 1.1 / 1e9:.0f} | 1.200x | 1.100x |" in attention.table({"rows": [row]})


def _device_source(func, configs=PASS_CONFIGS):
    src = tw.lower(func, target=SM90, pass_configs=configs).device_source
    return src.split("\n", 1)[1]  # the first line names the file the kernel came from


@pytest.mark.parametrize("args, config", [
    ((1, 16, 4096, 128, False), {}),
    ((1, 16, 4096, 128, True), {}),
    ((1, 16, 8192, 64, False), {"block_N": 256}),
    ((1, 32, 4096, 128, True), {"groups": 8}),
])
def test_ours_and_tilelang_spelling_lower_to_the_same_cuda(args, config):
    """The suite times ``examples.attention`` against TileLang on ``tilelang_programs/attention.py``:
    the two must be the same program, so under our compiler they give the same CUDA."""
    from tileworkbench.examples.tilelang_programs.attention import flash_attention

    full = {**DEFAULT_CONFIG, **config}
    assert flash_attention.pass_configs == {tw.PassConfigKey.TL_ENABLE_FAST_MATH: True}
    assert _device_source(mha_fwd(*args, **full)) == _device_source(flash_attention.fn(*args, **full))


def test_decoding_and_its_tilelang_spelling_lower_to_the_same_cuda():
    from tileworkbench.examples.tilelang_programs.flash_decoding import flash_decoding

    ours, theirs = flash_decode(8, 32, 1, 8192, 128), flash_decoding.fn(8, 32, 1, 8192, 128, num_split=1)
    for a, b in zip(ours.kernels, theirs.kernels, strict=True):
        assert _device_source(a) == _device_source(b)


def test_the_attention_plot_draws_each_implementation_per_forward_row():
    pytest.importorskip("matplotlib")
    from tileworkbench.bench.plots import ATTENTION_SERIES, plot_attention

    full, causal = (next(r for r in attention.ROWS if r.name == n) for n in ("1x16x8192x128", "1x16x8192x128 causal"))
    rows = [_row(full, full.flops / 620e9, 1.0, 1.2), _row(causal, 1.0, 0.9, 1.1, ours_correct=False),
            _row(attention.ROWS[-1], 1.0, 1.0, 1.0)]  # the decode row is not a forward row: left out
    fig = plot_attention({"rows": rows, "machine": {"gpu": "NVIDIA H200", "commit": "abc1234"}})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1x16x8192x128", "1x16x8192x128 causal"]
    assert len(ax.patches) == 2 * len(ATTENTION_SERIES)
    ours = [p.get_height() for p in ax.patches[:2]]
    assert ours[0] == pytest.approx(620) and ours[1] != ours[1]  # a wrong result is drawn as no bar (NaN)
    assert [t.get_text() for t in ax.texts] == [f"{rows[0]['vs_sdpa']:.2f}x", "WRONG"]
