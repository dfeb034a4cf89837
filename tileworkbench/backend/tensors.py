"""Kernel arguments: torch tensors, CuPy arrays, and anything with ``__cuda_array_interface__``
or DLPack, seen through one small record (pointer, shape, strides in elements, dtype name)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelRuntimeError

_TYPESTR = {"<f2": "float16", "<f4": "float32", "<f8": "float64", "|i1": "int8", "<i2": "int16",
            "<i4": "int32", "<i8": "int64", "|u1": "uint8", "<u2": "uint16", "<u4": "uint32",
            "<u8": "uint64", "|b1": "bool"}
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
             "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
             "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass
class TensorView:
    ptr: int
    shape: tuple
    strides: tuple  # elements
    dtype: str  # the framework's dtype name (torch/numpy spelling)
    device: int | None
    obj: object

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE.get(self.dtype, 1)


def view_of(name: str, value) -> TensorView:
    mod = type(value).__module__
    if mod == "numpy" or mod.startswith("numpy."):
        raise KernelRuntimeError(f"argument {name!r} is a numpy array, in host memory; kernels take GPU arrays: pass "
                                 f"cupy.asarray({name}) or torch.from_numpy({name}).cuda()")
    if value is None or isinstance(value, (bool, int, float, str, list, tuple)):
        raise KernelRuntimeError(f"argument {name!r} is {_plain(value)}, not a GPU array (expected a torch tensor, a "
                                 "CuPy array or a __cuda_array_interface__ object)")
    if mod.startswith("torch"):
        if not value.is_cuda:
            raise KernelRuntimeError(f"argument {name!r} is a CPU tensor; move it to the GPU (.cuda())")
        return TensorView(value.data_ptr(), tuple(value.shape), tuple(value.stride()),
                          str(value.dtype).removeprefix("torch."), value.device.index, value)
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is None and hasattr(value, "__dlpack__"):
        device = value.__dlpack_device__()[0] if hasattr(value, "__dlpack_device__") else None
        if device not in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
            raise KernelRuntimeError(f"argument {name!r} ({type(value).__name__}) is not in GPU memory (DLPack "
                                     f"device type {device}); move it to the GPU first")
        import cupy

        value = cupy.from_dlpack(value)
        iface = value.__cuda_array_interface__
    if iface is None:
        raise KernelRuntimeError(f"argument {name!r} ({type(value).__name__}) is not a GPU array "
                                 "(expected a torch tensor, a CuPy array or a __cuda_array_interface__ object)")
    dtype = _TYPESTR.get(iface["typestr"], iface["typestr"])
    itemsize = _ITEMSIZE.get(dtype, 1)
    shape = tuple(iface["shape"])
    if iface.get("strides") is None:
        strides = row_major_strides(shape)
    else:
        strides = tuple(s // itemsize for s in iface["strides"])
    return TensorView(iface["data"][0], shape, strides, dtype, None, value)


def _plain(value) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__}"
    return "None" if value is None else f"the {type(value).__name__} {value!r}"[:60]


def row_major_strides(shape) -> tuple:
    """The strides, in elements, of a dense row-major array of ``shape``."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))
