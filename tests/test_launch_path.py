"""The launch path without a GPU (issue 18): the parameter buffer, the generated launcher's
once-only constants, tensor maps encoded once per address, the fast checks of torch-like
tensors (and their fall-back to the full checks), streams. Timings are in
scripts/experiments/launch_paths.py and ``python -m tileworkbench.bench launch``."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import launch as launch_mod
from tileworkbench.backend import runtime as runtime_mod
from tileworkbench.examples import matmul

from tests.robustness.harness import DryRuntime, FakeGpuArray

SM90 = "sm_90a"


def _word(address: int, k: int = 0) -> int:
    return ctypes.c_uint64.from_address(address + 8 * k).value


def test_the_parameter_buffer_packs_pointers_maps_and_scalars_into_aligned_slots():
    buf = launch_mod.ParamBuffer(4)
    tensor_map = np.arange(16, dtype=np.uint64).view("V128")[0]
    buf.pack((0x7F0000001000, tensor_map, np.int32(-7), 0x7F0000002000))
    slots = [ctypes.c_void_p.from_address(buf.address + 8 * i).value for i in range(4)]
    assert all(s % 128 == 0 for s in slots) and slots == [slots[0] + 128 * i for i in range(4)]
    assert _word(slots[0]) == 0x7F0000001000 and _word(slots[3]) == 0x7F0000002000
    assert [_word(slots[1], k) for k in range(16)] == list(range(16))
    assert ctypes.c_int32.from_address(slots[2]).value == -7
    # Another call: pointers rewritten, the same map object not copied again, a new one copied.
    buf.pack((0x7F0000003000, tensor_map, np.int32(5), 0x7F0000004000))
    assert _word(slots[0]) == 0x7F0000003000 and ctypes.c_int32.from_address(slots[2]).value == 5
    other = np.full(16, 9, dtype=np.uint64).view("V128")[0]
    buf.pack((0x7F0000003000, other, np.int32(5), 0x7F0000004000))
    assert [_word(slots[1], k) for k in range(16)] == [9] * 16


def test_the_parameter_buffer_refuses_a_call_with_another_parameter_count():
    buf = launch_mod.ParamBuffer(3)
    with pytest.raises(tw.KernelRuntimeError, match="the launcher passed 2 parameters; the kernel takes 3"):
        buf.pack((1, 2))


def _spec_gemm():
    return tw.compile(matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), out_idx=[2],
                      target=SM90, load_device=False)


def test_the_launcher_writes_what_never_changes_once():
    host = _spec_gemm().get_host_source()
    launch_body = host.split("def launch(")[1]
    assert "A_desc_FIELDS = dict(\n    data_type=6," in host  # above launch: built once
    assert "rt.encode_tiled('A_desc', A, A_desc_FIELDS)" in launch_body and "dict(" not in launch_body
    assert "def launch(rt, A, B, C, stream=0):" in host and launch_body.rstrip().endswith(
        "(A, B, C, A_desc, B_desc, C_desc), stream)")


def test_what_depends_on_a_scalar_is_built_per_call():
    @T.prim_func
    def scaled(A: T.Tensor((1024, 64), "float16"), B: T.Tensor((1024, 64), "float16"), n: T.int32):
        with T.Kernel(n, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            T.copy(A[bx * 64, 0], s)
            T.copy(s, B[bx * 64, 0])

    kernel = tw.compile(scaled, target=SM90, load_device=False)
    assert "GRID =" not in kernel.get_host_source() and "    grid = (n, 1, 1)" in kernel.get_host_source()
    runtime = DryRuntime(kernel.record["smem_bytes"])
    kernel.bind_runtime(runtime)
    a, b = FakeGpuArray((1024, 64)), FakeGpuArray((1024, 64), ptr=1 << 24)
    kernel(a, b, 4)
    kernel(a, b, 16)
    assert [grid for _, grid, _ in runtime.launches] == [(4, 1, 1), (16, 1, 1)]


class _CountingRuntime(DryRuntime):
    def __init__(self, smem_bytes):
        super().__init__(smem_bytes)
        self.encoded = []

    def _encode_tensor_map(self, name, *fields):
        self.encoded.append((name, fields[2]))  # (name, global address)
        return np.zeros(1, dtype="V128")[0]


def test_a_tensor_map_is_encoded_once_per_address():
    kernel = _spec_gemm()
    runtime = _CountingRuntime(kernel.record["smem_bytes"])
    kernel.bind_runtime(runtime)
    a, b = FakeGpuArray((1024, 1024), ptr=1 << 30), FakeGpuArray((1024, 1024), ptr=2 << 30)
    c, d = FakeGpuArray((1024, 1024), ptr=3 << 30), FakeGpuArray((1024, 1024), ptr=4 << 30)
    kernel(a, b, c)
    kernel(a, b, c)
    assert len(runtime.encoded) == 3  # A, B, C once
    kernel(a, b, d)  # a new output: only its map is encoded again
    assert runtime.encoded[3:] == [("C_desc", 4 << 30)]
    first, again = runtime.packed[0][0], runtime.packed[1][0]
    assert first[:3] == (1 << 30, 2 << 30, 3 << 30) and all(x is y for x, y in zip(first[3:], again[3:]))


class _Float16:
    def __str__(self):
        return "torch.float16"


F16 = _Float16()


class _FakeTorchTensor:
    """What the checks read of a torch tensor; its class claims torch's module."""

    def __init__(self, shape, strides, dtype=F16, device=0, ptr=1 << 32):
        self.shape, self._strides, self.dtype, self._device, self._ptr = tuple(shape), tuple(strides), dtype, device, ptr
        self.is_cuda = device >= 0

    def stride(self):
        return self._strides

    def get_device(self):
        return self._device

    def data_ptr(self):
        return self._ptr

    @property
    def device(self):
        return type("device", (), {"index": self._device})()


