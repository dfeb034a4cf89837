"""FP4 (e2m1) values: computed as float32 and held one code a byte in registers and unpacked tiles,
converted by ``tw::e2m1_from_float`` / ``tw::e2m1_to_float`` (arithmetic: sm_90a has no e2m1
conversion instruction), and read from packed tensors and tiles a nibble at a time
(``tw::fp4_code``). Before session 45 a float written into an FP4 fragment became its integer part
as a byte and an FP4 code read as its integer value: silently wrong on the GPU while the
interpreters, computing with ml_dtypes, were right. Here: the conversions compiled for the host
against ml_dtypes on every float near the grid; a kernel on the interpreter against ml_dtypes,
its CUDA and NVRTC; and the writes refused: one element of a packed tensor or tile is half a byte,
which the thread holding the other half would race on (such tiles are written whole, by TMA)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench import dtypes
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.codegen.cuda import HEADER_DIR
from tileworkbench.errors import CompileError

from tests.fp4_programs import GEMM_TO_FP4, QUANTIZE, QUANTIZE_STAGED
from tests.tilelang_compat.kernel_files import import_kernel_file, main_with

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.fixture(scope="module")
def host_conversions(tmp_path_factory):
    """tw/common.h's e2m1 conversions (the text between its markers) compiled for the host."""
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler on the PATH to build the conversions for the host")
    body = (HEADER_DIR / "common.h").read_text().split("// e2m1 begin")[1].split("// e2m1 end")[0]
    folder = tmp_path_factory.mktemp("e2m1")
    (folder / "e2m1.cpp").write_text(
        "#include <cstring>\n"
        "static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }\n"
        "static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }\n"
        + body.replace("__device__ __forceinline__", 'extern "C"'))
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", str(folder / "e2m1.cpp"), "-o", str(folder / "e2m1.so")],
                   check=True)
    lib = ctypes.CDLL(str(folder / "e2m1.so"))
    lib.e2m1_from_float.restype, lib.e2m1_from_float.argtypes = ctypes.c_ubyte, [ctypes.c_float]
    lib.e2m1_to_float.restype, lib.e2m1_to_float.argtypes = ctypes.c_float, [ctypes.c_uint]
    lib.fp4_code.restype, lib.fp4_code.argtypes = ctypes.c_uint, [ctypes.c_char_p, ctypes.c_longlong]
    lib.store_pair_e2m1.restype = None
    lib.store_pair_e2m1.argtypes = [ctypes.c_void_p, ctypes.c_float, ctypes.c_float]
    return lib


def test_the_conversions_round_as_ml_dtypes_does(host_conversions):
    grid = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 1e30, np.inf, np.nan],
                    np.float32)
    xs = np.concatenate([grid, np.nextafter(grid, np.float32(np.inf)), np.nextafter(grid, np.float32(-np.inf)),
                         (np.random.default_rng(45).standard_normal(5000) * 4).astype(np.float32)])
    xs = np.concatenate([xs, -xs]).astype(np.float32)  # ties both ways, both zeros, both NaNs
    want = xs.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    got = np.array([host_conversions.e2m1_from_float(float(x)) for x in xs], np.uint8)
    assert np.array_equal(got, want), [(float(x), int(w), int(g)) for x, w, g in zip(xs, want, got) if w != g][:5]
    codes = np.arange(16, dtype=np.uint8)
    values = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    assert [host_conversions.e2m1_to_float(int(c)) for c in codes] == list(values)


def test_a_stored_pair_reads_back_nibble_by_nibble(host_conversions):
    """The byte ``tw::store_pair_e2m1`` writes is what ``tw::fp4_code`` and the host's packing
    (the even element in the low nibble) read as the two values."""
    buf = (ctypes.c_ubyte * 2)()
    host_conversions.store_pair_e2m1(ctypes.addressof(buf) + 1, 1.5, -4.0)
    assert buf[1] == 0x3 | 0xE << 4
    raw = bytes(buf)
    assert [host_conversions.fp4_code(raw, i) for i in (2, 3)] == [0x3, 0xE]


def _kernel(tmp_path, body: str):
    """``main_with``'s kernel (its first statement on line 7), ``body``'s lines indented for it."""
    return main_with(tmp_path, "X: T.Tensor((64, 64), 'float32'), A: T.Tensor((64, 64), T.float4_e2m1fn), "
                               "Y: T.Tensor((64, 64), 'float32')", body.replace("\n", "\n        "))


