"""``T.reinterpret(value, dtype)``: a value's bits as another type of the same width (TileLang's
bit tricks: a float's sign and exponent as an integer, and back), in the CUDA it becomes, compiled
by NVRTC; what is refused."""

from __future__ import annotations

import re

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc

SM90 = "sm_90a"


def bits_roundtrip(src="float32", bits="uint32", old_order=False):
    @T.prim_func
    def main(X: T.Tensor((256,), src), Y: T.Tensor((256,), bits), Z: T.Tensor((256,), src)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            b = T.reinterpret(bits, X[tx]) if old_order else T.reinterpret(X[tx], bits)
            Y[tx] = b
            Z[tx] = T.reinterpret(b, src)

    return main


def kernel_part(src: str) -> str:
    return src.split("// ---- kernel ----")[1]


def test_a_float32_as_its_bits_and_back():
    code = kernel_part(tw.lower(bits_roundtrip(), target=SM90).device_source)
    assert re.search(r"unsigned int b = tw::bit_cast<unsigned int>\(X\[(tx\w*)\]\);", code)
    assert re.search(r"Z\[tx\w*\] = tw::bit_cast<float>\(b\);", code)


def test_the_old_argument_order_means_the_same():
    new = kernel_part(tw.lower(bits_roundtrip(), target=SM90).device_source)
    old = kernel_part(tw.lower(bits_roundtrip(old_order=True), target=SM90).device_source)
    assert new == old


def test_a_half_held_as_float_goes_through_its_own_bits():
    code = kernel_part(tw.lower(bits_roundtrip("float16", "uint16"), target=SM90).device_source)
    # the float32 value rounded back to half (exact: it was one) gives the 16 bits; 16 bits as a half
    # are held as float32 again
    assert re.search(r"tw::bit_cast<unsigned short>\(tw::from_float<tw::half>\(tw::to_float\(X\[tx\w*\]\)\)\)", code)
    assert re.search(r"tw::from_float<tw::half>\(\(float\)\(tw::to_float\(tw::bit_cast<tw::half>\(b\)\)\)\)", code)


@pytest.mark.parametrize("src, bits", [("float32", "uint32"), ("float16", "uint16"), ("bfloat16", "int16"),
                                       ("float8_e4m3", "uint8"), ("float64", "int64")])
def test_nvrtc_compiles_every_width(src, bits, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = tw.compile(bits_roundtrip(src, bits), target=SM90, load_device=False)
    assert nvrtc.cubin_sm(kernel.cubin) == 90


@pytest.mark.parametrize("target, message", [
    ("uint16", r"keeps the width: float32 is 32 bits, uint16 16"),
    ("handle", r"as handle is not supported"),
])
def test_what_is_refused(target, message):
    with pytest.raises(tw.CompileError, match=message):
        @T.prim_func
        def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=256):
                tx = T.get_thread_binding()
                Y[tx] = T.reinterpret(X[tx], target)
