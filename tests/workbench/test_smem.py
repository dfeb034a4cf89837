"""The shared-memory plan (trace ``smem``) of the spec GEMMs."""

import itertools
import re

import pytest

from tileworkbench.analysis import program, smem_plan
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.printer import print_ir


def _ir_lines_mentioning(text: str, name: str) -> list[int]:
    word = re.compile(rf"\b{re.escape(name)}\b")
    return [i for i, line in enumerate(text.splitlines(), 1) if word.search(line)]


@pytest.mark.parametrize("stages", [2, 3])
def test_plan_of_the_tma_store_gemm(gemm_artifact, stages):
    art = gemm_artifact("matmul_tma_copy_store", stages)
    plan = smem_plan(art)
    by_name = {b["name"]: b for b in plan["buffers"]}
    assert set(by_name) == {"A_shared", "B_shared", "C_shared", "mbar_A", "mbar_B"}
    a, b, c = by_name["A_shared"], by_name["B_shared"], by_name["C_shared"]
    assert (a["kind"], a["dtype"], a["shape"], a["versions"]) == ("buffer", "float16", [stages, 128, 32], stages)
    assert a["size_bytes"] == stages * 128 * 32 * 2
    assert b["shape"] == [stages, 32, 128] and c["versions"] == 1 and c["size_bytes"] == 128 * 128 * 2
    for bar in ("mbar_A", "mbar_B"):
        entry = by_name[bar]
        assert (entry["kind"], entry["dtype"], entry["shape"], entry["size_bytes"], entry["align"]) == \
            ("barrier", "uint64", [stages], 8 * stages, 8)
    # placement: aligned, inside the total, total within the device limit; two entries share
    # bytes only when their live ranges do not overlap (C_shared reuses the pipeline's tiles)
    spans = []
    for entry in plan["buffers"]:
        assert entry["offset"] % entry["align"] == 0, entry
        assert entry["swizzle"] in ("none", "32B", "64B", "128B", "128B by 256-byte rows")
        spans.append((entry["offset"], entry["offset"] + entry["size_bytes"]))
    for x, y in itertools.combinations(plan["buffers"], 2):
        if x["offset"] < y["offset"] + y["size_bytes"] and y["offset"] < x["offset"] + x["size_bytes"]:
            assert x["live"][1] < y["live"][0] or y["live"][1] < x["live"][0], (x, y)
    assert c["offset"] == 0 and c["shares_with"] == ["A_shared", "B_shared"] and c["live"][0] > a["live"][1]
    assert plan["total_bytes"] == art.func.attrs["smem_bytes"] == max(end for _, end in spans)
    assert plan["total_bytes"] == stages * 2 * 128 * 32 * 2 + 2 * 8 * stages  # tiles + barriers, no C_shared
    assert plan["limit_bytes"] == 232448 and plan["fits"] is True
    # the swizzle and offset plan_shared_memory recorded on the buffers, spelled as the schema does
    allocs = {s.buffer.name: s.buffer for s in program.preorder(art.func.body) if isinstance(s, ir.Allocate)}
    for entry in plan["buffers"]:
        attrs = allocs[entry["name"]].attrs
        span = attrs.get("swizzle", 0)
        assert entry["swizzle"] == (f"{span}B" if span else "none")
        assert (entry["offset"], entry["align"]) == (attrs["offset"], attrs["align"])
    assert a["swizzle"] != "none" and a["align"] == 1024  # a 64-byte inner row: swizzled TMA tile


@pytest.mark.parametrize("builder", ["matmul_tma_copy", "matmul_tma_copy_store"])
def test_live_ranges_follow_the_printed_ir(gemm_artifact, builder):
    """Statement i is line ir_lines[i] of print_ir(func); a buffer's live range must span
    exactly the printed lines that use it (its allocation line aside)."""
    art = gemm_artifact(builder, 3)
    plan = smem_plan(art)
    text = print_ir(art.func)
    stmts = program.preorder(art.func.body)
    line_of = program.ir_lines(art.func)
    assert plan["statements"] == len(stmts)
    lines = text.splitlines()
    for entry in plan["buffers"]:
        first, last = entry["live"]
        assert 0 <= first <= last < len(stmts)
        uses = [n for n in _ir_lines_mentioning(text, entry["name"])
                if not re.search(r"T\.alloc_(shared|barrier)", lines[n - 1])]
        assert uses, entry["name"]
        assert line_of[id(stmts[first])] == uses[0], (entry["name"], lines[uses[0] - 1])
        assert line_of[id(stmts[last])] == uses[-1], (entry["name"], lines[uses[-1] - 1])


def test_epilogue_tile_lives_after_the_pipeline(gemm_artifact):
    plan = {b["name"]: b for b in smem_plan(gemm_artifact("matmul_tma_copy_store", 2))["buffers"]}
    # C_shared is only used by the store after the main loop; the operand tiles die in the loop
    assert plan["C_shared"]["live"][0] > plan["A_shared"]["live"][1]
    assert plan["C_shared"]["live"][0] > plan["B_shared"]["live"][1]
    # barriers are live from their initialisation, before any tile is written
    assert plan["mbar_A"]["live"][0] < plan["A_shared"]["live"][0]


def test_the_analysis_stage_puts_the_plan_in_the_trace(gemm_artifact):
    art = gemm_artifact("matmul_tma_copy", 2)
    doc = art.trace.to_dict()
    assert doc["smem"]["buffers"] and all("live" in b for b in doc["smem"]["buffers"])
    assert doc["smem"] == smem_plan(art)
