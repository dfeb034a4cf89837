"""Data types of the DSL: names, sizes, C++ spellings, numpy/torch equivalents, TMA codes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import CompileError


@dataclass(frozen=True)
class DType(str):
    """A data type, and its name as a string (TileLang's dtypes are ``str`` too: its examples make
    torch inputs with ``getattr(torch, dtype)``)."""

    name: str
    bits: int
    kind: str  # "float", "int", "uint", "bool", "handle"
    cpp: str  # storage type in generated CUDA
    tma_code: int | None = None  # CUtensorMapDataType
    packed: bool = False  # sub-byte values packed several to a byte
    shared_only: bool = False

    def __new__(cls, name, *fields, **named):  # the string's value is the name; the dataclass sets the rest
        return super().__new__(cls, name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"T.{self.name}"

    # A dtype is its name too, as TileLang's are: T.float16 == "float16", and a dict keyed by dtypes
    # answers for the name ({T.float32: 4, T.float16: 2}["float16"], as TileLang's Hadamard sizes its
    # elements).
    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            return self.name == other
        if not isinstance(other, DType):
            return NotImplemented
        return (self.name, self.bits, self.kind, self.cpp, self.tma_code, self.packed, self.shared_only) == (
            other.name, other.bits, other.kind, other.cpp, other.tma_code, other.packed, other.shared_only)

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "bool")

    @property
    def storage_bits(self) -> int:
        """Bits one element occupies in memory (FP4 unpacked takes a whole byte)."""
        return 8 if self.name == "float4_e2m1_unpacked" else self.bits

    def bytes_for(self, count: int) -> int:
        """Bytes that ``count`` elements occupy in memory."""
        return (count * self.storage_bits + 7) // 8

    def payload_bytes(self, count: int) -> int:
        """Bytes of information in ``count`` elements (what TMA transfers)."""
        return (count * self.bits + 7) // 8

    def __call__(self, value) -> "TypedValue":
        """``T.float32(0)``: ``value`` as a value of this type, a constant (or, of a kernel
        expression, a cast) once the IR takes it (``ir.as_expr``)."""
        if isinstance(value, (int, float, bool)):
            problem = constant_problem(value, self)
            if problem:
                raise CompileError(f"T.{self.name}({value!r}): {problem}")
        return TypedValue(value, self)

    def as_torch(self):
        """The torch dtype of this type (TileLang's ``T.float16.as_torch()``: examples make their
        inputs with it). Needs torch; a type torch has no dtype for (packed FP4) is a TypeError."""
        import torch

        found = None if self.packed else getattr(torch, torch_dtype_name(self), None)
        if found is None:
            raise TypeError(f"T.{self.name} has no torch dtype")
        return found

    @property
    def is_low_precision_float(self) -> bool:
        """Stored in a custom struct and computed in float32 by generated code."""
        return self.name in ("float16", "bfloat16")

    @property
    def is_fp4(self) -> bool:
        """An e2m1 float: packed two a byte, or unpacked one a byte (a shared tile TMA unpacks into)."""
        return self.name in ("float4_e2m1fn", "float4_e2m1_unpacked")

    @property
    def computed_in_float32(self) -> bool:
        """A 16-bit, FP8 or FP4 float: stored in its own bits (an FP4 code a byte in registers and
        unpacked tiles, two a byte in packed ones), held and computed as float32 by generated code,
        so that a value of it is rounded to it only where it is stored or cast."""
        return self.is_low_precision_float or self.is_fp4 or self.name in ("float8_e4m3", "float8_e5m2")


@dataclass(frozen=True)
class TypedValue:
    """What calling a dtype gives (``T.int32(0)``): a number or kernel expression to be taken as
    that type. The IR layer, above this one, makes it a node (``ir.nodes.as_expr``)."""

    value: object
    dtype: DType


def _d(name, bits, kind, cpp, tma=None, **kw) -> DType:
    return DType(name, bits, kind, cpp, tma, **kw)


float16 = _d("float16", 16, "float", "tw::half", 6)
bfloat16 = _d("bfloat16", 16, "float", "tw::bfloat16", 9)
float32 = _d("float32", 32, "float", "float", 7)
float64 = _d("float64", 64, "float", "double", 8)
int8 = _d("int8", 8, "int", "signed char", 0)
int16 = _d("int16", 16, "int", "short", 2)
int32 = _d("int32", 32, "int", "int", 3)
int64 = _d("int64", 64, "int", "long long", 5)
uint8 = _d("uint8", 8, "uint", "unsigned char", 0)
uint16 = _d("uint16", 16, "uint", "unsigned short", 1)
uint32 = _d("uint32", 32, "uint", "unsigned int", 2)
uint64 = _d("uint64", 64, "uint", "unsigned long long", 4)
boolean = _d("bool", 8, "bool", "bool")
float8_e4m3 = _d("float8_e4m3", 8, "float", "unsigned char", 0)
float8_e5m2 = _d("float8_e5m2", 8, "float", "unsigned char", 0)
float4_e2m1fn = _d("float4_e2m1fn", 4, "float", "unsigned char", 13, packed=True)
float4_e2m1_unpacked = _d("float4_e2m1_unpacked", 4, "float", "unsigned char", 14, shared_only=True)
# int4: signed 4-bit integers, two a byte (the even element in the low nibble), as TileLang's int4
# tensors are int8 arrays of packed pairs. Kernels move and multiply them only (T.copy, T.gemm);
# passes/store_int4_as_bytes.py rewrites every int4 buffer as its bytes, int4x2 (one byte, two
# values, the last dimension halved), which TMA (as UINT8), threads and swizzles move like int8.
int4 = _d("int4", 4, "int", "signed char", packed=True)
int4x2 = _d("int4x2", 8, "int", "signed char", 0)
handle = _d("handle", 64, "handle", "void*")

ALL = {
    d.name: d
    for d in (
        float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
        uint64, boolean, float8_e4m3, float8_e5m2, float4_e2m1fn, float4_e2m1_unpacked, int4, int4x2, handle,
    )
}
ALIASES = {"half": float16, "float": float32, "double": float64, "int": int32, "bf16": bfloat16,
           "fp16": float16, "fp32": float32, "ptr": handle, "float8_e4m3fn": float8_e4m3,
           "e4m3_float8": float8_e4m3, "e5m2_float8": float8_e5m2,
           "tfloat32": float32}  # TileLang's TF32: float32 here (language/types.py says why)

TMA_TYPE_NAMES = {
    0: "UINT8", 1: "UINT16", 2: "UINT32", 3: "INT32", 4: "UINT64", 5: "INT64", 6: "FLOAT16",
    7: "FLOAT32", 8: "FLOAT64", 9: "BFLOAT16", 13: "16U4_ALIGN8B", 14: "16U4_ALIGN16B",
}

_NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int8": np.int8, "int4x2": np.int8,
          "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool": np.bool_}


_PYTHON_TYPES = {bool: "bool", int: "int32", float: "float32"}  # TileLang's reading of Python's types


def as_dtype(value) -> DType:
    """Accept a DType, its name or an alias, a torch or numpy dtype, or Python's ``bool``, ``int``
    (int32) or ``float`` (float32); raise CompileError (a ValueError) otherwise."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        if value in ALL:
            return ALL[value]
        if value in ALIASES:
            return ALIASES[value]
    elif type(value).__module__ == "torch" and str(value).startswith("torch."):  # torch.float16, as TileLang takes
        return as_dtype(str(value).removeprefix("torch."))
    elif isinstance(value, type) and value in _PYTHON_TYPES:
        return ALL[_PYTHON_TYPES[value]]
    elif isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return as_dtype(np.dtype(value).name)
    shown = repr(value) if isinstance(value, (str, int, float)) or value is None else type(value).__name__
    raise CompileError(f"unknown data type {shown}; expected one of {', '.join(sorted(ALL))}")


