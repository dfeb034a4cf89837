"""The ported TileLang programs, on the CPU: each file is TileLang source but for its two import
lines; every benchmark case compiles for sm_90a (NVRTC included where it is installed); the
side-by-side loader gives TileLang exactly that source (checked by loading it with ``tilelang``
standing for us: the kernels it builds are ours, byte for byte)."""

from __future__ import annotations

import importlib
import sys

import pytest

import tileworkbench
import tileworkbench.language
from tileworkbench.bench import tilelang_programs as side_by_side
from tileworkbench.examples.tilelang_programs import FAMILIES

KEYS = {"compile", "inputs", "reference", "rtol", "atol"}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_file_is_tilelang_source_but_for_its_imports(family):
    source = (side_by_side.PROGRAMS / f"{family}.py").read_text()
    theirs = side_by_side.tilelang_source(source, family)
    assert "tileworkbench" not in theirs
    assert theirs.count("\n") == source.count("\n")  # same lines: errors and inspect point alike
    changed = [(a, b) for a, b in zip(source.splitlines(), theirs.splitlines()) if a != b]
    assert [a for a, _ in changed] == [line.strip() for line in side_by_side.OUR_IMPORTS]


def test_a_program_using_more_of_us_is_refused():
    with pytest.raises(ValueError, match="beyond its two import lines"):
        side_by_side.tilelang_source("".join(side_by_side.OUR_IMPORTS) + "from tileworkbench import jit\n", "x")
    with pytest.raises(ValueError, match="exactly once"):
        side_by_side.tilelang_source("import tilelang\n", "x")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_case_compiles_for_sm90a(family, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    module = importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}")
    assert module.CASES
    for name, case in module.CASES.items():
        assert KEYS <= set(case) and ("bytes" in case or "flops" in case), name
        for kernel in _kernels(case["compile"]()):
            assert kernel.target.arch == "sm_90a" or kernel.target.compute_version >= (9, 0)
            assert "__global__" in kernel.get_kernel_source()


def test_the_loader_hands_tilelang_the_same_kernels(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tilelang", tileworkbench)
    monkeypatch.setitem(sys.modules, "tilelang.language", tileworkbench.language)
    ours = side_by_side.load_program("norms", "tileworkbench", tmp_path)
    theirs = side_by_side.load_program("norms", "tilelang", tmp_path)
    assert ours is not theirs and ours.rms_norm is not theirs.rms_norm
    mine = ours.CASES["rms_norm"]["compile"]().get_kernel_source()
    same = theirs.CASES["rms_norm"]["compile"]().get_kernel_source()

    def without_file_names(src):  # the banner and comments name the file the kernel came from
        return [line for line in src.splitlines() if str(tmp_path) not in line]

    assert without_file_names(mine) == without_file_names(same)
    assert len(without_file_names(mine)) > len(mine.splitlines()) - 5


@pytest.mark.parametrize("family", FAMILIES)
def test_the_workbench_report_renders_every_program(family, tmp_path):
    """The trace document and the HTML report (passes, shared-memory plan, barriers) for each kernel."""
    from tileworkbench.report.document import trace_document, write_report

    module = importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}")
    for name, case in module.CASES.items():
        for i, kernel in enumerate(_kernels(case["compile"]())):
            doc = trace_document(kernel)
            assert doc["passes"], name
            html = (tmp_path / f"{name}-{i}.html")
            write_report(kernel, html)
            text = html.read_text()
            assert "<html" in text.lower() and kernel.name in text, name


def _kernels(compiled) -> tuple:
    """The kernels a case's ``compile`` gives: one, or those a composite launches."""
    return tuple(getattr(compiled, "kernels", (compiled,)))


def test_hadamards_lane_exchange_is_a_warp_shuffle_of_the_given_width():
    from tileworkbench.examples.tilelang_programs.hadamard import hadamard
    code = hadamard.compile(b=4, n=256, dtype=tileworkbench.language.float32).get_kernel_source()
    # 256 elements: 32 threads of 8, five rounds of shuffles within the warp
    assert "float other = __shfl_sync(4294967295, local[j_1], tw::floormod(partner, 32), 32);" in code  # a scalar
    assert "__syncthreads" not in code.split("// ---- kernel ----")[1]  # no exchange across warps needed
