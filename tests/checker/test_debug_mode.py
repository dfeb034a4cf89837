"""Debug mode (tw.debug_barrier_timeout) on the CPU: the generated device code and launcher,
NVRTC for sm_90a, and the host's reading of the debug record. tests/checker/test_debug_gpu.py
runs it on the GPU."""

import os
import re
import sys

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench import CompileError, KernelRuntimeError
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.backend.runtime import DEBUG_WORDS, Runtime
from tileworkbench.codegen.cuda import inlined_headers

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (HERE, os.path.join(HERE, "..", "spec")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import corpus
import test_tma_copy as spec

SM90 = {"kind": "cuda", "arch": "sm_90"}
NO_WS = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
DEBUG = {tw.PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT: 2.0}
_WAIT_DEBUG = re.compile(r"(\w+)\[([^\]]+)\]\.wait_debug\((.+), tw_debug, (\d+)u, (.+), (\d+)u, (\d+)u, "
                         r"(\d+)ull\);")


def _gemm(stages):
    return spec.matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, T.float16, T.float16, T.float32, 128, stages)


def _kernels():
    return [("gemm_2", lambda: _gemm(2), NO_WS), ("gemm_3", lambda: _gemm(3), NO_WS),
            ("gemm_store_3", lambda: spec.matmul_tma_copy_store(1024, 1024, 1024, 128, 128, 32, T.float16, T.float16,
                                                                 T.float32, 128, 3), NO_WS),
            ("per_warp", spec.per_warp_tma_copy_kernel, {}), ("synchronous_tma", spec._strided_row_program, {}),
            ("hangs", corpus.missing_arrive, {"tw.barrier_check": "off"})]


def _body(source):
    return source.split("// ---- kernel ----", 1)[1]


@pytest.mark.parametrize("name,build,configs", _kernels(), ids=[k[0] for k in _kernels()])
def test_debug_off_leaves_the_output_unchanged(name, build, configs):
    plain = tw.lower(build(), target=SM90, pass_configs=configs)
    for off in (0, None, False):
        same = tw.lower(build(), target=SM90, pass_configs={**configs, "tw.debug_barrier_timeout": off})
        assert same.device_source == plain.device_source and same.host_source == plain.host_source
    for word in ("wait_debug", "tw::debug", "tw_debug", "debug mode", "DEBUG"):
        assert word not in plain.device_source and word not in plain.host_source
    assert "globaltimer" not in inlined_headers() and "globaltimer" in inlined_headers(debug=True)


@pytest.mark.parametrize("name,build,configs", _kernels(), ids=[k[0] for k in _kernels()])
def test_every_wait_is_bounded_and_compiles_for_sm90a(name, build, configs):
    plain = tw.lower(build(), target=SM90, pass_configs=configs)
    art = tw.lower(build(), target=SM90, pass_configs={**configs, **DEBUG})
    body = _body(art.device_source)
    waits = len(re.findall(r"\]\.wait\(", _body(plain.device_source)))
    assert waits and len(_WAIT_DEBUG.findall(body)) == waits and not re.search(r"\]\.wait\(", body)
    assert all(m[7] == "2000000000" for m in _WAIT_DEBUG.findall(body))
    assert "__syncthreads_count" not in body  # block barriers stay plain: a thread that left releases them
    assert re.search(r"unsigned int\* __restrict__ tw_debug\) \{", body)
    # Apart from the bounded waits and the extra parameter, the code is the same.
    undone = body.replace(",\n    unsigned int* __restrict__ tw_debug) {", ") {")
    undone = re.sub(r"(\S+?)\.wait_debug\((.+?), tw_debug, .*\);  // debug mode: bounded wait",
                    r"\1.wait(\2);", undone)
    assert undone == _body(plain.device_source)
    compile_check(art.device_source, "sm_90a", f"debug_{name}.cu")


