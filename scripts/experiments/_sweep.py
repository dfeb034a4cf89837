"""For the random sweeps of compiler forms (shared_copy_forms.py, thread_scope_forms.py, ...): a
kernel's outcome (matched, or refused with a CompileError), NVRTC on some draws, the counting loop
that prints every bug it meets, and a generated kernel's source imported from a file of its own."""

from __future__ import annotations

import importlib.util
import os
import random
import tempfile
import warnings
from pathlib import Path

import tileworkbench as tw
from tileworkbench.errors import CompileError


def outcome(run_and_compare, nvrtc: bool) -> str:
    """``"ok"`` when ``run_and_compare()`` returns the kernel it ran (it raises AssertionError on a
    wrong number) and, with ``nvrtc``, NVRTC compiles that kernel for sm_90a; ``"refused: <why>"``
    for a CompileError that is not an internal one (that one is raised: it is a bug)."""
    try:
        main = run_and_compare()
        if nvrtc:
            from tileworkbench.backend.nvrtc import compile_check

            compile_check(tw.lower(main, target="sm_90a").kernel_source, "sm_90a")
        return "ok"
    except CompileError as exc:
        if "internal" in str(exc):
            raise
        return "refused: " + str(exc).splitlines()[0]


def kernel_from_source(source: str, prefix: str):
    """``main`` of ``source`` written to a file of its own and imported (the front end reads a
    kernel's source from its file, so a generated kernel needs one)."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}_")) / f"{prefix}_kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"{prefix}_{abs(hash(source))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def refusals_together(config, result: str) -> str:
    """A sweep's count key: every refusal under one name, the kernels that ran (with any label of
    theirs, ``"ok, ahead"``) and the bugs by name."""
    return result if result.startswith(("ok", "bug")) else "refused"


def sweep(draw, check, draws: int, seed: int, key=lambda config, result: result) -> dict:
    """``draws`` configurations from ``draw(rng)``, each ``check(config, n, nvrtc=n % 4 == 0)``ed;
    any exception is a bug, printed and counted. Returns (and prints) the counts by ``key``.
    ``TW_SWEEP_SEED`` in the environment replaces the script's seed: new draws for a longer search
    (the script's own seed repeats the draws its findings in docs/experiments.md came from)."""
    warnings.simplefilter("ignore")
    seed = int(os.environ.get("TW_SWEEP_SEED", seed))
    print(f"seed {seed}")
    rng, counts = random.Random(seed), {}
    for n in range(draws):
        config = draw(rng)
        try:
            result = check(config, n, nvrtc=n % 4 == 0)
        except Exception as exc:  # noqa: BLE001 - counted and printed: the bugs this looks for
            result = "bug"
            print("BUG", config, type(exc).__name__, str(exc)[:300])
        k = key(config, result)
        counts[k] = counts.get(k, 0) + 1
    counts = dict(sorted(counts.items()))
    print(counts)
    return counts
