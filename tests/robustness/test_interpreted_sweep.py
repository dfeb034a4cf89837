"""Property: TileLang's ported programs at random parameters (and random pass configs), run on the
CPU interpreter, match float64 numpy references, or are refused with a CompileError: never a wrong
number, an internal error, a false out-of-bounds report or another exception. A slice of
``scripts/experiments/interpreted_sweep.py`` (its families, draws and references; docs/experiments.md,
"Programs on the interpreter at random parameters"), three draws of each of its families, and two
of each family the thread-level interpreter runs."""

import importlib.util
import os

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "experiments", "interpreted_sweep.py")
FAILURES = ("MISMATCH", "RUNTIME", "INTERNAL", "EXCEPTION", "TIMEOUT", "unsupported")


@pytest.fixture
def sweep(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEWORKBENCH_VERIFY_IR", "1")
    spec = importlib.util.spec_from_file_location("interpreted_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _draws(sweep, names: list, per_family: int, seed: int) -> dict:
    """Run ``per_family`` draws of each family; the outcomes counted, the failures asserted away."""
    outcomes, failures = {}, []
    for i in range(per_family * len(names)):
        name = names[i % len(names)]
        draw = np.random.default_rng([seed, i])
        params, _ = sweep.FAMILIES[name][0](draw)
        params["configs"] = sweep.pick(draw, sweep.CONFIGS)
        run, data = sweep.FAMILIES[name][1], np.random.default_rng([seed, i, 1])
        outcome, detail = sweep.classify(lambda: sweep.run_with_configs(run, params, data, False), 120)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome in FAILURES:
            failures.append(f"{name} {params}: {outcome} {detail}")
    assert not failures, "\n".join(failures)
    return outcomes


def test_programs_at_random_parameters_match_float64_on_the_interpreter(sweep):
    names = list(sweep.FAMILIES)
    outcomes = _draws(sweep, names, 3, 5)
    assert outcomes.get("ok", 0) >= 2 * len(names), outcomes  # most draws run: the property is not vacuous


def test_the_same_at_the_thread_level_every_pass_applied(sweep, monkeypatch):
    """The families the thread-level interpreter runs (no tensor cores), their final lowered IR and
    the codegen phase's, which must agree bit for bit: layouts, partitioned loops, reductions through
    shuffles and shared memory, guards, barriers (a race or a read out of bounds is a failure)."""
    monkeypatch.setitem(sweep.THREADS, "stage", "both")
    outcomes = _draws(sweep, sweep.THREAD_FAMILIES, 2, 6)
    assert outcomes.get("ok", 0) >= len(sweep.THREAD_FAMILIES), outcomes
