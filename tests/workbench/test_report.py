"""The HTML renderer, the display object, the stepper and the ``tileworkbench`` command."""

import json
import re
import textwrap

import pytest

from tileworkbench import cli
from tileworkbench.notebook import TraceView, stepper
from tileworkbench.mime import TRACE_MIME
from tileworkbench.report import render_fragment, render_page

GEMM = "tileworkbench.examples.gemm::matmul_tma_copy"
GEMM_ARGS = ["1024", "1024", "1024", "128", "128", "32", "float16", "float16", "float32", "128"]


@pytest.fixture
def doc(gemm_artifact):
    return gemm_artifact("matmul_tma_copy", 3).trace.to_dict()


def _section(html: str, name: str) -> str:
    m = re.search(rf'<section id="[^"]*" data-tw="{name}">(.*?)</section>', html, re.DOTALL)
    assert m, f"no section {name}"
    return m.group(1)


def test_page_has_every_section_and_is_self_contained(doc):
    html = render_page(doc)
    for name in ("summary", "findings", "pass-list", "passes", "device-source", "host-source", "smem",
                 "barriers", "tma"):
        _section(html, name)
    # nothing is fetched: no external URLs apart from the SVG namespace, no script code
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert re.sub(r"http://www\.w3\.org/2000/svg", "", html).count("http") == 0
    scripts = re.findall(r"<script([^>]*)>", html)
    assert scripts == [' type="application/json" id="tw-trace-json"']
    embedded = re.search(r'<script type="application/json" id="tw-trace-json">(.*?)</script>', html, re.DOTALL).group(1)
    assert json.loads(embedded) == json.loads(json.dumps(doc))  # "<\/" is JSON for "</"


def test_pass_list_ir_and_diffs(doc):
    html = render_page(doc)
    rows = re.findall(r'<a href="#tw-pass-(\d+)">([^<]+)</a>', _section(html, "pass-list"))
    assert [name for _, name in rows] == [p["name"] for p in doc["passes"]]
    passes = _section(html, "passes")
    assert passes.count('class="tw-pass"') == len(doc["passes"])
    pipelined = re.search(r'data-pass="inject_software_pipeline">(.*?)</details></details>', passes, re.DOTALL).group(1)
    added = re.findall(r'<span class="tw-diff-add">(.*?)</span>', pipelined)
    assert any("versions=3" in a for a in added)  # the pass gives the tiles three versions
    assert any("k // 3 % 2" in a for a in added)  # and rewrites the parity for three stages
    assert re.findall(r'<span class="tw-diff-del">(.*?)</span>', pipelined)
    unchanged = [p for p in doc["passes"] if not p["changed"]]
    for p in unchanged:
        block = re.search(rf'data-pass="{p["name"]}">(.*?)</details></details>', passes, re.DOTALL).group(1)
        assert "(no change)" in block


def test_sources_and_timelines(doc):
    html = render_page(doc)
    device = _section(html, "device-source")
    assert "mbar_A[k_slot1].wait(k_phase1);" in device.replace("&#x27;", "'")  # the 3-stage ring's carried slot
    assert "def launch(" in _section(html, "host-source")
    smem = _section(html, "smem")
    assert smem.count('class="tw-smem-buffer"') == len(doc["smem"]["buffers"])
    barriers = _section(html, "barriers")
    assert barriers.count('class="tw-barrier-event"') == len(doc["barriers"]["events"])
    waits = re.findall(r'data-kind="wait" data-seq="\d+"><title>([^<]+)</title>', barriers)
    assert len(waits) == 64 and "mbar_A[0]: iteration 3" in waits[6] and "parity 1" in waits[6]


def test_findings_are_marked(gemm_artifact):
    art = gemm_artifact("matmul_tma_copy", 2)
    doc = art.trace.to_dict()
    # a deliberately wrong simulation result: the renderer must mark the event and list the finding
    doc["findings"] = [{"severity": "error", "message": "never completes", "barrier": "mbar_A", "slot": 0,
                        "iteration": 0, "line": 55}]
    doc["barriers"] = dict(doc["barriers"], events=[dict(e) for e in doc["barriers"]["events"]])
    first_wait = next(e for e in doc["barriers"]["events"] if e["kind"] == "wait")
    first_wait["finding"] = 0
    html = render_fragment(doc)
    assert 'data-finding="0"' in html and "never completes" in _section(html, "findings")


def test_the_summary_says_what_the_second_form_of_a_spilling_kernel_came_to(doc):
    assert "thread index read again" not in _section(render_page(doc), "summary")
    doc["resources"]["thread_index_reread"] = {"kept": True, "spills_bytes": 72, "spills_bytes_without": 316,
                                               "registers": 255, "registers_without": 255}
    assert "kept (spills 316 -&gt; 72 B, registers 255 -&gt; 255)" in _section(render_page(doc), "summary")
    doc["resources"]["thread_index_reread"] = {"kept": False, "error": "internal error: <NVRTC>"}
    assert "not compiled: internal error: &lt;NVRTC&gt;" in _section(render_page(doc), "summary")


