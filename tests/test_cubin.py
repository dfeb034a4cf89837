"""compile() makes the cubin itself (NVRTC, no GPU needed): the record and the disk cache carry it,
a disk hit runs no NVRTC, lower()'s cubin is reused, NVRTC's errors are CompileErrors with its log."""

import base64
import json
import struct

import pytest

import tileworkbench as tw
from tileworkbench.backend import nvrtc
from tileworkbench.examples import elementwise_add, matmul
from tileworkbench.jit import cache
from tileworkbench.jit import kernel as jit_kernel
from tileworkbench.jit import lower as jit_lower

SM90A = {"kind": "cuda", "arch": "sm_90a"}


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_CACHE_DIR", str(tmp_path))
    cache.clear()
    yield tmp_path
    cache.MEMORY.clear()


def _is_sm90_cubin(data: bytes) -> bool:
    # ELF magic, 64-bit, e_machine EM_CUDA (190); SM 90 in e_flags (bits 8-15 from ELF ABI 8 on)
    if data[:4] != b"\x7fELF" or data[4] != 2 or struct.unpack_from("<H", data, 18)[0] != 190:
        return False
    flags = struct.unpack_from("<I", data, 48)[0]
    return ((flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF) == 90


def test_the_record_carries_a_cubin_for_sm90a(own_cache):
    kernel = tw.compile(matmul(256, 256, 256, 128, 128, 32), out_idx=[2], target=SM90A, load_device=False)
    assert _is_sm90_cubin(kernel.cubin) and nvrtc.cubin_sm(kernel.cubin) == 90
    assert base64.b64decode(kernel.record["cubin"]) == kernel.cubin
    info = kernel.record["nvrtc"]
    assert info["arch"] == "sm_90a" and info["version"] == nvrtc.nvrtc_version()
    assert "-lineinfo" in info["options"] and "--gpu-architecture=sm_90a" in info["options"]
    assert info["registers"] > 0 and info["spills_bytes"] == 0
    assert kernel.trace.resources["registers"] == info["registers"]  # ptxas's report reaches the trace
    assert kernel.timings["nvrtc_s"] > 0 and kernel.timings["lower_s"] > 0


def test_a_disk_hit_returns_the_cubin_and_runs_no_nvrtc(own_cache):
    first = tw.compile(elementwise_add(256, 256, 32, 128), out_idx=[2], target=SM90A, load_device=False)
    (path,) = own_cache.glob("*.json")
    assert base64.b64decode(json.loads(path.read_text())["cubin"]) == first.cubin
    cache.MEMORY.clear()  # as a new process would
    compiles = nvrtc.COMPILES
    again = tw.compile(elementwise_add(256, 256, 32, 128), out_idx=[2], target=SM90A, load_device=False)
    assert again is not first and again.timings["cache"] == "disk"
    assert again.cubin == first.cubin and _is_sm90_cubin(again.cubin)
    assert nvrtc.COMPILES == compiles


def test_a_damaged_cubin_on_disk_is_compiled_again(own_cache):
    tw.compile(elementwise_add(128, 128, 32, 128), out_idx=[2], target=SM90A, load_device=False)
    (path,) = own_cache.glob("*.json")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "cubin": base64.b64encode(b"not an ELF").decode()}))
    cache.MEMORY.clear()
    kernel = tw.compile(elementwise_add(128, 128, 32, 128), out_idx=[2], target=SM90A, load_device=False)
    assert kernel.timings["cache"] == "lowered" and _is_sm90_cubin(kernel.cubin)


def test_compile_runs_nvrtc_once_and_reuses_lowers_cubin(own_cache, monkeypatch):
    compiles = nvrtc.COMPILES
    kernel = tw.compile(elementwise_add(128, 256, 32, 128), out_idx=[2], target=SM90A, load_device=False)
    assert nvrtc.COMPILES == compiles + 1

    artifact = tw.lower(elementwise_add(128, 512, 32, 128), target=SM90A, enable_device_compile=True)
    assert _is_sm90_cubin(artifact.nvrtc.cubin)

    def no_second_compile(*args, **kwargs):
        raise AssertionError("NVRTC ran again for a kernel lower() had compiled")

    monkeypatch.setattr(nvrtc, "compile_check", no_second_compile)
    record = jit_kernel._record(artifact, [2], {})
    assert base64.b64decode(record["cubin"]) == artifact.nvrtc.cubin
    assert record["nvrtc"]["registers"] == artifact.trace.resources["registers"]
    assert kernel.record["nvrtc"]["arch"] == record["nvrtc"]["arch"] == "sm_90a"


