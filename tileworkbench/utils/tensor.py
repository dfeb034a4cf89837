"""``tileworkbench.utils.tensor``, as TileLang spells it: ``TensorSupplyType``,
``get_tensor_supply`` (a function that makes a kernel parameter's input) and
``torch_assert_close`` (closeness that tolerates a share of mismatched elements)."""

from __future__ import annotations

from ..jit.profiler import TensorSupplyType, random_input
from ..not_here import module_getattr

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Auto):
    """``supply(param)``: a GPU tensor for a kernel parameter (a ``Kernel.params`` record, or any
    object with ``shape`` and ``dtype``), made as ``supply_type`` says."""

    def supply(param):
        if not isinstance(param, dict):
            param = {"shape": tuple(int(d) for d in param.shape), "dtype": str(param.dtype).removeprefix("torch.")}
        return random_input(param, supply_type)

    return supply


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, verbose: bool = False,
                       equal_nan: bool = True, check_device: bool = True, check_dtype: bool = True,
                       check_layout: bool = True, check_stride: bool = False, base_name: str = "LHS",
                       ref_name: str = "RHS"):
    """Raise an ``AssertionError`` unless ``tensor_a`` and ``tensor_b`` have one shape and at most
    ``max_mismatched_ratio`` of their elements differ by more than ``atol + rtol * |b|``; the
    message counts the mismatches and shows the worst ones."""
    import torch

    if tensor_a.shape != tensor_b.shape:
        raise AssertionError(f"{base_name} has shape {tuple(tensor_a.shape)}, {ref_name} {tuple(tensor_b.shape)}")
    if check_device and tensor_a.device != tensor_b.device:
        raise AssertionError(f"{base_name} is on {tensor_a.device}, {ref_name} on {tensor_b.device}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"{base_name} is {tensor_a.dtype}, {ref_name} {tensor_b.dtype}")
    if check_layout and tensor_a.layout != tensor_b.layout:
        raise AssertionError(f"{base_name} has layout {tensor_a.layout}, {ref_name} {tensor_b.layout}")
    if check_stride and tensor_a.stride() != tensor_b.stride():
        raise AssertionError(f"{base_name} has strides {tensor_a.stride()}, {ref_name} {tensor_b.stride()}")
    a, b = tensor_a.double(), tensor_b.double()
    close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    mismatched = int((~close).sum())
    total = close.numel()
    ratio = mismatched / total if total else 0.0
    if verbose:
        print(f"{mismatched} of {total} elements ({ratio:.4%}) differ beyond atol={atol}, rtol={rtol}")
    if ratio > max_mismatched_ratio:
        diff = (a - b).abs().nan_to_num(float("inf")).flatten()
        worst = torch.topk(diff, min(5, total)).indices.tolist()
        shown = ", ".join(f"{base_name}[{i}]={a.flatten()[i].item():.5g} {ref_name}[{i}]={b.flatten()[i].item():.5g}"
                          for i in worst)
        raise AssertionError(f"{mismatched} of {total} elements ({ratio:.4%}) differ beyond atol={atol}, rtol={rtol} "
                             f"(at most {max_mismatched_ratio:.4%} allowed); the worst: {shown}")


__getattr__ = module_getattr(__name__, "utils.tensor")