def test_trace_view_bundle_and_compare(gemm_artifact):
    two, three = gemm_artifact("matmul_tma_copy", 2), gemm_artifact("matmul_tma_copy", 3)
    view = TraceView(two, compare=three, compare_label="3 stages")
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {TRACE_MIME, "text/html", "text/plain"}
    assert bundle[TRACE_MIME]["compare"]["label"] == "3 stages"
    assert bundle[TRACE_MIME]["compare"]["trace"]["sources"] == three.trace.to_dict()["sources"]
    compare = _section(bundle["text/html"], "compare")
    assert "tw-diff-add" in compare and "mbar_A[2].init(128);" in compare
    assert TraceView(two)._repr_mimebundle_()[TRACE_MIME].get("compare") is None
    with pytest.raises(ValueError):
        TraceView({"schema": "something else"})


def test_stepper_steps_through_passes(doc):
    st = stepper(doc)
    assert st.index == len(doc["passes"]) - 1
    st.select("inject_software_pipeline")
    assert "inject_software_pipeline" in st.header.value
    assert "versions=3" in st.view.value and 'class="tw-diff-add"' not in st.view.value
    st.set_mode("diff")
    assert 'class="tw-diff-add"' in st.view.value
    before = st.index
    st.next_button.click()
    assert st.index == before + 1
    st.prev_button.click()
    assert st.index == before
    st.changed_only.value = True
    st.select(0)
    st.step(+1)
    assert doc["passes"][st.index]["changed"]
    assert "application/vnd.jupyter.widget-view+json" in st._repr_mimebundle_()


# ---- the command line ------------------------------------------------------------------------


