"""The GPU's SM clock and power while a benchmark times something: ``nvidia-smi`` sampled in the
background (every 100 ms), each sample stamped with the host's clock when it arrives, and per
timed window the median SM clock, the median power draw and the share of samples in which the
driver reported the software power cap (``clocks_event_reasons`` bit 0x4).

At these rates attention and the large GEMMs run at the board's power limit, the clock set by
energy per tile (BENCHMARKS.md, "The H200 at its power cap"): two implementations compared in one
run may have run at different clocks, and a row that moves between runs may have moved with its
clock. Records carry what was sampled so a reader can tell.

Where ``nvidia-smi`` is missing (a CPU machine) the sampler records nothing and every window is
None.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass

QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"
SW_POWER_CAP = 0x4  # nvidia-smi's clocks_event_reasons: the software power cap is holding the clock


@dataclass(frozen=True)
class Sample:
    t: float  # host time.perf_counter() when the line arrived
    sm_mhz: float
    power_w: float | None
    temp_c: float | None
    reasons: int | None


def parse_line(line: str, t: float) -> Sample | None:
    """One line of ``--query-gpu=QUERY --format=csv,noheader,nounits`` (the first GPU's); None for a
    line that is not one ("[N/A]" where a field is not supported reads as None)."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 4:
        return None

    def number(text, kind=float):
        try:
            return kind(text, 0) if kind is int else kind(text)
        except ValueError:
            return None

    sm = number(fields[0])
    if sm is None:
        return None
    return Sample(t, sm, number(fields[1]), number(fields[2]), number(fields[3], int))


def summarise(samples: list[Sample]) -> dict | None:
    """Median SM clock and power, highest temperature and the power-capped share of ``samples``."""
    if not samples:
        return None
    powers = [s.power_w for s in samples if s.power_w is not None]
    temps = [s.temp_c for s in samples if s.temp_c is not None]
    reasons = [s.reasons for s in samples if s.reasons is not None]
    return {"samples": len(samples), "sm_mhz": statistics.median(s.sm_mhz for s in samples),
            "power_w": statistics.median(powers) if powers else None,
            "max_temp_c": max(temps) if temps else None,
            "power_capped": (sum(1 for r in reasons if r & SW_POWER_CAP) / len(reasons)) if reasons else None}


class ClockSampler:
    """``with ClockSampler() as clocks: ... clocks.window(start, end)`` (``time.perf_counter()``
    times): the summary of the samples that arrived in ``[start, end]``."""

    def __init__(self, period_ms: int = 100):
        self.period_ms = period_ms
        self.samples: list[Sample] = []
        self._proc = None
        self._reader = None

    def __enter__(self) -> "ClockSampler":
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return self
        try:
            self._proc = subprocess.Popen([smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-i", "0",
                                           f"-lms={self.period_ms}"], stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError:
            return self
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self):
        for line in self._proc.stdout:
            sample = parse_line(line, time.perf_counter())
            if sample is not None:
                self.samples.append(sample)

    def window(self, start: float, end: float) -> dict | None:
        return self.windows([(start, end)])

    def windows(self, spans) -> dict | None:
        """The summary of the samples that arrived in any of ``spans`` (``(start, end)`` pairs)."""
        return summarise([s for s in list(self.samples) if any(a <= s.t <= b for a, b in spans)])

    def __exit__(self, *exc):
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._reader.join(timeout=5)
        return False
