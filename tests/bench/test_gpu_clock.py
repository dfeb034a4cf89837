"""The clock sampler beside the benchmarks (bench/gpu_clock.py): nvidia-smi's lines read, samples
kept per timed window, and nothing (None) where there is no nvidia-smi."""

import os
import stat
import time

from tileworkbench.bench import gpu_clock
from tileworkbench.bench.gpu_clock import ClockSampler, Sample, parse_line, summarise


def test_a_line_of_nvidia_smi_is_one_sample():
    s = parse_line("1530, 652.31, 63, 0x0000000000000004", 1.5)
    assert s == Sample(1.5, 1530.0, 652.31, 63.0, 4)
    assert parse_line("1980, [N/A], 40, [N/A]", 2.0) == Sample(2.0, 1980.0, None, 40.0, None)
    assert parse_line("clocks.sm [MHz], power.draw [W]", 0) is None and parse_line("[N/A], 1, 2, 0x0", 0) is None


def test_a_window_summarises_the_samples_inside_it():
    samples = [Sample(t, mhz, w, 60 + t, 4 if capped else 0)
               for t, mhz, w, capped in [(0, 1980, 300, False), (1, 1500, 690, True), (2, 1600, 680, True),
                                         (3, 1700, 650, False), (9, 1980, 100, False)]]
    assert summarise(samples[1:4]) == {"samples": 3, "sm_mhz": 1600, "power_w": 680, "max_temp_c": 63,
                                       "power_capped": 2 / 3}
    assert summarise([]) is None
    clocks = ClockSampler()
    clocks.samples = samples
    assert clocks.windows([(0.5, 1.5), (2.5, 3.5)])["sm_mhz"] == 1600  # samples 1 and 3
    assert clocks.window(4, 8) is None


def test_the_sampler_reads_nvidia_smi_while_it_runs(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nwhile true; do echo '1455, 699.1, 71, 0x0000000000000004'; sleep 0.01; done\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    start = time.perf_counter()
    with ClockSampler(period_ms=10) as clocks:
        deadline = start + 10
        while len(clocks.samples) < 3 and time.perf_counter() < deadline:
            time.sleep(0.01)
        summary = clocks.window(start, time.perf_counter())  # every sample so far lies in it
    assert summary["sm_mhz"] == 1455 and summary["power_capped"] == 1.0 and summary["samples"] >= 3
    assert clocks._proc.poll() is not None  # stopped on leaving


def test_without_nvidia_smi_every_window_is_none(monkeypatch):
    monkeypatch.setattr(gpu_clock.shutil, "which", lambda name: None)
    with ClockSampler() as clocks:
        assert clocks.window(0, time.perf_counter()) is None