def test_cli_report_from_module_path(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert cli.main(["report", GEMM, "--args", *GEMM_ARGS, "3", "-o", str(out)]) == 0
    html = out.read_text()
    assert "mbar_A[k_slot1]" in html and 'data-tw="barriers"' in html
    assert "wrote" in capsys.readouterr().out


def test_cli_report_from_file_with_builder_and_prim_func(tmp_path):
    src = tmp_path / "kernels.py"
    src.write_text(textwrap.dedent('''
        import tileworkbench.language as T

        def scale(n=256, factor=2.0):
            @T.prim_func
            def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
                with T.Kernel(n // 128, threads=128) as bx:
                    for i in T.Parallel(128):
                        B[bx * 128 + i] = A[bx * 128 + i] * factor
            return main

        @T.prim_func
        def copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(128):
                    B[i] = A[i]
    '''))
    out = tmp_path / "a.html"
    assert cli.main(["report", f"{src}::scale", "-o", str(out)]) == 0
    assert "A[" in out.read_text()
    assert cli.main(["report", f"{src}::scale", "--args", "512", "factor=3.0", "-o", str(out)]) == 0
    assert "3.0" in out.read_text() and "(512,)" in out.read_text()
    assert cli.main(["report", f"{src}::copy", "-o", str(out)]) == 0
    trace_json = tmp_path / "t.json"
    assert cli.main(["trace", f"{src}::copy", "-o", str(trace_json)]) == 0
    doc = json.loads(trace_json.read_text())
    assert doc["schema"] == "tileworkbench.trace" and doc["smem"] is not None and doc["barriers"] is not None
    # a saved trace renders without compiling
    assert cli.main(["report", str(trace_json), "-o", str(out)]) == 0
    assert 'data-tw="pass-list"' in out.read_text()


def test_cli_errors(tmp_path, capsys):
    src = tmp_path / "bad.py"
    src.write_text(textwrap.dedent('''
        import tileworkbench.language as T

        @T.prim_func
        def bad(A: T.Tensor((128, 32), "float16")):
            with T.Kernel(1, threads=128) as bx:
                A_shared = T.alloc_shared((128, 32), "float16")
                T.tma_copy(A[0, 0], A_shared)
    '''))
    assert cli.main(["report", f"{src}::bad", "-o", str(tmp_path / "x.html")]) == 1
    err = capsys.readouterr().err
    assert "compile error" in err and "bad.py:8" in err and "^" in err and "Traceback" not in err
    # the module itself fails to import (the prim_func is parsed at import): a compile error too
    assert cli.main(["report", f"{src}::other"]) == 1
    good = tmp_path / "good.py"
    good.write_text("X = 1\n")
    capsys.readouterr()
    assert cli.main(["report", f"{good}::missing"]) == 2
    assert "has no 'missing'" in capsys.readouterr().err
    assert cli.main(["report", f"{good}::X"]) == 2
    assert cli.main(["report", "no_such_file.py::f"]) == 2
    assert not (tmp_path / "x.html").exists()


def test_the_report_of_a_fresh_artifact_shows_the_analyses_lower_ran(tmp_path):
    import tileworkbench as tw
    from tileworkbench.examples.gemm import matmul_tma_copy
    from tileworkbench.report import write_report

    art = tw.lower(matmul_tma_copy(*map(int, GEMM_ARGS[:6]), *GEMM_ARGS[6:9], 128, 2),
                   target={"kind": "cuda", "arch": "sm_90"})
    assert [a.name for a in art.trace.analyses] == ["smem_plan", "barrier_simulation", "barrier_check"]
    path = write_report(art, tmp_path / "r.html")
    with open(path) as fh:
        html = fh.read()
    assert art.trace.barriers is not None and all("live" in b for b in art.trace.smem["buffers"])
    assert html.count('class="tw-barrier-event"') == len(art.trace.barriers["events"])


def test_cli_help_describes_each_command_with_examples(capsys):
    for argv in (["--help"], ["report", "--help"], ["trace", "--help"]):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        assert done.value.code == 0
        text = capsys.readouterr().out
        assert "examples:" in text and "tileworkbench report tileworkbench.examples.gemm::matmul_tma_copy" in text
    assert "Lower a tile kernel for Hopper (no GPU needed)" in cli.build_parser().format_help()
    trace_help = cli.build_parser()._subparsers._group_actions[0].choices["trace"].format_help()
    assert "a pass config, repeatable" in trace_help and "docs/trace-schema.md" in trace_help


def test_cli_trace_to_a_file_says_where_it_wrote(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert cli.main(["trace", GEMM, "--args", *GEMM_ARGS, "2", "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out and json.loads(out.read_text())["schema"] == "tileworkbench.trace"
    assert cli.main(["trace", GEMM, "--args", *GEMM_ARGS, "2"]) == 0  # stdout: the JSON alone, parseable
    assert json.loads(capsys.readouterr().out)["schema"] == "tileworkbench.trace"


def test_reports_are_titled_by_the_builder_and_its_arguments_and_name_swizzles(tmp_path):
    out = tmp_path / "r.html"
    assert cli.main(["report", GEMM, "--args", *GEMM_ARGS, "2", "-o", str(out)]) == 0
    html = out.read_text()
    label = f"matmul_tma_copy({', '.join(GEMM_ARGS + ['2'])})"
    assert f"<title>tileworkbench report: {label}</title>" in html and f"tileworkbench: {label}</h1>" in html
    tma = html[html.index('data-tw="tma"'):]
    assert "128B (3)" in tma or "64B (2)" in tma  # the TMA tab names a swizzle as the shared-memory tab does
    doc = json.loads(html.split('id="tw-trace-json">')[1].split("</script>")[0])
    del doc["kernel"]["label"]
    assert "tileworkbench: main (gemm.py:" in render_page(doc)  # without a label: the name and where it is


def test_cli_reports_registers_and_spills_from_nvrtc_without_a_gpu(tmp_path):
    from tileworkbench.backend.nvrtc import nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here (no cuda-bindings / libnvrtc)")
    out = tmp_path / "t.json"
    assert cli.main(["trace", GEMM, "--args", *GEMM_ARGS, "2", "-o", str(out)]) == 0
    resources = json.loads(out.read_text())["resources"]
    assert resources["registers"] > 0 and resources["spills_bytes"] == 0


def test_the_report_shows_the_kernel_code_before_the_inlined_headers(tmp_path):
    out = tmp_path / "r.html"
    assert cli.main(["report", GEMM, "--args", *GEMM_ARGS, "2", "-o", str(out)]) == 0
    html = out.read_text()
    section = html[html.index('data-tw="device-source"'):html.index('data-tw="host-source"')]
    kernel, headers = section.index('data-tw="kernel-code"'), section.index('data-tw="inlined-headers"')
    assert kernel < headers and "__global__" in section[kernel:headers] and "tw/common.h" in section[headers:]
    first = int(re.search(r"show the kernel \(lines (\d+)-", section).group(1))
    assert re.search(rf'<span class="tw-lineno">\s*{first}</span>  // ---- kernel ----', section)


def test_the_kernel_table_has_a_header_row_with_names():
    html = render_fragment({"kernel": {"name": "k"}, "resources": {}, "passes": []})
    summary = html[html.index('data-tw="summary"'):html.index('data-tw="findings"')]
    assert "<thead><tr><th>property</th><th>value</th></tr></thead>" in summary
    assert "<th></th>" not in summary