COMPUTE = """y = T.alloc_fragment((64, 64), T.float4_e2m1fn)
for i, j in T.Parallel(64, 64):
    y[i, j] = X[i, j] * 0.5
for i, j in T.Parallel(64, 64):
    Y[i, j] = y[i, j] + A[i, j] * 2.0"""


def test_fp4_values_in_a_fragment_and_read_from_a_packed_tensor(tmp_path):
    kernel = _kernel(tmp_path, COMPUTE)
    rng = np.random.default_rng(45)
    x = (rng.standard_normal((64, 64)) * 4).astype(np.float32)
    x[0, :4] = (0.5, 1.5, np.inf, -10.0)  # ties (0.25, 0.75 after the halving) and saturation
    a = (rng.standard_normal((64, 64)) * 3).astype(ml_dtypes.float4_e2m1fn)
    codes = a.view(np.uint8)
    packed = (codes[:, 0::2] & 0xF) | (codes[:, 1::2] << 4)  # the even element in the low nibble
    y = np.zeros((64, 64), np.float32)
    tw.compile(kernel, target="cpu")(x, packed.astype(np.uint8), y)
    want = (x * 0.5).astype(ml_dtypes.float4_e2m1fn).astype(np.float32) + a.astype(np.float32) * 2
    np.testing.assert_array_equal(y, want)
    source = tw.lower(kernel, target="cuda").kernel_source
    body = source[source.index('extern "C"'):]
    assert "tw::e2m1_from_float(" in body and "tw::e2m1_to_float(tw::fp4_code(A, " in body
    compile_check(source, "sm_90a")


@pytest.mark.parametrize("body, message, line", [
    ("for i, j in T.Parallel(64, 64):\n    A[i, j] = X[i, j]", "A holds FP4 values two a byte, and one element is "
     "written here", 8),
    ("S = T.alloc_shared((64, 64), T.float4_e2m1fn)\nT.fill(S, 0)", "T.fill writes S, which holds FP4 values two a byte",
     8),
    ("S = T.alloc_shared((64, 64), T.float4_e2m1fn)\nT.copy(X, S)", "a copy into packed FP4 S from float32", 8),
])
def test_writing_one_element_of_packed_fp4_is_refused_at_its_line(tmp_path, body, message, line):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(_kernel(tmp_path, body), target="cuda")
    assert f"kernel_file.py:{line}" in str(info.value)


def test_packed_tiles_move_by_threads_in_whole_bytes(tmp_path):
    kernel = _kernel(tmp_path, "S = T.alloc_shared((32, 64), T.float4_e2m1fn)\n"
                               "for r in T.serial(2):\n"
                               "    T.copy(A[r * 32, 0], S, disable_tma=True)\n"
                               "    for i, j in T.Parallel(32, 64):\n"
                               "        Y[r * 32 + i, j] = S[i, j]")
    codes = np.random.default_rng(5).integers(0, 256, (64, 32), dtype=np.uint8)
    y = np.zeros((64, 64), np.float32)
    tw.compile(kernel, target="cpu")(np.zeros((64, 64), np.float32), codes, y)
    values = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(64, 64).astype(np.uint8)
    np.testing.assert_array_equal(y, values.view(ml_dtypes.float4_e2m1fn).astype(np.float32))
    source = tw.lower(kernel, target="cuda").kernel_source
    assert "tw::copy_vec<16>((S + (" in source  # 32 values, 16 bytes, a thread
    compile_check(source, "sm_90a")


def test_a_gemm_result_stored_as_fp4_in_pairs(tmp_path):
    main = import_kernel_file(tmp_path, GEMM_TO_FP4, "fp4_gemm").main
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((256, 64)) * 0.3).astype(np.float16)
    b = (rng.standard_normal((64, 256)) * 0.3).astype(np.float16)
    c = np.zeros((256, 128), np.uint8)
    tw.compile(main, target="cpu")(a, b, c)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    np.testing.assert_array_equal(c, (want[:, 0::2] & 0xF) | (want[:, 1::2] << 4))
    source = tw.lower(main, target="cuda").kernel_source
    assert "tw::store_pair_e2m1((C + (" in source
    compile_check(source, "sm_90a")


