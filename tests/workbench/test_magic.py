"""%%tilekernel in an in-process IPython shell."""

import pytest

pytest.importorskip("IPython", reason="IPython is not installed (the GPU machine's image has none)")
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from tileworkbench import CompileError, Kernel
from tileworkbench.mime import TRACE_MIME

BUILDER_CELL = '''
import tileworkbench.language as T

def matmul(M, N, K, num_stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 32), "float16")
            B_shared = T.alloc_shared((32, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            mbar_A = T.alloc_barrier(128)
            mbar_B = T.alloc_barrier(128)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=num_stages):
                T.tma_copy(A[by * 128, k * 32], A_shared, barrier=mbar_A)
                T.barrier_arrive(mbar_A)
                T.tma_copy(B[k * 32, bx * 128], B_shared, barrier=mbar_B)
                T.barrier_arrive(mbar_B)
                T.barrier_wait(mbar_A, k % 2)
                T.barrier_wait(mbar_B, k % 2)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])

    return main
'''

PRIM_FUNC_CELL = '''
import tileworkbench.language as T

@T.prim_func
def double(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0
'''


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "tileworkbench")
    return sh


def _run(shell, line, cell):
    with capture_output() as cap:
        result = shell.run_cell_magic("tilekernel", line, cell)
    return result, cap


def test_builder_cell_binds_a_kernel_and_displays_the_workbench(shell):
    _, cap = _run(shell, "matmul 1024 1024 1024 --out-idx 2 --target sm_90 "
                         "--pass-config tl.disable_warp_specialized=true", BUILDER_CELL)
    kernel = shell.user_ns["matmul"]
    assert isinstance(kernel, Kernel)
    assert kernel.trace.kernel["pass_configs"] == {"tl.disable_warp_specialized": True}
    assert kernel.trace.kernel["target"]["arch"] == "sm_90a"
    assert kernel.out_idx == [2]
    assert kernel.trace.barriers and kernel.trace.smem and not kernel.trace.findings
    (out,) = cap.outputs
    doc = out.data[TRACE_MIME]
    assert doc["schema"] == "tileworkbench.trace" and doc["barriers"]["events"]
    assert [p["name"] for p in doc["passes"]] == kernel.trace.pass_names()
    assert 'data-tw="barriers"' in out.data["text/html"] and "<svg" in out.data["text/html"]
    # kernel lines are cell lines, counting the %%tilekernel line as line 1
    assert doc["kernel"]["source_line"] == BUILDER_CELL.splitlines().index(
        "    def main(A: T.Tensor((M, K), \"float16\"), B: T.Tensor((K, N), \"float16\"), "
        "C: T.Tensor((M, N), \"float16\")):") + 2  # 0-based index, plus the magic line


def test_prim_func_cell_with_default_and_custom_names(shell):
    _run(shell, "", PRIM_FUNC_CELL)
    assert isinstance(shell.user_ns["double"], Kernel)
    _run(shell, "double --name k2 --no-display", PRIM_FUNC_CELL)
    assert isinstance(shell.user_ns["k2"], Kernel)
    assert shell.user_ns["k2"].trace.kernel["name"] == "double"


def test_compare_variant_goes_into_the_bundle(shell):
    _, cap = _run(shell, "matmul 1024 1024 1024 2 --target sm_90 --compare-args '1024 1024 1024 3' "
                         "--compare-label 'three stages'", BUILDER_CELL)
    doc = cap.outputs[0].data[TRACE_MIME]
    assert doc["compare"]["label"] == "three stages"
    other = doc["compare"]["trace"]
    assert "mbar_A[k_slot0]" in other["sources"]["device"]  # three stages: the slot is carried
    assert "mbar_A[((k + 1) % 2)]" in doc["sources"]["device"]
    assert 'data-tw="compare"' in cap.outputs[0].data["text/html"]


def test_stepper_option_adds_a_widget(shell):
    _, cap = _run(shell, "matmul 1024 1024 1024 --target sm_90 --stepper", BUILDER_CELL)
    assert len(cap.outputs) == 2
    assert "application/vnd.jupyter.widget-view+json" in cap.outputs[1].data