def test_wait_sites_and_barrier_ids_match_the_trace():
    art = tw.lower(_gemm(3), target=SM90, pass_configs={**NO_WS, **DEBUG})
    namespace: dict = {}
    exec(compile(art.host_source, "launcher", "exec"), namespace)
    barriers = namespace["DEBUG_BARRIERS"]
    assert barriers == ("mbar_A", "mbar_B") and namespace["DEBUG_TIMEOUT_S"] == 2.0
    events = {e["stmt"]: e for e in art.trace.barriers["events"] if e["kind"] == "wait"}
    src = art.func.attrs["source_lines"]
    first = art.func.source_line - next(i for i, t in enumerate(src) if t.lstrip().startswith("def "))
    for name, _slot, _parity, bar, _slot_expr, site, _line, _ns in _WAIT_DEBUG.findall(_body(art.device_source)):
        event = events[int(site)]  # the site is the lowered statement the simulation numbered
        assert event["barrier"] == name == barriers[int(bar)]
        assert f"T.barrier_wait({name}" in src[event["line"] - first]


def test_the_launcher_passes_and_reads_the_record():
    host = tw.lower(_gemm(2), target=SM90, pass_configs={**NO_WS, **DEBUG}).host_source
    assert "    tw_debug = rt.debug_record(stream)" in host  # zeroed on the launch's stream
    assert "rt.launch(KERNEL, GRID, BLOCK, SMEM_BYTES, (A, B, C, A_desc, B_desc, C_desc, tw_debug.data.ptr), stream)" in host
    assert host.rstrip().endswith("rt.check_debug_record(KERNEL, tw_debug, DEBUG_BARRIERS, DEBUG_TIMEOUT_S, stream)")


class _Record:
    """Stands in for the device record (a CuPy array): ``get()`` gives its words."""

    def __init__(self, words):
        self.words = list(words) + [0] * (DEBUG_WORDS - len(words))

    def get(self):
        return self.words


def _runtime():
    rt = Runtime(module=None, smem_bytes=0)
    rt.site_lines, rt.source_file = {40: 88}, "/k/gemm.py"
    return rt


def test_a_timed_out_wait_becomes_a_clear_error():
    rt = _runtime()
    # FLAG, block (2, 1, 0), thread 37, barrier 1, slot 1, parity 0, site 40, line 81, waited 2.000123 s
    record = _Record([1, 2, 1, 0, 37, 1, 1, 0, 40, 81, 2000123])
    with pytest.raises(KernelRuntimeError) as info:
        rt.check_debug_record("main_kernel", record, ("mbar_A", "mbar_B"), 2.0)
    err = info.value
    assert err.record == {"kernel": "main_kernel", "barrier": "mbar_B", "slot": 1, "parity": 0, "block": (2, 1, 0),
                          "block_idx": (2, 1, 0), "thread": 37, "file": "/k/gemm.py", "line": 88,
                          "waited_s": 2.000123, "timeout_s": 2.0}
    text = str(err)
    for part in ("mbar_B[1]", "parity 0", "/k/gemm.py:88", "block (2, 1, 0)", "thread 37", "2 s"):
        assert part in text
    rt.check_debug_record("main_kernel", _Record([0]), ("mbar_A",), 2.0)  # a clean record: nothing


def test_a_reordered_kernel_is_told_its_own_block_indices():
    """The record holds the hardware's blockIdx; a kernel that numbers its blocks otherwise (here
    the longest first across two heads, causal attention's order) hears of its own (bx, by, bz)."""
    from tileworkbench.codegen import block_order

    rt = _runtime()
    rt.block_order = {"grid": [8, 2, 1], "raster_panel": 0, "heaviest_first": True, "heaviest_first_panel": 0,
                      "persistent": False}
    with pytest.raises(KernelRuntimeError) as info:  # blockIdx (3, 0, 0): the 4th block dispatched
        rt.check_debug_record("k", _Record([1, 3, 0, 0, 5, 0, 0, 1, 40, 81, 5]), ("mbar",), 1.0)
    assert info.value.record["block"] == (6, 1, 0) and info.value.record["block_idx"] == (3, 0, 0)
    assert "block (bx, by, bz) = (6, 1, 0), at blockIdx (3, 0, 0)" in str(info.value)
    rt.block_order = {**rt.block_order, "persistent": True}
    with pytest.raises(KernelRuntimeError, match=r"the persistent block at blockIdx \(3, 0, 0\)"):
        rt.check_debug_record("k", _Record([1, 3, 0, 0, 5, 0, 0, 1, 40, 81, 5]), ("mbar",), 1.0)
    assert block_order.kernel_block(rt.block_order, (3, 0, 0)) is None
    # a grid with a size known only at run time: x reversed alone (its count along x is static)
    dynamic = {"grid": [8, None], "raster_panel": 0, "heaviest_first": True, "heaviest_first_panel": 0,
               "persistent": False}
    assert block_order.kernel_block(dynamic, (3, 5, 0)) == (4, 5, 0)