@pytest.mark.parametrize("program", [QUANTIZE, QUANTIZE_STAGED], ids=["plain", "staged"])
def test_an_fp4_fragment_takes_runs_of_two_and_is_stored_in_pairs(tmp_path, program):
    """A 32 x 32 fragment over 128 threads is otherwise one element a thread; copied into a packed
    tile, it and the fragments it is computed with take runs of two (infer_fragment_layouts), so
    each thread stores its pairs a byte each (act_quant's shape, with and without its staged input)."""
    main = import_kernel_file(tmp_path, program, "fp4_quantize").main
    x = (np.random.default_rng(7).standard_normal((64, 32)) * 4).astype(ml_dtypes.bfloat16)
    q = np.zeros((64, 16), np.uint8)
    tw.compile(main, target="cpu")(x, q)
    want = np.clip(x.astype(np.float32), -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    np.testing.assert_array_equal(q, (want[:, 0::2] & 0xF) | (want[:, 1::2] << 4))
    source = tw.lower(main, target="cuda").kernel_source
    assert "tw::store_pair_e2m1((y_shared + (" in source
    compile_check(source, "sm_90a")


@pytest.mark.parametrize("body, message, line", [
    # a 32 x 32 fragment over 128 threads: element after element in different threads
    ("y = T.alloc_fragment((32, 32), T.float4_e2m1fn)\nS = T.alloc_shared((32, 32), T.float4_e2m1fn)\n"
     "for i, j in T.Parallel(32, 32):\n    y[i, j] = X[i, j]\nT.copy(y, S)",
     "fragment y's layout gives neighbouring elements to different threads", 11),
    ("S = T.alloc_shared((64, 32), T.float4_e2m1fn)\nT.copy(A[0:64, 1:33], S, disable_tma=True)",
     "must start and span an even number of values", 8),
])
def test_a_thread_copy_into_packed_fp4_without_whole_bytes_is_refused(tmp_path, body, message, line):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(_kernel(tmp_path, body), target="cuda")
    assert f"kernel_file.py:{line}" in str(info.value)


SM100 = {"kind": "cuda", "arch": "sm_100"}  # 4-bit tensor maps (16U4) are sm_100's (../shared/DESIGN.md)
UNPACK = "S = T.alloc_shared((64, 64), T.float4_e2m1_unpacked)\nT.copy(A, S, prefer_instruction='tma')"


def test_a_contiguous_load_into_an_unpacked_tile_takes_a_tensor_map(tmp_path):
    artifact = tw.lower(_kernel(tmp_path, UNPACK), target=SM100)
    assert "tw::tma_load(A_desc" in artifact.kernel_source  # a bulk copy would not unpack
    assert [d.data_type for d in artifact.func.attrs["tma_descriptors"]] == [dtypes.float4_e2m1_unpacked.tma_code]
    compile_check(artifact.kernel_source, "sm_100a")


def test_unpacked_codes_read_back_as_values(tmp_path):
    source = tw.lower(_kernel(tmp_path, UNPACK + "\nfor i, j in T.Parallel(64, 64):\n    Y[i, j] = S[i, j]"),
                      target=SM100).kernel_source
    assert "tw::e2m1_to_float(" in source[source.index('extern "C"'):]
    compile_check(source, "sm_100a")


def test_a_4_bit_tensor_map_is_refused_for_sm_90a(tmp_path):
    """sm_90's TMA has no 4-bit element types: an explicit TMA copy of FP4 is refused there; the
    copies the compiler chooses itself move packed tiles by threads instead."""
    with pytest.raises(CompileError, match="which only sm_100 and later run, not sm_90a") as info:
        tw.lower(_kernel(tmp_path, UNPACK), target="cuda")
    assert "kernel_file.py:8" in str(info.value)
    chosen = tw.lower(_kernel(tmp_path, "S = T.alloc_shared((32, 64), T.float4_e2m1fn)\nT.copy(A[0, 0], S)\n"
                                        "T.copy(S, A[32, 0])"), target="cuda")
    assert chosen.func.attrs.get("tma_descriptors", []) == [] and "tw::copy_vec<16>" in chosen.kernel_source