_FakeTorchTensor.__module__ = "torch"


@pytest.fixture
def fake_torch(monkeypatch):
    monkeypatch.setitem(runtime_mod._TORCH_DTYPES, "float16", F16)
    monkeypatch.setattr(runtime_mod, "_GET_DEVICE", lambda: 0)
    monkeypatch.setattr(launch_mod, "_TORCH_STREAM", lambda device: 0xABC0 + device)
    return _FakeTorchTensor


def _runtime_on_device_0():
    rt = runtime_mod.Runtime(module=None, smem_bytes=0)
    rt.begin_call()  # the current device, as a call reads it (0 here)
    return rt


def test_a_tensor_exactly_as_expected_passes_the_fast_check(fake_torch):
    rt = _runtime_on_device_0()
    rt.checked_tensor = lambda *args: pytest.fail("the full check ran for a tensor the fast one accepts")
    t = fake_torch((128, 64), (64, 1), ptr=0x1000)
    assert rt.tensor("A", t, shape=(128, 64), dtype="float16", strides=(64, 1), align=16) == 0x1000


@pytest.mark.parametrize("tensor,message", [
    (dict(shape=(64, 128), strides=(128, 1)), "argument 'A' has shape \\(64, 128\\), the kernel expects \\(128, 64\\)"),
    (dict(shape=(128, 64), strides=(1, 128)), "argument 'A' has strides \\(1, 128\\), the kernel expects \\(64, 1\\)"),
    (dict(shape=(128, 64), strides=(64, 1), ptr=0x1002), "argument 'A' must be 16-byte aligned"),
    (dict(shape=(128, 64), strides=(64, 1), device=-1), "argument 'A' is a CPU tensor"),
    (dict(shape=(128, 64), strides=(64, 1), device=1), "argument 'A' is on cuda:1, but the current device is cuda:0"),
])
def test_anything_else_takes_the_full_check_and_its_message(fake_torch, tensor, message):
    rt = _runtime_on_device_0()
    with pytest.raises(tw.KernelRuntimeError, match=message):
        rt.tensor("A", fake_torch(**tensor), shape=(128, 64), dtype="float16", strides=(64, 1), align=16)


def test_strides_that_differ_only_in_a_unit_dimension_are_still_accepted(fake_torch):
    rt = _runtime_on_device_0()
    t = fake_torch((1, 64), (7, 1), ptr=0x2000)  # the fast check declines, the full one accepts
    assert rt.tensor("A", t, shape=(1, 64), dtype="float16", strides=(64, 1), align=16) == 0x2000


