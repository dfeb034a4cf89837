"""``Kernel.get_profiler()``: correctness against a reference on random inputs, and timing."""

from __future__ import annotations

import enum
import inspect

import numpy as np

from ..errors import KernelRuntimeError


def _torch():
    try:
        import torch

        return torch
    except ImportError:
        return None


class TensorSupplyType(enum.Enum):
    """How a profiler makes a kernel's inputs (TileLang's names). ``Auto`` (the default here):
    normal floats and small random integers, never zeros, which hide unwritten outputs and wrong
    indexing; ``Zero`` and ``One`` exist for programs that ask for them. ``Normal`` floats are
    TileLang's: mean -1, standard deviation 1 (its examples' checks are tuned to that draw: the mamba
    chunk scan's decays ``exp(a - b)`` of mean-0 draws put 1.26% of its outputs past the example's
    tolerance, TileLang's kernel and ours alike); ``Uniform`` lies in [-1, 1)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


NORMAL_MEAN = -1.0  # TileLang's TensorSupplyType.Normal draws normal_(-1.0, 1.0)


def random_input(param: dict, supply_type: TensorSupplyType = TensorSupplyType.Auto):
    """A GPU tensor for one kernel parameter (``param``: its record), made as ``supply_type`` says."""
    torch = _torch()
    shape, dtype = list(param["shape"]), param["dtype"]
    if param.get("packed"):
        shape[-1] //= 2
        dtype = "int8"
    if torch is not None:
        from .. import dtypes

        tdt = getattr(torch, dtypes.torch_dtype_name(dtypes.as_dtype(dtype)))
        return _torch_supply(torch, shape, tdt, supply_type)
    import cupy

    from .. import dtypes

    npd = dtypes.numpy_dtype(dtypes.as_dtype(dtype))
    if supply_type in (TensorSupplyType.Zero, TensorSupplyType.One):
        return (cupy.zeros if supply_type is TensorSupplyType.Zero else cupy.ones)(shape, dtype=npd)
    if np.issubdtype(npd, np.floating) and supply_type is not TensorSupplyType.Integer:
        if supply_type is TensorSupplyType.Uniform:
            return cupy.random.uniform(-1.0, 1.0, shape).astype(npd)
        mean = NORMAL_MEAN if supply_type is TensorSupplyType.Normal else 0.0
        return (cupy.random.standard_normal(shape, dtype=np.float32) + mean).astype(npd)
    return cupy.random.randint(-8 if supply_type is TensorSupplyType.Auto else -2, 8 if supply_type is
                               TensorSupplyType.Auto else 3, shape).astype(npd)


def _torch_supply(torch, shape, tdt, supply_type: TensorSupplyType):
    if supply_type is TensorSupplyType.Zero:
        return torch.zeros(shape, device="cuda", dtype=tdt)
    if supply_type is TensorSupplyType.One:
        return torch.ones(shape, device="cuda", dtype=tdt)
    if not tdt.is_floating_point:
        low, high = (-8, 8) if supply_type is TensorSupplyType.Auto else (-2, 3)
        if tdt == torch.bool:
            return torch.randint(0, 2, shape, device="cuda").bool()
        if str(tdt).startswith("torch.uint"):
            low = 0
        return torch.randint(low, high, shape, device="cuda", dtype=tdt)
    if supply_type is TensorSupplyType.Integer:
        return torch.randint(-2, 3, shape, device="cuda", dtype=torch.float32).to(tdt)
    if supply_type is TensorSupplyType.Uniform:
        return torch.empty(shape, device="cuda", dtype=torch.float32).uniform_(-1.0, 1.0).to(tdt)
    if supply_type is TensorSupplyType.Normal:
        return torch.empty(shape, device="cuda", dtype=torch.float32).normal_(NORMAL_MEAN, 1.0).to(tdt)
    return torch.randn(shape, device="cuda", dtype=torch.float32).to(tdt)


def _dynamic_sizes(kernel) -> dict:
    """The kernel's ``T.dynamic`` sizes (the launcher reads them from the tensors): a kernel
    sequence's are its first kernel's, as every part takes the function's parameters alike."""
    first = kernel.kernels[0] if hasattr(kernel, "kernels") else kernel
    return first.record.get("sizes", {})


