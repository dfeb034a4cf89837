"""``jit.sequence.compile_in_turns``: a kernel sequence's parts compile in threads, their lowerings
in turns (each after the one before has started NVRTC, or finished), their results in order."""

import importlib
import threading
import time

import pytest

from tileworkbench.jit.sequence import compile_in_turns

lowering = importlib.import_module("tileworkbench.jit.lower")


def test_each_lowering_starts_after_the_one_before_has_started_its_nvrtc():
    events, lock = [], threading.Lock()

    def log(what):
        with lock:
            events.append(what)

    def compile_one(name):
        log(f"lower {name}")
        time.sleep(0.02)  # Python work that would otherwise interleave with the others'
        log(f"nvrtc {name}")
        lowering._announce_device_compile()
        time.sleep(0.05)  # the device compile, while the next kernel is lowered
        log(f"done {name}")
        return name.upper()

    assert compile_in_turns(["a", "b", "c"], compile_one) == ["A", "B", "C"]
    starts = [events.index(f"lower {n}") for n in "abc"]
    nvrtcs = [events.index(f"nvrtc {n}") for n in "abc"]
    assert starts[1] > nvrtcs[0] and starts[2] > nvrtcs[1]
    assert events.index("lower b") < events.index("done a")  # b's lowering overlaps a's device compile
    assert getattr(lowering.device_compile_started, "hook", None) is None  # the caller's thread untouched


def test_a_part_that_fails_lets_the_next_take_its_turn_and_the_error_reaches_the_caller():
    def compile_one(name):
        if name == "a":
            raise ValueError("a does not compile")
        return name

    with pytest.raises(ValueError, match="a does not compile"):
        compile_in_turns(["a", "b"], compile_one)  # no hang: b's turn came when a finished
