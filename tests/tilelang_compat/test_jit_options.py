"""TileLang 0.1.15's ``@jit`` options and pass config keys, as its programs pass them: every key is
a ``PassConfigKey`` member (no AttributeError); ``tl.disable_wgmma`` is ours; the keys that tune
TileLang's own passes, checks and debug output are taken with a warning saying they do nothing
here and why; ``compile_flags`` gives fast math for ``--use_fast_math`` and warns about the rest;
``execution_backend``, ``target_host``, ``debug_root_path`` and ``verbose`` are taken."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench import target as target_module
from tileworkbench.errors import CompileError, TileworkbenchWarning
from tileworkbench.target import PassConfigKey, normalize_pass_configs

# TileLang 0.1.15's tilelang/transform/pass_config.py, its keys' names (all 59)
TILELANG_KEYS = """TL_SIMPLIFY TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS
TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL
TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS TL_SIMPLIFY_ENABLE_LET_INLINE TL_DISABLE_BUFFER_INIT_CHECK
TL_DISABLE_DATA_RACE_CHECK TL_DISABLE_PRELOWER_SEMANTIC_CHECK TL_DISABLE_WARP_SPECIALIZED TL_ENABLE_AUTO_SCHEDULE
TL_ENABLE_AUTO_WARP_SPECIALIZATION TL_ENABLE_FAST_MATH TL_PTXAS_REGISTER_USAGE_LEVEL TL_DEVICE_COMPILE_FLAGS
TL_EMIT_LINE_DIRECTIVES TL_CONFIG_INDEX_BITWIDTH TL_ENABLE_REDUCER_PLAN_VERBOSE TL_LAYOUT_COST_MODEL
TL_REDUCER_FORCE_BASELINE TL_DISABLE_TMA_LOWER TL_DISABLE_SAFE_MEMORY_ACCESS TL_DISABLE_VECTORIZE_256
TL_ENABLE_FP32X2_REDUCTION TL_ENABLE_ASYNC_COPY TL_ENABLE_LOWER_LDGSTG TL_ENABLE_LOWER_LDGSTG_PREDICATED
TL_ENABLE_VECTORIZE_PLANNER_VERBOSE TL_DISABLE_WGMMA TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS
TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE TL_DISABLE_SHARED_MEMORY_REUSE TL_DISABLE_SHUFFLE_ELECT
TL_DISABLE_LOOP_UNSWITCHING TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS
TL_DISABLE_THREAD_STORAGE_SYNC TL_FORCE_LET_INLINE TL_AST_PRINT_ENABLE TL_LAYOUT_VISUALIZATION_ENABLE
TL_LAYOUT_VISUALIZATION_FORMATS TL_STORAGE_REWRITE_DETECT_INPLACE TIR_ENABLE_EQUIV_TERMS_IN_CSE TIR_DISABLE_CSE
TIR_SIMPLIFY TIR_DISABLE_STORAGE_REWRITE TIR_DISABLE_VECTORIZE TIR_USE_ASYNC_COPY TIR_ENABLE_DEBUG
TIR_MERGE_STATIC_SMEM TIR_ADD_LOWER_PASS TIR_NOALIAS CUDA_KERNELS_OUTPUT_DIR TL_DISABLE_OUT_OF_BOUND_WARNING
TL_ENABLE_DUMP_IR TL_DUMP_IR_DIR TL_PASS_PROFILE TL_PASS_PROFILE_THRESHOLD_MS""".split()


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(target_module, "_warned_keys", set())


def test_every_tilelang_key_is_a_member():
    assert len(TILELANG_KEYS) == 59
    missing = [k for k in TILELANG_KEYS if not hasattr(PassConfigKey, k)]
    assert missing == []


def test_each_key_is_ours_an_alias_of_ours_or_does_nothing_here_with_a_reason():
    for name in TILELANG_KEYS:
        key = getattr(PassConfigKey, name).value
        reason = target_module.TILELANG_ONLY_KEYS.get(key)
        assert (key in target_module._KNOWN_KEYS) + (key in target_module.ALIASES) + (reason is not None) == 1, name
        assert reason is None or "this compiler" in reason


def test_a_key_that_does_nothing_here_is_dropped_with_a_warning_once():
    with pytest.warns(TileworkbenchWarning, match="tl.disable_thread_storage_sync has no effect in tileworkbench: "
                                                  "this compiler puts a barrier"):
        assert normalize_pass_configs({PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}) == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert normalize_pass_configs({"tl.disable_thread_storage_sync": True, "tl.enable_fast_math": True}) == \
            {"tl.enable_fast_math": True}


def test_tilelang_s_disable_wgmma_keeps_a_gemm_on_mma_sync():
    from tileworkbench.examples import matmul as builder

    func = builder(256, 256, 256, 128, 128, 32, "float16", "float16", 2, 128)
    ours = tilelang.lower(func, target="sm_90a", pass_configs={PassConfigKey.TW_DISABLE_WGMMA: True}).kernel_source
    theirs = tilelang.lower(func, target="sm_90a", pass_configs={PassConfigKey.TL_DISABLE_WGMMA: True}).kernel_source
    plain = tilelang.lower(func, target="sm_90a").kernel_source
    assert "wgmma" in plain and "gemm_ss" in theirs and theirs == ours


def test_an_unknown_key_is_still_refused():
    with pytest.raises(CompileError, match="unknown pass config 'tl.no_such_key'"):
        normalize_pass_configs({"tl.no_such_key": True})


def _double(n: int):
    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(n):
                B[i] = T.exp(A[i]) * 2

    return double


def test_compile_flags_give_fast_math_and_warn_about_the_rest():
    with pytest.warns(TileworkbenchWarning, match=r"compile_flags \['-O3', '-DNDEBUG'\] have no effect here"):
        jitted = tilelang.jit(out_idx=[1], target="sm_90a", compile_flags=["-O3", "--use_fast_math", "-DNDEBUG"])(_double)
    assert jitted.pass_configs == {"tl.enable_fast_math": True}
    from tileworkbench.jit.lower import nvrtc_extra_options

    assert "--use_fast_math" in nvrtc_extra_options(jitted.pass_configs)  # what NVRTC is then given


@pytest.mark.parametrize("flags", [["--ptxas-options=-v,--register-usage-level=10", "-O3"],
                                   ["-O3", "-Xptxas", "-v,--register-usage-level=10"]])
def test_compile_flags_hand_ptxas_its_options(flags):
    """TileLang's sparse MLA seesaw asks nvcc for ``--ptxas-options=-v,--register-usage-level=10``:
    ptxas gets them here too (``-v`` it gets anyway); only the rest is warned about."""
    from tileworkbench.jit.lower import nvrtc_extra_options

    with pytest.warns(TileworkbenchWarning, match=r"compile_flags \['-O3'\] have no effect here"):
        jitted = tilelang.jit(out_idx=[1], target="sm_90a", compile_flags=flags,
                              pass_configs={PassConfigKey.TW_PTXAS_OPTIONS: ["--warn-on-spills"]})(_double)
    assert jitted.pass_configs == {"tw.ptxas_options": ["--warn-on-spills", "-v", "--register-usage-level=10"]}
    assert nvrtc_extra_options(jitted.pass_configs) == ("-Xptxas=--warn-on-spills",
                                                        "-Xptxas=--register-usage-level=10")


def test_ptxas_options_reach_ptxas(nvrtc_check):
    """NVRTC hands them on: ptxas unoptimised gives other code (``--maxrregcount`` would not show:
    the kernel's launch bounds take precedence over it)."""
    optimised = tilelang.lower(_double(4096), target="sm_90a", enable_device_compile=True)
    plain = tilelang.lower(_double(4096), target="sm_90a", enable_device_compile=True,
                           pass_configs={PassConfigKey.TW_PTXAS_OPTIONS: ["-O0"]})
    assert plain.nvrtc.cubin != optimised.nvrtc.cubin
    assert "-Xptxas=-O0" in plain.nvrtc.options
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # TileLang's key has an effect now: no warning
        level = tilelang.lower(_double(4096), target="sm_90a", enable_device_compile=True,
                               pass_configs={PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 10})
    assert "-Xptxas=--register-usage-level=10" in level.nvrtc.options
    with pytest.raises(CompileError, match="no-such-option"):
        tilelang.lower(_double(4096), target="sm_90a", enable_device_compile=True,
                       pass_configs={PassConfigKey.TW_PTXAS_OPTIONS: ["--no-such-option"]})


@pytest.mark.parametrize("key, value", [(PassConfigKey.TW_PTXAS_OPTIONS, "--maxrregcount=16"),
                                        (PassConfigKey.TW_PTXAS_OPTIONS, ["maxrregcount=16"]),
                                        (PassConfigKey.TW_PTXAS_OPTIONS, ["-O3 -v"]),
                                        (PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL, 11),
                                        (PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL, True)])
def test_bad_ptxas_settings_are_refused(key, value):
    with pytest.raises(CompileError, match=f"pass config {key.value} (is a list of ptxas options|is ptxas's register)"):
        normalize_pass_configs({key: value})


def test_the_other_jit_options_are_taken(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    jitted = tilelang.jit(out_idx=[1], target="cpu", execution_backend="cython", target_host="c",
                          debug_root_path=str(Path(tmp_path) / "debug"), verbose=True)(_double)
    assert jitted(64) is not None
    with pytest.raises(CompileError, match="execution_backend 'rocm' is none of TileLang's"):
        tilelang.jit(execution_backend="rocm")(_double)
    with pytest.raises(CompileError, match="unsupported option 'no_such_option'"):
        tilelang.jit(no_such_option=1)(_double)


def test_verbose_says_where_a_kernel_came_from(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    tilelang.jit(out_idx=[1], target="sm_90a", verbose=True)(_double)(96)
    assert "tileworkbench: double_kernel for sm_90a: lowered in" in capsys.readouterr().out
