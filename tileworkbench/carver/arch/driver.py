"""``tilelang.carver.arch.driver``: what the CUDA device says of itself, with TileLang's names and
answers (a persistent kernel's grid from ``get_num_sms()``). Read through CuPy's runtime, which
tileworkbench launches with; torch's properties object where one is asked for. Without a device
the queries answer None, and ``get_num_sms`` raises (a ``NoDeviceError``, a ``RuntimeError`` as
TileLang's), as TileLang's do."""

from __future__ import annotations

from ...errors import NoDeviceError

_UNITS = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}
# cudaDeviceAttr numbers (CUDA runtime API) of the attributes asked for by name below
_MAX_REGISTERS_PER_BLOCK = 12
_MAX_PERSISTING_L2_CACHE_SIZE = 108


def _properties(device_id: int) -> dict | None:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(device_id)
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no such device: nothing to say
        return None


def get_device_attribute(attr: int, device_id: int = 0) -> int | None:
    """``cudaDeviceGetAttribute(attr, device_id)``, or None without a device."""
    try:
        import cupy

        return int(cupy.cuda.runtime.deviceGetAttribute(attr, device_id))
    except Exception:  # noqa: BLE001
        return None


def get_cuda_device_properties(device_id: int = 0):
    """torch's ``get_device_properties(device_id)``, or None without torch or a device."""
    try:
        import torch

        return torch.cuda.get_device_properties(device_id) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        return None


def get_device_name(device_id: int = 0) -> str | None:
    props = _properties(device_id)
    if props is None:
        return None
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_num_sms(device_id: int = 0) -> int:
    """The device's streaming multiprocessors (RuntimeError without a device: a grid sized by it
    cannot be known)."""
    props = _properties(device_id)
    if props is None:
        raise NoDeviceError(f"get_num_sms: no CUDA device {device_id} to ask (a persistent kernel's grid is sized "
                           "by it; pass the count yourself on a machine without one)")
    return int(props["multiProcessorCount"])


def _in(value: int | None, format: str) -> int | None:
    if format not in _UNITS:
        raise RuntimeError("Invalid format. Must be one of: bytes, kb, mb")
    return None if value is None else value // _UNITS[format]


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int | None:
    """Static shared memory a block may use (48 KB on Hopper)."""
    props = _properties(device_id)
    return _in(None if props is None else int(props["sharedMemPerBlock"]), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int | None:
    """Shared memory a block may opt in to (227 KB on Hopper)."""
    props = _properties(device_id)
    return _in(None if props is None else int(props["sharedMemPerBlockOptin"]), format)


def get_registers_per_block(device_id: int = 0) -> int | None:
    return get_device_attribute(_MAX_REGISTERS_PER_BLOCK, device_id)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int | None:
    return get_device_attribute(_MAX_PERSISTING_L2_CACHE_SIZE, device_id)


__all__ = ["get_cuda_device_properties", "get_device_attribute", "get_device_name", "get_max_dynamic_shared_size_bytes",
           "get_num_sms", "get_persisting_l2_cache_max_size", "get_registers_per_block",
           "get_shared_memory_per_block"]
