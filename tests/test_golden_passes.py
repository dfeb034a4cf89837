"""Golden tests of single passes: IR in, one pass, IR out.

For each program below, ``tests/golden/<program>/`` holds the printed IR after the front end and
after every pass that changes it (``NN-<pass>.ir``, NN its place in the pipeline). A test takes
the IR one pass is given (lowered by the passes before it, and pinned: it must print as the
golden text before), runs that pass alone, and compares what it prints with the pass's golden
text, or, where the pass has no file, with its input: the pass must leave this program alone.
A change to one pass so fails that pass's test, with a diff of its own output.

After a change that is meant to change a pass's output, rewrite the files and read the diff:

    TW_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_golden_passes.py
"""

from __future__ import annotations

import copy
import difflib
import os
import pathlib

import pytest

from tileworkbench.examples import matmul, matmul_tma_copy
from tileworkbench.examples.gemm import matmul_int4
from tileworkbench.examples.edge_cases import (head_sums, loop_temporaries, masked_scores, overhanging_tiles,
                                              persistent_walk_gemm)
from tileworkbench.examples.mla_pieces import halves_staged
from tileworkbench.frontend import parse
from tileworkbench.ir.printer import print_ir
from tileworkbench.passes.manager import REGISTRY, LowerContext
from tileworkbench.passes.pipeline import CODEGEN, PIPELINE
from tileworkbench.target import PassContext, Target

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("TW_UPDATE_GOLDEN") == "1"
PASSES = PIPELINE + CODEGEN
PROGRAMS = {
    # The seed's spec GEMM: TMA loads on mbarriers, software-pipelined, a TMA-stored epilogue.
    "spec_gemm": lambda: matmul_tma_copy(256, 256, 256, 128, 128, 32, "float16", "float16", "float32", 128, 2),
    # The warp-specialised persistent GEMM: producer warpgroup, full/empty barriers, carried counters.
    "ws_gemm": lambda: matmul(512, 512, 512, 128, 256, 64, "float16", "float16", 3, 256),
    # T.Parallel loops between global tensors and a fragment on tiles hanging over the tensors' edges.
    "overhanging_tiles": lambda: overhanging_tiles(200, 100, 64, 64),
    # A causal mask through T.if_then_else: decided once per tile except on the diagonal.
    "masked_scores": lambda: masked_scores(256, 64, ">=", 0),
    # TileLang's persistent GEMM: a T.Persistent walk that becomes a grid, its result staged by the user.
    "persistent_walk": lambda: persistent_walk_gemm(),  # examples.edge_cases
    # Thread arrays: two carry values only within an iteration (become scalars), one across loops.
    "loop_temporaries": lambda: loop_temporaries(),
    # A fragment seen through T.reshape: its loop's dimensions merged, its heads summed in runs.
    "head_sums": lambda: head_sums(),
    # An accumulator stored half at a time (acc[i + s * 32, j]) through a T.view of a gemm's tile.
    "halves_staged": lambda: halves_staged(),
    # int4 tensors and tiles: stored as bytes, copied by cp.async, multiplied by mma.sync (m16n8k64 s4).
    "int4_gemm": lambda: matmul_int4(256, 256, 512, 128, 128, 128, 2),
}



def golden_path(program: str, index: int, name: str) -> pathlib.Path:
    return GOLDEN / program / f"{index:02d}-{name}.ir"


@pytest.fixture(scope="module")
def inputs() -> dict:
    """program -> ([the function each pass is given, copied before it ran], the pass context)."""
    ctx = LowerContext(Target.of("sm_90a"), PassContext.merged_configs({}))
    out = {}
    for program, build in PROGRAMS.items():
        func = copy.deepcopy(parse(build()))
        given = []
        for name in PASSES:
            given.append(copy.deepcopy(func))  # passes record layouts on buffers in place
            func = REGISTRY[name].fn(func, ctx)
        out[program] = (given, ctx)
    return out


def expected_before(program: str, index: int) -> tuple[pathlib.Path, str]:
    """The golden IR a pass at ``index`` is given: the last file before it (the front end's is 00)."""
    for i in range(index - 1, -1, -1):
        name = "frontend" if i == 0 else PASSES[i - 1]
        path = golden_path(program, i, name)
        if path.exists():
            return path, path.read_text()
    raise AssertionError(f"no golden front-end IR for {program}: run with TW_UPDATE_GOLDEN=1")


def same(actual: str, expected: str, what: str):
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "golden", "now", n=2))
        pytest.fail(f"{what} differs from the golden text:\n{diff}")


@pytest.mark.parametrize("program", PROGRAMS)
def test_front_end(program, inputs):
    path = golden_path(program, 0, "frontend")
    text = print_ir(inputs[program][0][0])
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    same(text, path.read_text(), f"{program}: the front end's IR")


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("name", PASSES)
def test_one_pass(program, name, inputs):
    given, ctx = inputs[program]
    index = PASSES.index(name) + 1  # 0 is the front end
    func = copy.deepcopy(given[index - 1])
    before = print_ir(func)
    before_path, pinned = expected_before(program, index)
    same(before, pinned, f"{program}: the IR {name} is given ({before_path.name})")
    after = print_ir(REGISTRY[name].fn(func, ctx))
    path = golden_path(program, index, name)
    if UPDATE:
        if after != before:
            path.write_text(after)
        elif path.exists():
            path.unlink()
    if path.exists():
        assert after != before, f"{program}: {name} has a golden file but changed nothing"
        same(after, path.read_text(), f"{program}: {name}'s output")
    else:
        same(after, before, f"{program}: {name} has no golden file, so must leave the IR alone; its output")


def test_the_golden_files_cover_ten_passes_of_the_spec_gemm():
    changed = [p for p in (GOLDEN / "spec_gemm").glob("*.ir") if not p.name.startswith("00-")]
    assert len(changed) >= 10, sorted(p.name for p in changed)
    places = {f"{i:02d}-{name}.ir" for i, name in enumerate(["frontend"] + PASSES)}
    stale = [f"{d.name}/{p.name}" for d in GOLDEN.iterdir() for p in d.glob("*.ir") if p.name not in places]
    assert not stale, f"golden files of passes no longer at that place in the pipeline (delete them): {stale}"