def test_the_stream_is_the_callers(fake_torch):
    t = fake_torch((4,), (1,), device=0)
    assert launch_mod.stream_handle(None, (t,)) == 0xABC0  # torch's current stream on the tensor's device
    assert launch_mod.stream_handle(None, (FakeGpuArray((4,)),)) == 0  # CuPy's, or the legacy default
    assert launch_mod.stream_handle(0x5000, (t,)) == 0x5000
    assert launch_mod.stream_handle(type("S", (), {"cuda_stream": 0x6000})(), (t,)) == 0x6000  # torch.cuda.Stream
    assert launch_mod.stream_handle(type("S", (), {"ptr": 0x7000})(), (t,)) == 0x7000  # cupy.cuda.Stream
    with pytest.raises(tw.KernelRuntimeError, match="stream= must be a CUDA stream .* not str"):
        launch_mod.stream_handle("fast", (t,))


def test_a_call_hands_its_stream_to_the_launch():
    kernel = _spec_gemm()
    runtime = DryRuntime(kernel.record["smem_bytes"])
    kernel.bind_runtime(runtime)
    a, b, c = (FakeGpuArray((1024, 1024), ptr=(i + 1) << 30) for i in range(3))
    kernel(a, b, c, stream=0x9000)
    assert runtime.packed[-1][1] == 0x9000


def test_a_kernel_says_how_its_calls_are_launched(monkeypatch):
    from types import SimpleNamespace

    from tileworkbench.examples.tilelang_programs import dynamic_shape
    from tileworkbench.jit import sized_launch

    from tileworkbench.jit.kernel import Kernel

    def own(kernel):  # a Kernel of its own: a compile's in-process hit is one other tests bound
        return Kernel(kernel.record, kernel.out_idx, load_device=False)

    kernel = own(_spec_gemm())
    assert kernel.launch_path == "not loaded on a GPU: calls will load it first"
    kernel.bind_runtime(DryRuntime(kernel.record["smem_bytes"]))
    assert kernel.launch_path.startswith("Python launcher (")
    kernel.take_c_path(SimpleNamespace(tensor_reader="dlpack", fallback=None))
    assert kernel.launch_path == ("C launch path: torch tensors read through DLPack's C exchange API, anything else "
                                  "through the Python launcher")
    debug = own(tw.compile(matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), out_idx=[2],
                           target=SM90, load_device=False, pass_configs={"tw.debug_barrier_timeout": 1.0}))
    debug.bind_runtime(DryRuntime(debug.record["smem_bytes"]))
    assert "no fixed plan for the C path: a debug record" in debug.launch_path
    dynamic = own(dynamic_shape.CASES["gemm_dynamic"]["compile"]().general)
    dynamic.bind_runtime(DryRuntime(dynamic.record["smem_bytes"]))
    monkeypatch.setenv(sized_launch.ENV, "0")
    assert "C launchers per set of sizes are off (TILEWORKBENCH_FASTCALL_SIZED=0 turned them off)" in dynamic.launch_path
    monkeypatch.setenv(sized_launch.ENV, "1")
    assert "C launchers per set of sizes are on" in dynamic.launch_path
    dynamic._sized[(64, 32, 16)] = dynamic._fast = SimpleNamespace(tensor_reader="attributes")
    assert dynamic.launch_path.startswith("C launch path, for the sizes (64, 32, 16): torch tensors read by their "
                                          "attributes")


class _Int8:
    def __str__(self):
        return "torch.int8"


def test_an_int4_tensor_of_the_wrong_shape_is_told_how_int4_is_stored(fake_torch, monkeypatch):
    monkeypatch.setitem(runtime_mod._TORCH_DTYPES, "int4x2", _Int8())  # what the fast check compares (not this one)
    rt = _runtime_on_device_0()
    packed = fake_torch((128, 64), (64, 1), dtype=_Int8(), ptr=0x4000)  # not the fast check's dtype object: the full check
    assert rt.tensor("A", packed, shape=(128, 64), dtype="int4x2", strides=(64, 1), align=16) == 0x4000
    unpacked = fake_torch((128, 128), (128, 1), dtype=_Int8())  # one int4 value a byte: not packed
    with pytest.raises(tw.KernelRuntimeError, match=r"has shape \(128, 128\), the kernel expects \(128, 64\) \(int4 "
                                                    r"values two a byte: an int8 array with the last dimension halved"):
        rt.tensor("A", unpacked, shape=(128, 64), dtype="int4x2", strides=(64, 1), align=16)