def test_unknown_sites_fall_back_to_the_line_the_device_wrote():
    rt = _runtime()
    with pytest.raises(KernelRuntimeError, match="gemm.py:81"):
        rt.check_debug_record("k", _Record([1, 0, 0, 0, 0, 0, 0, 1, 7, 81, 5]), ("mbar",), 1.0)


def test_deferred_checks_report_later():
    rt = _runtime()
    rt.check_each_launch = False
    record = _Record([1, 0, 0, 0, 3, 0, 0, 1, 40, 0, 9])
    rt.check_debug_record("k", record, ("mbar",), 1.0)  # deferred: no wait, no error yet
    with pytest.raises(KernelRuntimeError, match="mbar\\[0\\] for parity 1"):
        rt.check_deferred()


def test_a_bad_timeout_is_rejected():
    with pytest.raises(CompileError, match="tw.debug_barrier_timeout is a time limit in seconds"):
        tw.lower(_gemm(2), target=SM90, pass_configs={**NO_WS, "tw.debug_barrier_timeout": "soon"})


def test_the_magic_debug_flag_means_two_seconds():
    pytest.importorskip("IPython", reason="IPython is not installed")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "tileworkbench")
    cell = '''
import tileworkbench.language as T

@T.prim_func
def synchronous(A: T.Tensor((128, 32), "float16"), B: T.Tensor((128, 32), "float16")):
    with T.Kernel(1, threads=128):
        A_shared = T.alloc_shared((128, 32), "float16")
        T.copy(A, A_shared, prefer_instruction="tma")
        T.copy(A_shared, B)
'''
    with capture_output():
        shell.run_cell_magic("tilekernel", "synchronous --debug --no-display --target sm_90", cell)
    kernel = shell.user_ns["synchronous"]
    assert kernel.trace.kernel["pass_configs"]["tw.debug_barrier_timeout"] == 2.0
    assert ".wait_debug(" in kernel.get_kernel_source() and "2000000000ull" in kernel.get_kernel_source()


def test_the_debug_cost_benchmark_is_importable():
    from tileworkbench.bench import debug_cost

    assert callable(debug_cost.debug_cost) and callable(debug_cost.main)


def test_a_kernel_that_hands_registers_over_waits_with_the_loop_inline():
    """With ``T.set_max_nreg`` in the kernel every bounded wait is ``wait_debug_inline``: called
    out of line, ptxas dropped the setmaxnreg of TileLang's MLA decode example (C7507) and ran it
    at the launch's register count (tw/sync.h); otherwise the code is the plain kernel's."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tilelang_compat"))
    from test_hand_warp_specialized import gathered_scores

    plain = tw.lower(gathered_scores(), target=SM90)
    art = tw.lower(gathered_scores(), target=SM90, pass_configs=DEBUG)
    body = _body(art.device_source)
    waits = len(re.findall(r"\]\.wait\(", _body(plain.device_source)))
    assert waits and body.count(".wait_debug_inline(") == waits and ".wait_debug(" not in body
    undone = body.replace(",\n    unsigned int* __restrict__ tw_debug) {", ") {")
    undone = re.sub(r"(\S+?)\.wait_debug_inline\((.+?), tw_debug, .*\);  // debug mode: bounded wait",
                    r"\1.wait(\2);", undone)
    assert undone == _body(plain.device_source)
    log = compile_check(art.device_source, "sm_90a", "debug_hands_registers_over.cu").log
    assert "C7507" not in log and "setmaxnreg" in art.device_source
    # a kernel without setmaxnreg keeps the out-of-line loop (the cheaper one, measured)
    assert ".wait_debug_inline(" not in _body(tw.lower(corpus.missing_arrive(), target=SM90, pass_configs={
        **DEBUG, "tw.barrier_check": "off"}).device_source)
