"""compile() without a GPU: kernels carry their sources; the caches key on what matters."""

import os
import subprocess
import sys

import tileworkbench as tw
from tileworkbench.examples import elementwise_add
from tileworkbench.jit import cache

SM90 = {"kind": "cuda", "arch": "sm_90"}


def test_compile_without_gpu_returns_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    cache.clear()
    kernel = tw.compile(elementwise_add(256, 256, 32, 128), out_idx=[2], target=SM90, load_device=False)
    assert "__global__" in kernel.get_kernel_source()
    assert "def launch(rt, A, B, C, stream=0)" in kernel.get_host_source()
    assert kernel.timings["cache"] == "lowered"
    assert tw.compile(elementwise_add(256, 256, 32, 128), out_idx=[2], target=SM90, load_device=False) is kernel


def test_cache_key_covers_configs_target_and_out_idx():
    from tileworkbench.target import Target

    a = cache.cache_key("ir", Target(arch="sm_90a"), {}, [2])
    assert a != cache.cache_key("ir", Target(arch="sm_100a"), {}, [2])
    assert a != cache.cache_key("ir", Target(arch="sm_90a"), {"tl.disable_warp_specialized": True}, [2])
    assert a != cache.cache_key("ir", Target(arch="sm_90a"), {}, [1])
    assert a != cache.cache_key("ir2", Target(arch="sm_90a"), {}, [2])


def test_disk_cache_hit_in_a_new_process(tmp_path):
    code = (
        "import tileworkbench as tw; from tileworkbench.examples import elementwise_add;"
        "k = tw.compile(elementwise_add(128, 128, 32, 128), out_idx=[2],"
        " target={'kind': 'cuda', 'arch': 'sm_90'}, load_device=False); print(k.timings['cache'])"
    )
    env = {**os.environ, "TILEWORKBENCH_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "lowered" and second.stdout.strip() == "disk"


def test_compiling_the_same_function_twice_hits_the_cache(tmp_path, monkeypatch):
    from tileworkbench.examples import matmul

    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    cache.clear()
    f = matmul(256, 256, 256, 128, 128, 32)
    first = tw.compile(f, out_idx=[2], target=SM90, load_device=False)
    assert tw.compile(f, out_idx=[2], target=SM90, load_device=False) is first


def test_cache_key_changes_with_the_compilers_code_not_the_workbenchs(tmp_path):
    # A changed pass must not be served a kernel an older pass generated (same package version).
    import shutil

    package = tmp_path / "tileworkbench"
    shutil.copytree(os.path.dirname(tw.__file__), package, ignore=shutil.ignore_patterns("__pycache__", "labextension"))
    original = cache.source_hash(package)
    assert original == cache.compiler_hash()  # the copy is the same code
    with open(package / "bench" / "gemm.py", "a") as f:
        f.write("\n# the workbench around the compiler\n")
    assert cache.source_hash(package) == original
    with open(package / "passes" / "simplify_ir.py", "a") as f:
        f.write("\n# a changed pass\n")
    assert cache.source_hash(package) != original