# Largest finite magnitude of each floating-point type.
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
              "float64": 1.7976931348623157e308, "float8_e4m3": 448.0, "float8_e5m2": 57344.0,
              "float4_e2m1fn": 6.0, "float4_e2m1_unpacked": 6.0}


def value_range(dtype: DType) -> tuple | None:
    """(lowest, highest) finite value of ``dtype``, None for pointers."""
    if dtype.kind == "int":
        return -(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1
    if dtype.kind == "uint":
        return 0, 2**dtype.bits - 1
    if dtype.kind == "bool":
        return 0, 1
    if dtype.is_float:
        top = _FLOAT_MAX[dtype.name]
        return -top, top
    return None


def constant_problem(value, dtype: DType) -> str | None:
    """Why the Python number ``value`` cannot be a constant of ``dtype`` (None: it can). Integers
    must fit exactly; a float stored as an integer must be whole; a finite float must not
    overflow to infinity (infinity itself, NaN, and rounding are fine)."""
    bounds = value_range(dtype)
    if bounds is None or isinstance(value, bool):
        return None
    if dtype.kind in ("int", "uint", "bool"):
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                return f"{value!r} is not a whole number, and {dtype.name} holds only integers"
            value = int(value)
        if not bounds[0] <= value <= bounds[1]:
            return f"{value} does not fit {dtype.name} ({bounds[0]} .. {bounds[1]})"
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if abs(value) > bounds[1]:
        return f"{value!r} is beyond the largest finite {dtype.name} ({bounds[1]:g})"
    return None


def numpy_dtype(dtype: DType):
    """The numpy dtype used on the host for arrays of ``dtype`` (bf16/fp4/fp8 as raw bytes)."""
    if dtype.name in _NUMPY:
        return np.dtype(_NUMPY[dtype.name])
    if dtype.name == "bfloat16":
        return np.dtype(np.uint16)
    return np.dtype(np.uint8)


def storage_note(dtype: DType) -> str:
    """What a caller's array of a packed type holds, for messages about its shape or dtype ("" for
    the others)."""
    if dtype.name == "int4x2":
        return (" (int4 values two a byte: an int8 array with the last dimension halved, the even value in the "
                "low nibble)")
    return " (FP4: two values a byte)" if dtype.packed else ""


def torch_dtype_name(dtype: DType) -> str:
    return {"bool": "bool", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
            "float4_e2m1fn": "int8", "int4": "int8", "int4x2": "int8"}.get(dtype.name, dtype.name)