def test_compile_error_is_short(shell):
    bad = BUILDER_CELL.replace("T.tma_copy(A[by * 128, k * 32], A_shared, barrier=mbar_A)",
                               "T.tma_copy(A[by * 128, k * 32], A_shared)")
    with pytest.raises(CompileError) as info:
        _run(shell, "matmul 1024 1024 1024 --target sm_90", bad)
    lines = info.value._render_traceback_()
    text = "\n".join(lines)
    bad_line = bad.splitlines().index("                T.tma_copy(A[by * 128, k * 32], A_shared)") + 2
    assert f", line {bad_line}: T.tma_copy" in text and "needs barrier=" in text
    assert lines[-1].strip() == "^" and "Traceback" not in text and "tileworkbench/passes" not in text


def test_compile_error_through_run_cell_shows_no_compiler_frames(shell, capsys):
    bad = PRIM_FUNC_CELL.replace("* 2.0", "* undefined_name")
    result = shell.run_cell("%%tilekernel\n" + bad)
    assert isinstance(result.error_in_exec, CompileError)
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "undefined_name" in text and "tileworkbench: compile error" in text
    assert "frontend/parser.py" not in text and "Traceback" not in text


def test_usage_errors(shell):
    with pytest.raises(UsageError):
        _run(shell, "nosuchkernel", PRIM_FUNC_CELL)
    with pytest.raises(UsageError):
        _run(shell, "double --pass-config no.such.key=1", PRIM_FUNC_CELL)
    with pytest.raises(UsageError):
        _run(shell, "double --bogus-option", PRIM_FUNC_CELL)


def test_cells_are_named_as_the_user_knows_them_not_by_their_temp_file(shell):
    shell.execution_count = 7
    shown = shell.displayhook.prompt_count  # the number Jupyter would show while this count runs
    cell = PRIM_FUNC_CELL.replace("* 2.0", "* 7.0")  # a kernel of its own: no cache hit from another cell
    _run(shell, "double --no-display", cell)
    kernel = shell.user_ns["double"]
    line = PRIM_FUNC_CELL.splitlines().index("@T.prim_func") + 2  # the magic's own line is line 1
    assert f"from In [{shown}], line {line + 1} (double)" in kernel.get_kernel_source()
    assert kernel.trace.kernel["source_label"] == f"In [{shown}], line {line + 1}"
    bad = PRIM_FUNC_CELL.replace("* 2.0", "* A")
    shell.execution_count = 8
    with pytest.raises(CompileError) as info:
        _run(shell, "double", bad)
    assert str(info.value).startswith(f"In [{shown + 1}], line ") and "ipykernel" not in str(info.value)


def test_a_kernel_written_in_a_plain_cell_is_named_by_its_cell_too(shell):
    cell = PRIM_FUNC_CELL.replace("* 2.0", "* 5.0")
    with capture_output():
        result = shell.run_cell(cell + "\nimport tileworkbench as tw\n_art = tw.lower(double, target='sm_90a')\n")
    result.raise_error()
    art = shell.user_ns["_art"]
    label = art.trace.kernel["source_label"]
    assert label.startswith("In [") and ", line " in label and "ipykernel" not in label
    assert f"from {label.split(', line')[0]}" in art.device_source


def test_timeline_flag_compiles_a_recording_kernel(shell):
    _, cap = _run(shell, "matmul 256 256 256 --timeline --name mm_tl --out-idx 2 --target sm_90", BUILDER_CELL)
    kernel = shell.user_ns["mm_tl"]
    assert isinstance(kernel, Kernel)
    plan = kernel.trace.timeline["plan"]
    assert plan["every"] == 1 and {s["kind"] for s in plan["sites"]} >= {"wait_begin", "wait_end", "tma_issue"}
    assert "tw_tl.record(" in kernel.get_kernel_source()
    html = cap.outputs[0].data["text/html"]
    assert "kernel.timeline()</code> fills this section" in html
