"""What the magic and the CLI share: reading arguments written as text, finding the kernel
(a ``@T.prim_func`` or a builder that returns one).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys

from ..ir import nodes as ir

_TRUE, _FALSE = ("true", "yes", "on"), ("false", "no", "off")


def parse_value(text: str):
    """A Python literal when the text is one (``1024``, ``'float16'``, ``None``, ``(1, 2)``),
    ``true``/``false`` as booleans, otherwise the text itself (``float16``)."""
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_call_args(tokens) -> tuple[list, dict]:
    """Positional values and ``name=value`` keywords from command-line tokens."""
    args, kwargs = [], {}
    for tok in tokens:
        name, eq, value = tok.partition("=")
        if eq and name.isidentifier():
            kwargs[name] = parse_value(value)
        else:
            args.append(parse_value(tok))
    return args, kwargs


def parse_pass_configs(items) -> dict:
    """``["tl.disable_warp_specialized=true", ...]`` -> ``{"tl.disable_warp_specialized": True}``."""
    out = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"pass config {item!r} must be KEY=VALUE")
        out[key.strip()] = parse_value(value)
    return out


def parse_target(text: str | None):
    """``sm_90`` -> ``{"kind": "cuda", "arch": "sm_90"}``; ``auto``/``cuda``/None pass through."""
    if text is None or text in ("auto", "cuda"):
        return text or "auto"
    if text.startswith("sm_"):
        return {"kind": "cuda", "arch": text}
    return text


def parse_out_idx(text: str | None):
    if text is None:
        return None
    values = [int(v) for v in str(text).replace(" ", "").strip("[]").split(",") if v]
    return values[0] if len(values) == 1 else values


def prim_func_of(obj, args=(), kwargs=None) -> ir.PrimFunc:
    """The PrimFunc ``obj`` is, or returns when called with ``args`` (a builder).

    A ``@tileworkbench.jit`` builder is unwrapped (its ``__wrapped__`` builds the PrimFunc)."""
    kwargs = kwargs or {}
    if isinstance(obj, ir.PrimFunc):
        if args or kwargs:
            raise TypeError(f"{obj.name} is a prim_func, not a builder: it takes no arguments here")
        return obj
    builder = getattr(obj, "__wrapped__", obj)
    if not callable(builder):
        raise TypeError(f"{obj!r} is neither a prim_func nor a builder that returns one")
    result = builder(*args, **kwargs)
    if not isinstance(result, ir.PrimFunc):
        raise TypeError(f"{getattr(builder, '__name__', builder)}(...) returned {type(result).__name__}, "
                        "not a prim_func (decorate the kernel with @T.prim_func and return it)")
    return result


def load_object(spec: str):
    """``path/to/file.py::NAME`` or ``package.module::NAME`` -> (object, name)."""
    where, sep, name = spec.rpartition("::")
    if not sep or not where or not name:
        raise ValueError(f"expected FILE.py::FUNC or module.path::FUNC, got {spec!r}")
    if where.endswith(".py") or os.path.sep in where or os.path.exists(where):
        path = os.path.abspath(where)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such file: {where}")
        mod_name = "_tw_user_" + os.path.splitext(os.path.basename(path))[0]
        spec_obj = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec_obj)
        sys.modules[mod_name] = module  # inspect.getsource needs the module to be findable
        sys.path.insert(0, os.path.dirname(path))  # sibling imports of the user's file
        try:
            spec_obj.loader.exec_module(module)
        finally:
            sys.path.remove(os.path.dirname(path))
    else:
        module = importlib.import_module(where)
    if not hasattr(module, name):
        raise AttributeError(f"{where} has no {name!r}")
    return getattr(module, name), name