def test_nvrtc_runs_alongside_the_analyses_and_gives_the_same_cubin(monkeypatch):
    func = elementwise_add(128, 128, 32, 128)
    overlapped = tw.lower(func, target=SM90A, enable_device_compile=True)
    monkeypatch.setattr(jit_lower, "OVERLAP_DEVICE_COMPILE", False)
    serial = tw.lower(func, target=SM90A, enable_device_compile=True)
    assert overlapped.nvrtc.cubin == serial.nvrtc.cubin
    assert overlapped.trace.resources["registers"] == serial.trace.resources["registers"]


BAD_CUDA = 'extern "C" __global__ void broken_kernel(float* x) { x[0] = undeclared_value; }\n'


def test_bad_cuda_is_a_compile_error_with_nvrtcs_log():
    with pytest.raises(tw.CompileError, match="NVRTC could not compile the generated CUDA for sm_90a") as info:
        nvrtc.compile_check(BAD_CUDA, "sm_90a", name="broken.cu")
    assert "undeclared_value" in str(info.value) and "broken.cu" in str(info.value)


@pytest.mark.parametrize("overlap", [True, False])
def test_compile_raises_nvrtcs_log_and_caches_nothing(own_cache, monkeypatch, overlap):
    monkeypatch.setattr(jit_lower, "OVERLAP_DEVICE_COMPILE", overlap)
    monkeypatch.setattr(jit_lower, "generate_cuda", lambda *args, **kwargs: BAD_CUDA)
    for _ in range(2):  # nothing lands in either cache
        with pytest.raises(tw.CompileError, match="undeclared_value"):
            tw.compile(elementwise_add(64, 64, 32, 64), out_idx=[2], target=SM90A, load_device=False)
    assert not list(own_cache.glob("*.json")) and not cache.MEMORY


def _waits_without_arrivals():
    import tileworkbench.language as T

    @T.prim_func
    def main(A: T.Tensor((128, 32), "float16"), B: T.Tensor((128, 32), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((128, 32), "float16")
            bar = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], tile, barrier=bar)
            T.barrier_wait(bar, 0)  # nobody arrives: the checker rejects the kernel
            T.copy(tile, B)

    return main


def test_an_analysis_error_comes_before_nvrtcs(monkeypatch):
    monkeypatch.setattr(jit_lower, "generate_cuda", lambda *args, **kwargs: BAD_CUDA)
    with pytest.raises(tw.CompileError, match="no_arrivals|no thread arrives"):
        tw.lower(_waits_without_arrivals(), target=SM90A, enable_device_compile=True)


def test_the_cache_key_covers_nvrtcs_version_and_options(monkeypatch):
    from tileworkbench.target import Target

    def key():
        return cache.cache_key("ir", Target(arch="sm_90a"), {}, [2])

    base = key()
    assert base != cache.cache_key("ir", Target(arch="sm_100a"), {}, [2])
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: "99.9")
    assert key() != base
    monkeypatch.undo()
    monkeypatch.setattr(nvrtc, "BASE_OPTIONS", nvrtc.BASE_OPTIONS + ("-DTW_SOMETHING=1",))
    assert key() != base
    monkeypatch.undo()
    assert key() == base


def test_without_nvrtc_compile_keeps_the_sources_and_no_cubin(own_cache, monkeypatch):
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: None)

    def unavailable(*args, **kwargs):
        raise tw.CompileError("NVRTC is not available here")

    monkeypatch.setattr(nvrtc, "compile_check", unavailable)
    kernel = tw.compile(elementwise_add(64, 128, 32, 64), out_idx=[2], target=SM90A, load_device=False)
    assert kernel.cubin is None and kernel.record["nvrtc"] is None
    assert "__global__" in kernel.get_kernel_source()
