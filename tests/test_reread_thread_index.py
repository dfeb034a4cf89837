"""reread_thread_index: the kernel's main loop reads the thread index again (``tw::thread_index()``),
where ``tw.reread_thread_index`` asks for it or where ``jit.lower`` finds that ptxas spills less
with it. What the kernel computes is unchanged: checked on the thread-level interpreter here and
on the GPU (tests/gpu/test_reread_thread_index_gpu.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import collect
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.jit import lower as lower_module
from tileworkbench.passes.reread_thread_index import main_loops

REREAD = {tw.PassConfigKey.TW_REREAD_THREAD_INDEX: True}


@T.prim_func
def scaled_rows(A: T.Tensor((8, 256), "float32"), B: T.Tensor((8, 256), "float32")):
    """Each block scales its rows by their index, one row an iteration of its main loop; the thread
    index addresses the row's elements inside the loop."""
    with T.Kernel(1, threads=128):
        for r in T.serial(8):
            for i in T.Parallel(256):
                B[r, i] = A[r, i] * (r + 1)


def _kernel(program, configs=None) -> str:
    return tw.lower(program, target="sm_90a", pass_configs=configs).device_source.split("// ---- kernel ----")[1]


def test_the_main_loop_reads_the_thread_index_at_its_top():
    plain, reread = _kernel(scaled_rows), _kernel(scaled_rows, REREAD)
    assert "tw::thread_index()" not in plain
    loop = reread[reread.index("for (int r = 0;"):]
    lines = [line.strip() for line in loop.splitlines()]
    assert lines[1] == "int tx_again = tw::thread_index();"
    body = loop[:loop.index("\n  }\n")]
    assert not re.search(r"\btx\b", body) and re.search(r"\btx_again\b", "\n".join(lines[2:]))
    # the same kernel otherwise: the plain source with tx read anew in the loop
    assert re.sub(r"\btx_again\b", "tx", reread.replace("    int tx_again = tw::thread_index();\n", "")) == plain