class Profiler:
    """Correctness and timing of one kernel (or a kernel sequence: flash decoding and its combine),
    with TileLang's signatures: ``assert_allclose`` and ``do_bench`` (``warmup``/``rep`` in
    milliseconds, as ``tileworkbench.profiler.do_bench``)."""

    def __init__(self, kernel, tensor_supply_type: TensorSupplyType | None = None):
        self.kernel = kernel
        self.supply_type = tensor_supply_type or TensorSupplyType.Auto

    @property
    def func(self):
        """The kernel itself (TileLang's ``profiler.func(*args)`` launches it)."""
        return self.kernel

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)

    def inputs(self) -> list:
        sizes = _dynamic_sizes(self.kernel)
        params = [p for i, p in enumerate(self.kernel.params) if i not in self.kernel.out_idx
                  and p["name"] not in sizes]
        for p in params:
            if p["kind"] == "tensor" and None in p["shape"]:
                raise KernelRuntimeError(f"{self.kernel.name}: {p['name']} has T.dynamic dimensions, so the "
                                         f"profiler cannot make it: pass the inputs (input_tensors=, or call "
                                         f"do_bench(fn) with a function that launches the kernel on them)")
        return [random_input(p, self.supply_type) for p in params]

    def assert_allclose(self, reference_program, input_tensors=None, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01):
        """Run the kernel and ``reference_program`` on the same inputs (fresh random ones unless
        ``input_tensors``) and compare: at most ``max_mismatched_ratio`` of the elements (TileLang's
        default, 1%: its examples' checks count on it) may lie beyond ``atol + rtol * |reference|``.
        Outputs are poisoned with NaN first, so an element the kernel never writes fails whatever
        the ratio."""
        inputs = list(input_tensors) if input_tensors is not None else self.inputs()
        outs = self.kernel(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for o in outs:  # poison and run again: unwritten elements now show up as NaN
            if getattr(o, "dtype", None) is not None and "float" in str(o.dtype):
                o.fill_(float("nan")) if hasattr(o, "fill_") else o.fill(np.nan)
        full = list(inputs)
        for i, o in zip(self.kernel.out_idx, outs):
            full.insert(i, o)
        self.kernel(*full)
        refs = reference_program(*inputs)
        refs = refs if isinstance(refs, (tuple, list)) else (refs,)
        if len(refs) != len(outs):
            raise KernelRuntimeError(f"the reference returned {len(refs)} outputs, the kernel {len(outs)}")
        for o, r in zip(outs, refs):
            _compare(o, r, atol, rtol, max_mismatched_ratio)

    def do_bench(self, func=None, warmup: float = 25, rep: float = 100, n_warmup: int = 0, n_repeat: int = 0,
                 input_tensors=None, backend: str = "event", quantiles=None, return_mode: str = "mean",
                 inputs=None, flush_l2: bool = True):
        """Milliseconds of ``func`` called on the inputs (default: the kernel; fresh random inputs
        unless ``input_tensors``): ``backend.timing.do_bench``'s method and return modes."""
        from ..backend.timing import do_bench

        given = input_tensors if input_tensors is not None else inputs
        args = list(given) if given is not None else self.inputs()
        target = func if func is not None else self.kernel
        try:
            takes_inputs = func is None or _takes_arguments(func)
        except (TypeError, ValueError):
            takes_inputs = True
        call = (lambda: target(*args)) if takes_inputs else target
        return do_bench(call, warmup, rep, n_warmup, n_repeat, quantiles, flush_l2, backend, return_mode)


def _takes_arguments(fn) -> bool:
    """``fn`` is called with the inputs (a reference program, a kernel) rather than alone (a
    closure over its own tensors, as ``lambda: torch.matmul(a, b)``)."""
    if hasattr(fn, "params") and hasattr(fn, "out_idx"):  # a Kernel
        return True
    return any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                                    p.VAR_POSITIONAL)
               for p in inspect.signature(fn).parameters.values())


def _to_numpy(x):
    if type(x).__module__.startswith("torch"):
        return x.detach().float().cpu().numpy() if x.is_floating_point() else x.detach().cpu().numpy()
    import cupy

    return cupy.asnumpy(x).astype(np.float64)


def _compare(out, ref, atol, rtol, max_mismatched_ratio):
    o, r = _to_numpy(out).astype(np.float64), _to_numpy(ref).astype(np.float64)
    if o.shape != r.shape:
        raise AssertionError(f"output shape {o.shape} differs from the reference's {r.shape}")
    if np.isnan(o).any() and not np.isnan(r).any():
        raise AssertionError(f"{int(np.isnan(o).sum())} output elements are NaN (never written?)")
    bad = ~np.isclose(o, r, atol=atol, rtol=rtol)
    ratio = bad.mean() if bad.size else 0.0
    if ratio > max_mismatched_ratio:
        idx = np.argwhere(bad)[:5]
        samples = ", ".join(f"{tuple(i)}: {o[tuple(i)]:.5g} vs {r[tuple(i)]:.5g}" for i in idx)
        raise AssertionError(f"{bad.sum()} of {bad.size} elements ({ratio:.2%}) differ beyond atol={atol}, "
                             f"rtol={rtol}; e.g. {samples}")
