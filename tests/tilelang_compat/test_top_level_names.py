"""TileLang's top-level names under ``import tileworkbench as tilelang``: the ones we have behave as
TileLang's (the cache switches, ``next_power_of_2``, ``JITKernel``, ``Profiler``,
``tilelang.transform.PassConfigKey``), and the ones we do not (TVM's, other targets', TileLang's
tools) are an ``ImportError`` that says so, as an attribute and as an import at any depth, never an
``AttributeError`` or a bare "No module named"."""

from __future__ import annotations

import importlib

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.jit import cache
from tileworkbench.not_here import NOT_HERE


@pytest.mark.parametrize("name", sorted(NOT_HERE))
def test_what_we_lack_says_it_is_not_supported(name):
    with pytest.raises(ImportError, match=rf"tileworkbench\.{name} is not supported: \w"):
        getattr(tilelang, name)
    with pytest.raises(ImportError, match=rf"tileworkbench\.{name} is not supported"):
        importlib.import_module(f"tileworkbench.{name}.something.deeper")
    with pytest.raises(ImportError, match=rf"tileworkbench\.{name} is not supported"):
        exec(f"from tileworkbench import {name}", {})


def test_the_table_shadows_none_of_our_modules():
    import pkgutil

    ours = {m.name for m in pkgutil.iter_modules(tilelang.__path__)}
    assert not ours & set(NOT_HERE), "a name both ours and refused"
    importlib.import_module("tileworkbench.testing")  # ours, untouched by the finder


def test_transform_has_pass_config_key_and_refuses_tvm_passes():
    from tileworkbench.transform import PassConfigKey

    assert PassConfigKey is tilelang.PassConfigKey and PassConfigKey.TL_DISABLE_TMA_LOWER.value == "tl.disable_tma_lower"
    with pytest.raises(ImportError, match="transform.Simplify is not supported.*TVM"):
        exec("from tileworkbench.transform import Simplify", {})
    assert not hasattr(tilelang.transform, "__path__")  # tools probing a module get AttributeError


def test_math_helpers():
    assert [tilelang.next_power_of_2(x) for x in (0, 1, 2, 3, 5, 8, 1000)] == [1, 1, 2, 4, 8, 8, 1024]
    assert tilelang.cdiv(7, 2) == 4 and tilelang.math.cdiv(8, 2) == 4
    assert tilelang.JITKernel is tilelang.Kernel and tilelang.Profiler is tilelang.profiler.Profiler


def test_disable_cache_compiles_afresh_and_writes_nothing(tmp_path, monkeypatch):
    from tileworkbench.examples.elementwise import elementwise_add

    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    cache.MEMORY.clear()
    try:
        tilelang.disable_cache()
        assert not tilelang.is_cache_enabled()
        first = tilelang.compile(elementwise_add(256, 256, 128, 128, "float16", 128), load_device=False)
        second = tilelang.compile(elementwise_add(256, 256, 128, 128, "float16", 128), load_device=False)
        assert first is not second and second.timings["cache"] == "lowered"
        assert not list(tmp_path.glob("*.json")) and not cache.MEMORY
    finally:
        tilelang.enable_cache()
    assert tilelang.is_cache_enabled()
    again = tilelang.compile(elementwise_add(256, 256, 128, 128, "float16", 128), load_device=False)
    assert list(tmp_path.glob("*.json")) and tilelang.compile(
        elementwise_add(256, 256, 128, 128, "float16", 128), load_device=False) is again
    cache.MEMORY.clear()


def test_set_log_level_sets_our_logger():
    import logging

    before = logging.getLogger("tileworkbench").level
    try:
        tilelang.set_log_level("WARNING")
        assert logging.getLogger("tileworkbench").level == logging.WARNING
    finally:
        logging.getLogger("tileworkbench").setLevel(before)


def test_tilelang_cuda_has_the_mma_swizzle_hint_and_refuses_the_rest():
    """``from tilelang.cuda.intrinsics import make_mma_swizzle_layout`` (TileLang's Hadamard example)
    gives the shared-tile swizzle hint; the rest of TileLang's CUDA backend is an ImportError."""
    import importlib

    from tileworkbench.cuda.intrinsics import make_mma_swizzle_layout
    from tileworkbench.layout import SwizzledLayout

    assert make_mma_swizzle_layout.__name__ == "make_mma_swizzle_layout"
    with pytest.raises(ImportError, match="tileworkbench.cuda.target is not supported: .* not TileLang's CUDA backend"):
        importlib.import_module("tileworkbench.cuda.target")
    with pytest.raises(ImportError, match="tileworkbench.cuda.intrinsics.get_mma_layout is not supported"):
        from tileworkbench.cuda.intrinsics import get_mma_layout  # noqa: F401
    with pytest.raises(ImportError, match="tileworkbench.cuda.codegen is not supported"):
        tilelang.cuda.codegen  # noqa: B018
    assert SwizzledLayout  # the hint's type, which T.annotate_layout takes on shared tiles


