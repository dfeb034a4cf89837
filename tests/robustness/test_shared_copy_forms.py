"""Property: fragment reads through a shared copy (transposed reads and stores, column vectors,
computed indices) at random shapes match numpy on both CPU interpreters, or are refused with a
CompileError; never a wrong number or an internal error. A slice of
``scripts/experiments/shared_copy_forms.py`` (its forms, draws and references)."""

import importlib.util
import os
import random
import warnings

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "experiments", "shared_copy_forms.py")


def _sweep():
    spec = importlib.util.spec_from_file_location("shared_copy_forms", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SWEEP = _sweep()
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(12)]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: "-".join(map(str, c)))
def test_shared_copy_forms_match_numpy_or_are_refused(config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = SWEEP.check(config, seed=sum(config[1:5]), nvrtc=False)
    assert outcome == "ok" or outcome.startswith("refused: ")
