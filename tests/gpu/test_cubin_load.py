"""On the GPU: the cubin compile() made (NVRTC through cuda-bindings) loads with cuModuleLoadData
and runs; a disk-cache hit in a new process loads the cached cubin and runs no NVRTC. Every
kernel is checked against a reference on fresh random inputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tileworkbench as tw
from tileworkbench.backend import nvrtc
from tileworkbench.backend.runtime import DeviceModule, load_module
from tileworkbench.examples import elementwise_add
from tileworkbench.examples.gemm import matmul_tma_copy
from tileworkbench.jit import cache
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)
REPO = Path(__file__).resolve().parents[2]
SPEC_CONFIGS = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def rel_err(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def test_a_hand_written_cubin_loads_and_runs():
    import cupy

    source = ('extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {\n'
              '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] += a * x[i];\n}\n')
    result = nvrtc.compile_check(source, tw.target.detect_arch(), name="axpy.cu")
    module = load_module(result.cubin, tw.target.detect_arch())
    fn = module.get_function("axpy")
    assert fn.num_regs > 0
    x = cupy.random.standard_normal(1000, dtype=cupy.float32)
    y = cupy.random.standard_normal(1000, dtype=cupy.float32)
    expected = y + 2.5 * x
    fn((4,), (256,), (x, y, cupy.float32(2.5), cupy.int32(1000)))
    assert cupy.allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_a_cubin_for_another_arch_is_a_clear_error():
    source = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'
    other = nvrtc.compile_check(source, "sm_100a", name="k.cu")
    with pytest.raises(tw.KernelRuntimeError, match="could not load the kernel's cubin .built for sm_100a"):
        load_module(other.cubin, "sm_100a")


def test_the_spec_gemm_runs_from_its_cubin(torch, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    cache.clear()
    kernel = tw.compile(matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 2),
                        out_idx=[2], pass_configs=SPEC_CONFIGS)
    assert nvrtc.cubin_sm(kernel.cubin) == 90
    module = kernel._runtime.module
    assert isinstance(module, DeviceModule) and module.cubin == kernel.cubin
    fn = kernel._runtime.function(kernel.name)
    assert fn.num_regs == kernel.record["nvrtc"]["registers"]  # the loaded code is ptxas's
    if kernel.record["smem_bytes"] > 48 * 1024:
        assert fn.max_dynamic_shared_size_bytes >= kernel.record["smem_bytes"]
    assert kernel.timings["module_load_s"] > 0
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    assert rel_err(kernel(a, b), a.double() @ b.double()) < 2e-3


def test_a_kernel_over_48k_of_shared_memory_gets_its_limit(torch, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    cache.clear()
    kernel = tw.compile(matmul_tma_copy(1024, 1024, 1024, 128, 128, 64, "float16", "float16", "float32", 128, 3),
                        out_idx=[2], pass_configs=SPEC_CONFIGS)
    assert kernel.record["smem_bytes"] > 48 * 1024
    assert kernel._runtime.function(kernel.name).max_dynamic_shared_size_bytes >= kernel.record["smem_bytes"]
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    assert rel_err(kernel(a, b), a.double() @ b.double()) < 2e-3


_CHILD = """
import json, torch
import tileworkbench as tw
from tileworkbench.backend import nvrtc
from tileworkbench.examples import elementwise_add
a = torch.randn(512, 384, device="cuda", dtype=torch.float16)
b = torch.randn(512, 384, device="cuda", dtype=torch.float16)
kernel = tw.compile(elementwise_add(512, 384, 32, 128), out_idx=[2])
ok = bool(torch.allclose(kernel(a, b), a + b))
print(json.dumps({"cache": kernel.timings["cache"], "nvrtc_compiles": nvrtc.COMPILES, "ok": ok,
                  "module_load_s": kernel.timings["module_load_s"]}))
"""


def test_a_disk_hit_in_a_new_process_loads_the_cached_cubin(tmp_path):
    env = dict(os.environ, TILEWORKBENCH_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    env.pop("TILEWORKBENCH_DISABLE_CACHE", None)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["cache"] for r in runs] == ["lowered", "disk"]
    assert [r["nvrtc_compiles"] for r in runs] == [1, 0]
    assert all(r["ok"] and r["module_load_s"] > 0 for r in runs)


def test_cupy_inputs_run_through_the_loaded_cubin():
    import cupy

    kernel = tw.compile(elementwise_add(300, 200, 32, 128, dtype="float32"), out_idx=[2])
    a = cupy.random.standard_normal((300, 200), dtype=cupy.float32)
    b = cupy.random.standard_normal((300, 200), dtype=cupy.float32)
    assert cupy.allclose(kernel(a, b), a + b)
