"""The DSL's data types (``T.float16`` ...) and the tensor annotations ``T.Tensor`` and
``T.StridedTensor``."""

from __future__ import annotations

import functools

from .. import dtypes as _dt
from ..dtypes import DType
from ..errors import CompileError
from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.specs import BufferSpec, TensorSpec
from ..ir import nodes as ir

float16 = _dt.float16
bfloat16 = _dt.bfloat16
float32 = _dt.float32
float64 = _dt.float64
int8 = _dt.int8
int16 = _dt.int16
int32 = _dt.int32
int64 = _dt.int64
uint8 = _dt.uint8
uint16 = _dt.uint16
uint32 = _dt.uint32
uint64 = _dt.uint64
bool = _dt.boolean  # noqa: A001 - TileLang spells it T.bool
float8_e4m3 = _dt.float8_e4m3
float8_e5m2 = _dt.float8_e5m2
float8_e4m3fn = float8_e4m3  # TileLang's (and torch's) name: finite, no infinities
# TileLang's TF32 is float32 here: a gemm multiplies float32 tiles in TF32 (tw::gemm_ss_tf32 rounds
# each operand), as TileLang's does its tfloat32 tiles; elsewhere the values keep float32's
# precision, where TileLang rounds them to TF32 at every store (docs/tilelang.md, "What differs")
tfloat32 = float32
float4_e2m1fn = _dt.float4_e2m1fn
float4_e2m1_unpacked = _dt.float4_e2m1_unpacked
int4 = _dt.int4  # two a byte; moved and multiplied only (passes/store_int4_as_bytes.py)
ptr = _dt.handle
handle = _dt.handle
half = float16
float = float32  # noqa: A001




def _shape(shape) -> tuple:
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    return (shape,)


# A tensor may be far larger than 2^31 elements (kernels index it with 64-bit offsets where
# needed), but not larger than any machine: 2^48 bytes (256 TiB) is past every GPU's memory.
MAX_TENSOR_BYTES = 2**48


def _dim(d, what: str):
    """A dimension: an integer, or a size of a ``@jit`` function's ``T.const`` that the tensor's
    annotation may be the first to fix (the front end does, from the tensor)."""
    if isinstance(d, _b.ConstSymbol) and d.value is None:
        return d
    return _b.integer(d, what)


def _tensor_dims(shape, what: str, dtype: DType) -> tuple:
    dims = tuple(_dim(d, f"{what}: dimension {i}") for i, d in enumerate(_shape(shape)))
    if not dims:
        raise error(f"{what}: a tensor needs at least one dimension")
    total = 1
    for i, d in enumerate(dims):
        n = ir.const_int(d)
        if n is not None and n < 1:
            raise error(f"{what}: dimension {i} must be positive, got {n}")
        total *= n if n is not None else 1
    if dtype.bytes_for(total) > MAX_TENSOR_BYTES:
        raise error(f"{what}: a tensor of shape {tuple(ir.const_int(d) for d in dims)} is {dtype.bytes_for(total)} bytes, "
                    f"more than any GPU holds")
    return dims


def _dtype(value, what: str) -> DType:
    try:
        return _dt.as_dtype(value)
    except CompileError as err:
        raise error(f"{what}: {err.message}") from None


def dtype(value) -> DType:
    """``T.dtype("float16")``: a dtype from its name (also what a parameter annotated
    ``dtype: T.dtype = T.float16`` holds)."""
    return _dtype(value, "T.dtype")


class _Subscriptable:
    """An annotation maker called, ``T.Tensor((M, N), dtype)``, or subscripted as TileLang also
    spells it, ``T.Tensor[(M, N), dtype]``: the same thing."""

    takes_kernel_sizes = True  # its subscript may hold kernel sizes (T.dynamic ones): the front end lets it

    def __init__(self, make):
        self.make = make
        functools.update_wrapper(self, make)

    def __call__(self, *args, **kwargs):
        return self.make(*args, **kwargs)

    def __getitem__(self, key):
        return self.make(*(key if isinstance(key, tuple) else (key,)))

    def __repr__(self) -> str:
        return f"T.{self.make.__name__}"


@_Subscriptable
def Tensor(shape, dtype=float32, data=None) -> TensorSpec:  # noqa: N802
    dt = _dtype(dtype, "T.Tensor")
    if data is not None:  # inside a kernel: another shape over a tensor's memory
        from .kernel import view_tensor
        return view_tensor(data, shape, dt)
    return TensorSpec(_tensor_dims(shape, "T.Tensor", dt), dt)


Buffer = Tensor


def _buffer_annotation(scope: str):
    def annotation(shape, dtype=float32) -> BufferSpec:
        name = f"T.{scope.capitalize()}Buffer"
        dt = _dtype(dtype, name)
        return BufferSpec(scope, _tensor_dims(shape, name, dt), dt)

    annotation.__name__ = f"{scope.capitalize()}Buffer"
    annotation.__doc__ = (f"``T.{scope.capitalize()}Buffer(shape, dtype)``: a ``@T.macro`` parameter that takes a "
                          f"{scope} buffer of that shape and type (checked at each call).")
    return annotation


SharedBuffer = _buffer_annotation("shared")
FragmentBuffer = _buffer_annotation("fragment")
LocalBuffer = _buffer_annotation("local")


def StridedTensor(shape, strides, dtype=float32) -> TensorSpec:  # noqa: N802
    dt = _dtype(dtype, "T.StridedTensor")
    shape, strides = _shape(shape), _shape(strides)
    if len(shape) != len(strides):
        raise error(f"T.StridedTensor: shape {shape} and strides {strides} differ in rank")
    strides = tuple(_b.integer(s, f"T.StridedTensor: stride {i}") for i, s in enumerate(strides))
    for i, st in enumerate(strides):
        n = ir.const_int(st)
        if n is not None and n < 1:
            raise error(f"T.StridedTensor: stride {i} must be positive, got {n}")
    return TensorSpec(_tensor_dims(shape, "T.StridedTensor", dt), dt, strides)
