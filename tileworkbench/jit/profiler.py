"""``Kernel.get_profiler()``: correctness against a reference on random inputs, and timing."""

from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError


def _torch():
    try:
        import torch

        return torch
    except ImportError:
        return None


def random_input(param: dict, seed_offset: int = 0):
    """A random GPU tensor for one kernel parameter: normal floats, small random integers.
    Never zeros: zeros hide unwritten outputs and wrong indexing."""
    torch = _torch()
    shape, dtype = list(param["shape"]), param["dtype"]
    if param.get("packed"):
        shape[-1] //= 2
        dtype = "int8"
    if torch is not None:
        tdt = getattr(torch, dtype)
        if tdt.is_floating_point:
            return torch.randn(shape, device="cuda", dtype=torch.float32).to(tdt)
        return torch.randint(-8, 8, shape, device="cuda", dtype=tdt)
    import cupy

    from .. import dtypes

    npd = dtypes.numpy_dtype(dtypes.as_dtype(dtype))
    if np.issubdtype(npd, np.floating):
        return cupy.random.standard_normal(shape, dtype=np.float32).astype(npd)
    return cupy.random.randint(-8, 8, shape).astype(npd)


class Profiler:
    def __init__(self, kernel):
        self.kernel = kernel

    def inputs(self) -> list:
        return [random_input(p) for i, p in enumerate(self.kernel.params) if i not in self.kernel.out_idx]

    def assert_allclose(self, reference_program, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.0):
        """Run the kernel and ``reference_program`` on the same fresh random inputs and compare.
        Outputs are poisoned with NaN first, so an element the kernel never writes fails."""
        inputs = self.inputs()
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

    def do_bench(self, func=None, warmup: int = 10, rep: int = 50, inputs=None, flush_l2: bool = True) -> float:
        """Median milliseconds of ``func`` (default: the kernel on random inputs), timed as every
        benchmark here times (``backend.timing.Timer``: CUDA events, the L2 cache flushed before
        every timed run unless ``flush_l2`` is False)."""
        from ..backend.timing import FLUSH_BYTES, Timer

        inputs = inputs if inputs is not None else self.inputs()
        fn = func if func is not None else (lambda: self.kernel(*inputs))
        return Timer(flush_bytes=FLUSH_BYTES if flush_l2 else 0).time(fn, warmup, rep).ms


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
