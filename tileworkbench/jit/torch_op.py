"""A compiled kernel as a torch operator: ``kernel.as_torch_op("namespace::name")``.

The operator is defined with ``torch.library`` (schema from the kernel's signature: its inputs as
``Tensor``, ``int``, ``float`` or ``bool`` arguments, its ``out_idx`` outputs as the returned
tensors), implemented for CUDA by calling the kernel (outputs allocated on the inputs' device,
launched on torch's current stream), and given a fake implementation that makes empty outputs of
the right shape and dtype, so ``torch.compile`` traces through it without a graph break and
without running it.
"""

from __future__ import annotations

from ..errors import KernelRuntimeError

_SCALAR_TYPES = {"bool": "bool", "float16": "float", "bfloat16": "float", "float32": "float", "float64": "float"}
_REGISTERED: dict = {}  # qualified name -> (kernel, torch.library.Library): kept alive, never twice


def as_torch_op(kernel, qualname: str):
    """Register ``kernel`` as the torch operator ``qualname`` ("namespace::name") and return it
    (``torch.ops.namespace.name``). Registering the same kernel again returns the same operator;
    another kernel under a name already taken is an error (torch cannot redefine an operator)."""
    import torch

    namespace, name = _split(qualname)
    known = _REGISTERED.get(qualname)
    if known is not None:
        if known[0] is not kernel:
            raise KernelRuntimeError(f"the torch operator {qualname} is already registered for another kernel "
                                     f"({known[0].name}); choose another name")
        return getattr(getattr(torch.ops, namespace), name)
    if not kernel.out_idx:
        raise KernelRuntimeError(f"{kernel.name}: a torch operator returns its results, so the kernel needs out_idx "
                                 "outputs (compile it with out_idx=[...])")
    inputs = [p for i, p in enumerate(kernel.params) if i not in kernel.out_idx]
    outputs = [kernel.params[i] for i in kernel.out_idx]
    schema = f"({', '.join(_argument(kernel, p) for p in inputs)}) -> " + (
        "Tensor" if len(outputs) == 1 else f"({', '.join('Tensor' for _ in outputs)})")
    library = torch.library.Library(namespace, "FRAGMENT")
    library.define(name + schema)

    def run(*args):
        return kernel(*args)

    def fake(*args):
        like = next(a for a in args if isinstance(a, torch.Tensor))
        made = [like.new_empty(_shape(p), dtype=_torch_dtype(torch, p)) for p in outputs]
        return made[0] if len(made) == 1 else tuple(made)

    library.impl(name, run, "CUDA")
    torch.library.register_fake(qualname, fake, lib=library)
    _REGISTERED[qualname] = (kernel, library)
    return getattr(getattr(torch.ops, namespace), name)


def _split(qualname: str) -> tuple[str, str]:
    parts = qualname.split("::") if isinstance(qualname, str) else []
    if len(parts) != 2 or not all(p.isidentifier() for p in parts):
        raise KernelRuntimeError(f"a torch operator's name is 'namespace::name' (two Python identifiers), "
                                 f"not {qualname!r}")
    return parts[0], parts[1]


def _argument(kernel, param: dict) -> str:
    if param["kind"] == "tensor":
        return f"Tensor {param['name']}"
    kind = _SCALAR_TYPES.get(param["dtype"], "int" if "int" in param["dtype"] else None)
    if kind is None:
        raise KernelRuntimeError(f"{kernel.name}: the scalar {param['name']} ({param['dtype']}) has no torch "
                                 "schema type")
    return f"{kind} {param['name']}"


def _shape(param: dict) -> tuple:
    from .kernel import output_form

    return output_form(param)[0]


def _torch_dtype(torch, param: dict):
    from .. import dtypes
    from .kernel import output_form

    return getattr(torch, dtypes.torch_dtype_name(dtypes.as_dtype(output_form(param)[1])))
