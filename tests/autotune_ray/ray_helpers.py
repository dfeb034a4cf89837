"""Builders and timers for the Ray sweep tests. Module-level, in a module the Ray workers can
import (the tests put this folder on their PYTHONPATH): Ray ships functions by reference."""

import os
import time
from pathlib import Path

from tileworkbench.examples.gemm import matmul

SIZE = 256


def plain_matmul(block_M, block_N, block_K, num_stages, threads):
    return matmul(SIZE, SIZE, SIZE, block_M, block_N, block_K, "float16", "float16", num_stages, threads)


def side_by_side_matmul(block_M, block_N, block_K, num_stages, threads):
    """plain_matmul, but a worker's compile waits (up to a minute) until a second worker process
    has started one too: the compiles are sent out at once, so a backend that runs them side by
    side passes at once, and one that ran them one after another would be seen (one worker
    process). Without the wait the check would hang on how fast Ray starts workers: on a slow
    machine the first worker can finish all three before a second one is up."""
    meeting = os.environ.get("TW_MEETING_DIR")  # set for the Ray workers only, never the driver
    if meeting:
        Path(meeting, str(os.getpid())).touch()
        deadline = time.monotonic() + 60
        while len(os.listdir(meeting)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    return plain_matmul(block_M, block_N, block_K, num_stages, threads)


def crashing_matmul(block_M, block_N, block_K, num_stages, threads):
    """The worker compiling a 64-column config dies (as a segfaulting compiler would)."""
    if block_N == 64:
        os._exit(3)
    return plain_matmul(block_M, block_N, block_K, num_stages, threads)


def source_timer(kernel, config):
    """A deterministic 'time' read from the kernel the task received (its record crossed the
    cluster): the generated source's length in millions of characters, plus 1 ms for any tile not
    128 x 128, so that 128 x 128 wins."""
    return len(kernel.get_kernel_source()) / 1e6 + (0.0 if (config.block_M, config.block_N) == (128, 128) else 1.0)


def hanging_timer(kernel, config):
    """Times like source_timer, but a 64-column config never returns (a kernel that hangs)."""
    if config.block_N == 64:
        time.sleep(3600)
    return source_timer(kernel, config)


def refusing_timer(kernel, config):
    """A timer for a resumed sweep: the configs of the first sweep must not be timed again."""
    if config.block_M == 64:
        raise AssertionError(f"{config.name} was finished before; a resumed sweep must not time it")
    return source_timer(kernel, config)


class CountingTimer:
    """A timer whose 'time' is (its own count of the trials it timed) + (its process id) / 1e9: a
    timer a worker keeps across trials answers 1, 2, 3... in that worker; a fresh copy per trial
    always 1."""

    def __init__(self):
        self.trials = 0

    def __call__(self, kernel, config):
        self.trials += 1
        return self.trials + os.getpid() / 1e9