def test_tilelang_contrib_answers_the_compute_version_and_refuses_the_rest(monkeypatch):
    """``from tilelang.contrib import nvcc; nvcc.get_target_compute_version()`` (TileLang's GQA
    backward scripts check it is at least 9.0): the GPU's capability as "major.minor"; without a
    GPU a RuntimeError; nvcc's compiling and the rest of contrib an ImportError."""
    import importlib

    from tileworkbench import target
    from tileworkbench.contrib import nvcc

    for arch, version in (("sm_90a", "9.0"), ("sm_100a", "10.0"), ("sm_86", "8.6")):
        monkeypatch.setattr(target, "_DETECTED", arch)
        assert nvcc.get_target_compute_version() == version
        assert float(version) == float(".".join(map(str, nvcc.parse_compute_version(version))))
    monkeypatch.setattr(target, "_DETECTED", "")
    with pytest.raises(RuntimeError, match="no CUDA GPU here"):
        nvcc.get_target_compute_version()
    with pytest.raises(RuntimeError, match="not major.minor"):
        nvcc.parse_compute_version("nine")
    with pytest.raises(ImportError, match="tileworkbench.contrib.nvcc.compile_cuda is not supported: .*NVRTC"):
        from tileworkbench.contrib.nvcc import compile_cuda  # noqa: F401
    with pytest.raises(ImportError, match="tileworkbench.contrib.hipcc is not supported"):
        importlib.import_module("tileworkbench.contrib.hipcc")
    assert tilelang.contrib.nvcc is nvcc


def test_tilelang_engine_callback_imports_and_refuses_to_register():
    """TileLang's GDN examples import ``register_cuda_postproc_callback`` and leave it unused: the
    import works; registering an edit of the generated CUDA is a CompileError (it would be ignored)."""
    import importlib

    from tileworkbench.engine.callback import register_cuda_postproc_callback

    with pytest.raises(tilelang.CompileError, match="register_cuda_postproc_callback is not supported"):
        @register_cuda_postproc_callback
        def edit(code, target):
            return code
    with pytest.raises(ImportError, match="tileworkbench.engine.lower is not supported: tileworkbench has no TVM"):
        importlib.import_module("tileworkbench.engine.lower")


def test_a_dtype_is_its_name_too():
    """TileLang's dtypes compare equal to their names, and dicts keyed by them answer for the name."""
    assert T.float16 == "float16" and T.float16 != "float32" and "bfloat16" == T.bfloat16
    assert {T.float32: 4, T.float16: 2}["float16"] == 2
    assert T.float16 != T.bfloat16 and len({T.float16, T.float16, T.bfloat16}) == 2


def test_a_submodule_of_tilelang_s_we_lack_says_so():
    """``from tilelang.language.dtypes import dtype`` (TileLang's sparse GEMM helpers): an ImportError
    saying it is not supported and why, not Python's bare "No module named"."""
    import importlib

    for load in (lambda: importlib.import_module("tileworkbench.language.dtypes"),
                 lambda: importlib.import_module("tileworkbench.language.dtypes.sub")):
        with pytest.raises(ImportError, match="tileworkbench.language.dtypes is not supported: TileLang's dtype objects"):
            load()


def test_a_dtype_gives_its_torch_dtype(monkeypatch):
    """``T.float16.as_torch()`` (TileLang's examples make their inputs with it): the torch dtype of
    the same name, FP8's under torch's ``fn`` names; a packed FP4 type has none. A stand-in torch
    module: CI has no torch."""
    import types

    fake = types.SimpleNamespace(float16="f16", bfloat16="bf16", float8_e4m3fn="e4m3", int32="i32")
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    assert [T.float16.as_torch(), T.bfloat16.as_torch(), T.float8_e4m3fn.as_torch(), T.int32.as_torch()] == \
        ["f16", "bf16", "e4m3", "i32"]
    with pytest.raises(TypeError, match="T.float4_e2m1fn has no torch dtype"):
        T.float4_e2m1fn.as_torch()