def test_only_the_outermost_largest_loop_using_the_thread_index():
    @T.prim_func
    def two_loops(A: T.Tensor((4, 128), "float32"), B: T.Tensor((4, 128), "float32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128):
            for r in T.serial(4):  # no thread index inside: not taken
                C[r] = A[r, 0]
            for r in T.serial(4):
                for i in T.Parallel(128):
                    B[r, i] = A[r, i] + 1.0

    func = tw.lower(two_loops, target="sm_90a", pass_configs=REREAD).func
    (loop, _), = main_loops(func)
    assert "B" in str(loop.body)
    kernel = _kernel(two_loops, REREAD)
    assert kernel.count("tw::thread_index()") == 1


def test_each_warpgroup_s_loop_reads_the_index_again():
    """A block of three ``T.ws`` roles (a producer gathering rows at ``tx - 256``, two consumers):
    each role's loop reads the index anew, and every name bound from it outside the loop is
    written out from the new read (the GPU test runs it; the spills this removes were the seesaw
    sparse MLA producer's gather addresses)."""
    from tilelang_compat.test_hand_warp_specialized import gathered_scores

    art = tw.lower(gathered_scores(), target="sm_90a", pass_configs=REREAD)
    kernel = art.device_source.split("// ---- kernel ----")[1]
    assert kernel.count("tw::thread_index()") == 3
    scopes = {s.var: s for s in collect(art.func.body, ir.ThreadScope)}
    loops = main_loops(art.func)
    assert len(loops) == 3
    for _, names in loops:  # the launch's index, the user's name for it, and the loop's scope's own
        assert len([v for v in names if v in scopes]) == 1 and art.func.launch.thread_var in names
    for start in [m.start() for m in re.finditer(r"for \(int step(_\d)? = 0;", kernel)]:
        loop = kernel[start:]
        loop = loop[:loop.index("\n    }\n")]
        assert re.search(r"int tx_again(_\d)? = tw::thread_index\(\);", loop)
        assert not re.search(r"\btx(_part\d|_first|_\d)?\b", loop.split("\n", 2)[2]), loop


def test_names_bound_from_the_index_outside_the_loop_are_written_out_again():
    @T.prim_func
    def offsets(A: T.Tensor((8, 512), "float32"), B: T.Tensor((8, 512), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            lane = tx % 32
            col = (tx // 32) * 128 + lane * 4
            for r in T.serial(8):
                for j in T.serial(4):
                    B[r, col + j] = A[r, col + j] * 2.0

    kernel = _kernel(offsets, REREAD)
    loop = kernel[kernel.index("for (int r = 0;"):]
    loop = loop[:loop.index("\n  }\n")]
    assert "tx_again = tw::thread_index()" in loop
    assert not re.search(r"\b(tx|lane|col)\b", loop.split("\n", 2)[2]), loop
    a = np.random.default_rng(5).standard_normal((8, 512)).astype(np.float32)
    b = run_at_thread_level(offsets, a, out_idx=[1], pass_configs=REREAD, stage="codegen")
    np.testing.assert_array_equal(b, a * 2)


def test_a_name_bound_from_one_assigned_again_is_not_written_out_anew():
    """``col = tx + base`` with ``base`` assigned again before the loop: written out in the loop it
    would read the new ``base`` (every thread's row moved 128 columns); such a name keeps its
    value from before the loop."""

    @T.prim_func
    def shifted(A: T.Tensor((4, 256), "float32"), B: T.Tensor((4, 256), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            base = T.int32(0)
            col = tx + base
            if A[0, 0] > 0.0:
                base = 128
            for r in T.serial(4):
                B[r, col] = A[r, col] + base

    kernel = _kernel(shifted, REREAD)
    loop = kernel[kernel.index("for (int r = 0;"):]
    assert re.search(r"\bcol\b", loop[:loop.index("\n  }\n")])
    a = np.random.default_rng(6).standard_normal((4, 256)).astype(np.float32)
    a[0, 0] = 1.0
    b = run_at_thread_level(shifted, a, out_idx=[1], pass_configs=REREAD, stage="codegen")
    np.testing.assert_array_equal(b[:, :128], a[:, :128] + 128)
    assert np.isnan(b[:, 128:]).all()  # never written


def test_a_kernel_without_a_loop_is_left_alone():
    @T.prim_func
    def copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]

    assert _kernel(copy, REREAD) == _kernel(copy)


def test_the_thread_level_interpreter_computes_the_same():
    a = np.random.default_rng(3).standard_normal((8, 256)).astype(np.float32)
    b = run_at_thread_level(scaled_rows, a, out_idx=[1], pass_configs=REREAD, stage="codegen")
    np.testing.assert_array_equal(b, a * np.arange(1, 9, dtype=np.float32)[:, None])


def test_the_config_is_a_switch():
    with pytest.raises(tw.CompileError, match="tw.reread_thread_index is a switch"):
        tw.lower(scaled_rows, target="sm_90a", pass_configs={"tw.reread_thread_index": "auto"})


class _Result:
    """What the retry reads of an NVRTC result (``backend.nvrtc.NvrtcResult``)."""

    def __init__(self, spills, registers=255):
        self.spills_bytes, self.registers, self.performance_notes = spills, registers, []
        self.cubin, self.log, self.seconds = b"", "", 0.0


# (spills, registers) plain and read again, whether the second is kept: ptxas's counts of
# DeepSeek v3.2's sparse MLA backward (kept: 1.116x on an H100), the fine-tuning backward (more
# spills), FlashAttention's backward's registers (freed: 0.876x measured; it spilled 8 bytes, compiled
# beside the first form, here 24 so that the form compiled after the first is tried), a tie, ptxas
# at its limit moving by two registers
FORMS = [((316, 255), (72, 255), True), ((2784, 255), (6268, 255), False), ((24, 254), (0, 192), False),
         ((64, 255), (64, 255), False), ((40, 255), (0, 253), True)]


@pytest.mark.parametrize("plain, reread, kept", FORMS)
def test_the_kernel_is_compiled_both_ways_where_ptxas_spills(monkeypatch, plain, reread, kept):
    """The retry keeps the form read again where it spills fewer bytes and needs the registers the
    plain one had: its source, its pass snapshot and what each form spilled and used in the trace
    (ptxas's counts stand in; the last test runs NVRTC's own)."""
    import tileworkbench.backend.nvrtc as nvrtc

    monkeypatch.setattr(lower_module, "OVERLAP_DEVICE_COMPILE", False)
    monkeypatch.setattr(nvrtc, "compile_check",
                        lambda source, *a, **k: _Result(*(reread if "tw::thread_index()" in source.split(
                            "// ---- kernel ----")[1] else plain)))
    art = tw.lower(scaled_rows, target="sm_90a", enable_device_compile=True)
    assert art.trace.resources["thread_index_reread"] == {
        "kept": kept, "spills_bytes": reread[0], "spills_bytes_without": plain[0],
        "registers": reread[1], "registers_without": plain[1]}
    assert art.nvrtc.spills_bytes == (reread if kept else plain)[0]
    assert ("tw::thread_index()" in art.device_source) == kept
    assert art.trace.sources["device"] == art.device_source
    assert (art.trace.passes[-1].name == "reread_thread_index") == kept


def test_no_retry_without_spills_or_with_the_config_set(monkeypatch):
    import tileworkbench.backend.nvrtc as nvrtc

    monkeypatch.setattr(lower_module, "OVERLAP_DEVICE_COMPILE", False)
    compiled = []
    monkeypatch.setattr(nvrtc, "compile_check", lambda source, *a, **k: compiled.append(source) or _Result(0))
    art = tw.lower(scaled_rows, target="sm_90a", enable_device_compile=True)
    assert len(compiled) == 1 and "thread_index_reread" not in art.trace.resources
    compiled.clear()
    monkeypatch.setattr(nvrtc, "compile_check", lambda source, *a, **k: compiled.append(source) or _Result(
        lower_module.REREAD_AFTER_MIN_SPILL_BYTES))  # a few bytes: not worth a second compile after the first
    art = tw.lower(scaled_rows, target="sm_90a", enable_device_compile=True)
    assert len(compiled) == 1 and "thread_index_reread" not in art.trace.resources
    monkeypatch.setattr(nvrtc, "compile_check", lambda source, *a, **k: compiled.append(source) or _Result(100))
    for setting in (True, False):
        compiled.clear()
        art = tw.lower(scaled_rows, target="sm_90a", enable_device_compile=True,
                       pass_configs={tw.PassConfigKey.TW_REREAD_THREAD_INDEX: setting})
        assert len(compiled) == 1 and ("tw::thread_index()" in compiled[0]) == setting


def test_a_starved_kernel_keeps_the_form_ptxas_spills_less_in(nvrtc_check):
    """With NVRTC's own counts: the form kept is the one the rule chooses."""
    from tileworkbench.examples.mla_pieces import dq_and_dkv_steps

    art = tw.lower(dq_and_dkv_steps(), target="sm_90a", enable_device_compile=True)
    tried = art.trace.resources["thread_index_reread"]
    assert tried["spills_bytes_without"] > 0
    if tried["kept"]:
        assert tried["spills_bytes"] < tried["spills_bytes_without"]
        assert tried["registers"] >= tried["registers_without"] - lower_module.REREAD_REGISTER_SLACK
        assert "tw::thread_index()" in art.device_source
        assert art.trace.resources["spills_bytes"] == art.nvrtc.spills_bytes == tried["spills_bytes"]
    else:
        assert "tw::thread_index()" not in art.device_source
        assert art.trace.resources["spills_bytes"] == tried["spills_bytes_without"]


@pytest.mark.parametrize("spills", [0, 8, 316])
def test_a_kernel_whose_fragments_fill_its_registers_compiles_both_forms_at_once(monkeypatch, spills):
    """Where the fragments alone take most of a thread's registers the second form goes to NVRTC
    beside the first, before ptxas has said whether the first spills; it is chosen between only
    where the first spilled."""
    import tileworkbench.backend.nvrtc as nvrtc

    monkeypatch.setattr(lower_module, "OVERLAP_DEVICE_COMPILE", True)  # each compile in a thread of its own
    monkeypatch.setattr(lower_module, "REREAD_ALONGSIDE_SHARE", 0.0)
    compiled = []

    def compile_check(source, *a, **k):
        reread = "tw::thread_index()" in source.split("// ---- kernel ----")[1]
        compiled.append(reread)
        return _Result(spills // 4 if reread else spills)

    monkeypatch.setattr(nvrtc, "compile_check", compile_check)
    art = tw.lower(scaled_rows, target="sm_90a", enable_device_compile=True)
    assert sorted(compiled) == [False, True]  # even a few bytes' spill is chosen on: the compile came free
    assert ("thread_index_reread" in art.trace.resources) == bool(spills)
    assert ("tw::thread_index()" in art.device_source) == bool(spills)
    assert [p.name for p in art.trace.passes].count("reread_thread_index") == bool(spills)


def test_a_second_form_that_does_not_compile_leaves_the_first(monkeypatch):
    """The second form is optional: if NVRTC refuses it (a bug of ours), the kernel keeps its first
    form, the trace says why and a warning asks for a report; the compile itself does not fail."""
    import tileworkbench.backend.nvrtc as nvrtc
    from tileworkbench.errors import InternalCompilerError, TileworkbenchWarning

    monkeypatch.setattr(lower_module, "OVERLAP_DEVICE_COMPILE", False)

    def compile_check(source, *a, **k):
        if "tw::thread_index()" in source.split("// ---- kernel ----")[1]:
            raise InternalCompilerError("internal error: NVRTC could not compile the generated CUDA")
        return _Result(316)

    monkeypatch.setattr(nvrtc, "compile_check", compile_check)
    with pytest.warns(TileworkbenchWarning, match="could not be compiled .* compiler bug"):
        art = tw.lower(scaled_rows, target="sm_90a", enable_device_compile=True)
    assert art.trace.resources["thread_index_reread"] == {
        "kept": False, "error": "internal error: NVRTC could not compile the generated CUDA"}
    assert "tw::thread_index()" not in art.device_source and art.nvrtc.spills_bytes == 316


@T.prim_func
def gathered_rows(A: T.Tensor((64, 64), "float32"), Idx: T.Tensor((64,), "int32"), B: T.Tensor((8, 64, 64), "float32")):
    """Rows gathered through an index table, each thread's elements found by dividing its flat
    index: ``flat // 64`` and ``flat % 64`` in every unrolled copy."""
    with T.Kernel(1, threads=128):
        for r in T.serial(8):
            for i, j in T.Parallel(64, 64):
                B[r, i, j] = A[Idx[i] % 64, j] * (r + 1)


def test_the_index_read_again_keeps_its_range(nvrtc_check):
    """``tw::thread_index()`` states the range ``%tid.x`` has (the asm read hides it from NVVM): with it
    the loop's ``flat / 64`` are shifts, without it signed divisions with their sign fix-ups
    (the fine-tuning sparse MLA forward's main loop: 1987 -> 1759 SASS instructions)."""
    source = tw.lower(gathered_rows, target="sm_90a", pass_configs=REREAD).device_source
    assert "tw::thread_index()" in source and "__builtin_assume(t >= 0 && t < 1024);" in source
    stated = nvrtc_check(source, "sm_90a")
    hidden = nvrtc_check(source.replace("__builtin_assume(t >= 0 && t < 1024);", ""), "sm_90a")
    assert len(stated.cubin) < len(hidden.cubin)
