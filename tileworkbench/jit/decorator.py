"""``@tileworkbench.jit``: TileLang's decorator, in both of its styles.

* On a **builder** (a function that returns a ``@T.prim_func``), calling the decorated function
  with the builder's arguments compiles what it returns, once per argument values, and gives
  the :class:`~tileworkbench.jit.kernel.Kernel`.
* On a **kernel written in the current style** (its own body opens ``with T.Kernel``; sizes from
  ``T.const``, tensors annotated in the body, outputs from ``T.empty`` returned:
  ``frontend/eager.py``), ``f.compile(M=..., block_M=...)`` gives the Kernel, and calling
  ``f(a, b, block_M=...)`` with tensors runs it and returns its outputs, compiled on the first
  call for each shape, dtype and set of values, then taken from memory.
"""

from __future__ import annotations

import functools
import inspect
import operator
import warnings

from ..errors import CompileError, TileworkbenchWarning, caller_location
from ..frontend.eager import is_eager, parse_eager, tensor_parameters
from ..ir import nodes as ir
from ..target import PassConfigKey, PassContext
from .kernel import compile as compile_kernel, interpreted


# TileLang's execution backends: how its kernels are launched. There is one launch path here (the
# C launcher, else cuLaunchKernel from Python), so naming any of them changes nothing.
EXECUTION_BACKENDS = ("auto", "dlpack", "ctypes", "cython", "nvrtc", "tvm_ffi", "torch", "cupy")
# Where a TileLang compile flag has a meaning here, the pass config that gives it.
_FLAG_CONFIGS = {"--use_fast_math": PassConfigKey.TL_ENABLE_FAST_MATH.value,
                 "-use_fast_math": PassConfigKey.TL_ENABLE_FAST_MATH.value}


# nvcc's ways of handing options to ptxas: "--ptxas-options=-v,--register-usage-level=10", or the
# option's name and its list as two flags
_PTXAS_FLAGS = ("--ptxas-options", "-Xptxas")


def _ptxas_options(flags: list) -> tuple[list, list]:
    """(the ptxas options ``flags`` hand on, the other flags)."""
    options, others, i = [], [], 0
    while i < len(flags):
        name, equals, value = flags[i].partition("=")
        if name in _PTXAS_FLAGS and (equals or i + 1 < len(flags)):
            if not equals:
                i += 1
                value = flags[i]
            options += [o for o in value.split(",") if o]
        else:
            others.append(flags[i])
        i += 1
    return options, others


def _with_compile_flags(pass_configs, compile_flags):
    """``pass_configs`` with what ``compile_flags`` (nvcc's, in TileLang) mean here: fast math, and
    ptxas's options (``tw.ptxas_options``, after any the configs give); the others (-O3, -D...)
    have no effect, NVRTC compiling with this compiler's own flags, and a warning names them."""
    flags = [compile_flags] if isinstance(compile_flags, str) else list(compile_flags or ())
    if not all(isinstance(f, str) for f in flags):
        raise CompileError(f"jit: compile_flags is a list of strings, not {compile_flags!r}", caller_location())
    configs = dict(pass_configs or {})
    ptxas, flags = _ptxas_options(flags)
    if ptxas:
        key = PassConfigKey.TW_PTXAS_OPTIONS.value  # a str Enum: its member and its value are one key
        configs[key] = [*configs.pop(key, ()), *ptxas]
    for flag in flags:
        if flag in _FLAG_CONFIGS:
            configs.setdefault(_FLAG_CONFIGS[flag], True)
    ignored = [f for f in flags if f not in _FLAG_CONFIGS]
    if ignored:
        warnings.warn(f"jit: compile_flags {ignored} have no effect here (NVRTC compiles with tileworkbench's own "
                      "flags; --use_fast_math is TL_ENABLE_FAST_MATH)", TileworkbenchWarning, stacklevel=3)
    return configs or pass_configs


def jit(func=None, *, out_idx=None, target="auto", pass_configs=None, compile_flags=None, execution_backend="auto",
        verbose=False, target_host=None, debug_root_path=None, **unsupported):
    """``@jit`` or ``@jit(out_idx=..., target=..., pass_configs=...)`` (module doc). TileLang's
    other options are taken: ``compile_flags`` (``--use_fast_math`` is fast math; the rest have no
    effect, and a warning says so), ``execution_backend`` (one launch path here, whichever is
    named), ``target_host`` and ``debug_root_path`` (the host code and the trace are this
    compiler's own) and ``verbose`` (each compile's time, printed)."""
    if unsupported:
        raise CompileError(f"jit: unsupported option {next(iter(unsupported))!r} (this compiler takes out_idx, "
                           "target, pass_configs, compile_flags, execution_backend, verbose, target_host and "
                           "debug_root_path)", caller_location())
    if execution_backend not in EXECUTION_BACKENDS:
        raise CompileError(f"jit: execution_backend {execution_backend!r} is none of TileLang's "
                           f"({', '.join(EXECUTION_BACKENDS)})", caller_location())
    pass_configs = _with_compile_flags(pass_configs, compile_flags)

    def wrap(fn):
        return JitFunction(fn, out_idx, target, pass_configs, verbose=bool(verbose))

    return wrap(func) if func is not None else wrap


def _is_tensor(value) -> bool:
    if isinstance(value, type) or not (hasattr(value, "shape") and hasattr(value, "dtype")):
        return False
    # Asked of the type first: on a torch tensor ``__cuda_array_interface__`` is a property that
    # builds the whole interface (microseconds a call).
    kind = type(value)
    return (hasattr(kind, "__dlpack__") or hasattr(kind, "__cuda_array_interface__")
            or hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__"))


def _value_form(value):
    return (True, tuple(value.shape), value.dtype) if _is_tensor(value) else (False, type(value), value)


def _call_form(args: tuple, kwargs: dict):
    """What decides which kernel a call runs, as a dict key: each tensor's shape and dtype, every
    other value with its type (128 and 128.0 are different calls), the keywords by name; None
    where a value cannot be a key (the full path then decides)."""
    form = tuple(_value_form(a) for a in args)
    if kwargs:
        form = (form, tuple(sorted((k, _value_form(v)) for k, v in kwargs.items())))
    try:
        hash(form)
    except TypeError:
        return None
    return form


class JitFunction:
    """What ``@jit`` makes of a function (module doc)."""

    def __init__(self, fn, out_idx, target, pass_configs, verbose: bool = False):
        self.fn = fn
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = pass_configs
        self.verbose = verbose
        self.eager = is_eager(fn)
        self.kernels: dict = {}  # call form -> Kernel
        self.dynamic_dims: dict = {}  # values -> {tensor: its T.dynamic dimensions}, once one is compiled
        self.signature = inspect.signature(fn)
        # A call's form (_call_form) -> (its Kernel, where the tensors it takes are, in order: a
        # position or a keyword): a call made before skips binding and keys (tens of microseconds).
        self._calls: dict = {}
        functools.update_wrapper(self, fn)
        if self.eager and out_idx is not None:
            raise CompileError(f"{fn.__name__}: a kernel written with T.empty outputs names them itself; "
                               "out_idx is for builders that return a prim_func", caller_location())

    def __repr__(self) -> str:
        return f"<tileworkbench.jit {'kernel' if self.eager else 'builder'} {self.fn.__name__}>"

    # ---- builders ----------------------------------------------------------------------------
    def _built(self, args, kwargs):
        # lists among the arguments are fine too; the CPU interpreter's kernels are others
        key = ("builder", repr((args, sorted(kwargs.items()))), interpreted(self.target), PassContext.ambient())
        if key not in self.kernels:
            self.kernels[key] = compile_kernel(self.fn(*args, **kwargs), out_idx=self.out_idx, target=self.target,
                                               pass_configs=self.pass_configs, verbose=self.verbose)
        return self.kernels[key]

    # ---- the current style -------------------------------------------------------------------
    def compile(self, *args, **kwargs):
        """The Kernel for these values of the function's parameters and T.const sizes (its tensors
        are the Kernel's inputs, its T.empty outputs what the Kernel returns); or, given the call's
        tensors (TileLang's ``f.compile(q, kv, ...)``), the Kernel a call with them would run,
        compiled for their shapes and dtypes and not run."""
        if not self.eager:
            return self._built(args, kwargs)
        values = self._bind(args, kwargs)
        tensors = {k: v for k, v in values.items() if _is_tensor(v)}
        if not tensors:
            return self._kernel(values, None)
        values = {k: v for k, v in values.items() if k not in tensors}
        missing = [n for n in tensor_parameters(self.fn, values, self.signature) if n not in tensors]
        if missing:
            raise CompileError(f"{self.fn.__name__}.compile: tensors given for {', '.join(tensors)} but not for "
                               f"{', '.join(missing)}; give them all, or sizes and parameters only", caller_location())
        kernel = self._kernel(values, {k: (tuple(v.shape), str(v.dtype)) for k, v in tensors.items()})
        for p in kernel.params:  # a size named twice (`W: T.Tensor((K, K))`) took one value: say where not
            given = tensors.get(p["name"])
            if given is not None and (len(p["shape"]) != len(given.shape) or any(
                    want is not None and want != got for want, got in zip(p["shape"], given.shape))):
                raise CompileError(f"{self.fn.__name__}.compile: {p['name']} has shape {tuple(given.shape)}, but its "
                                   f"annotation's sizes make it {tuple(p['shape'])} (each T.const size takes the "
                                   "first value a tensor annotation gives it)", caller_location())
        return kernel

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The CUDA source of the kernel ``compile`` with these arguments gives (TileLang's
        ``f.get_kernel_source(...)``: values, or the call's tensors)."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def __call__(self, *args, **kwargs):
        if not self.eager:
            return self._built(args, kwargs)
        form = _call_form(args, kwargs)
        if form is not None:
            form = (form, PassContext.ambient())
        known = self._calls.get(form) if form is not None else None
        if known is not None:
            kernel, where = known  # each tensor's position, or its keyword
            return kernel(*[args[w] if type(w) is int else kwargs[w] for w in where])
        bound = self._bind(args, kwargs)
        tensors = {k: v for k, v in bound.items() if _is_tensor(v)}
        values = {k: v for k, v in bound.items() if k not in tensors}
        order = tensor_parameters(self.fn, values, self.signature)
        missing = [n for n in order if n not in tensors]
        if missing:
            raise CompileError(f"{self.fn.__name__}: no tensor given for {', '.join(missing)}", caller_location())
        kernel = self._kernel(values, {k: (tuple(v.shape), str(v.dtype)) for k, v in tensors.items()})
        if form is not None:
            if len(self._calls) >= 4096:  # sizes that keep changing (a T.dynamic dimension): stay bounded
                self._calls.clear()
            names = list(self.signature.parameters)
            self._calls[form] = (kernel, [n if n in kwargs else names.index(n) for n in order])
        return kernel(*(tensors[n] for n in order))

    def _bind(self, args, kwargs) -> dict:
        """Positional arguments to the parameters they stand for, with the keywords (which may
        also name T.const sizes, which are no parameters)."""
        params = list(self.signature.parameters)
        if len(args) > len(params):
            raise CompileError(f"{self.fn.__name__} takes {len(params)} parameters, got {len(args)} positional "
                               "arguments", caller_location())
        bound = dict(zip(params, args))
        for k, v in kwargs.items():
            if k in bound:
                raise CompileError(f"{self.fn.__name__}: {k!r} given twice", caller_location())
            bound[k] = v
        return bound

    def _kernel(self, values: dict, tensors: dict | None):
        """The Kernel for these values and tensors (name -> (shape, dtype)): one per form, where a
        ``T.dynamic`` dimension of a tensor is no part of the form (one kernel serves every size)."""
        values_key = repr(sorted(values.items()))
        ambient = PassContext.ambient()  # a `with PassContext(config=...)` around the call

        def key(dynamic: dict) -> tuple:
            forms = repr(sorted(_without_dims(tensors or {}, dynamic).items()))
            return ("kernel", values_key, forms, interpreted(self.target), ambient)

        kernel = self.kernels.get(key(self.dynamic_dims.get(values_key, {})))
        if kernel is None:
            parsed = parse_eager(self.fn, values, tensors)
            kernel = compile_kernel(parsed.func, out_idx=parsed.out_idx, target=self.target,
                                    pass_configs=self.pass_configs, verbose=self.verbose)
            dynamic = _dynamic_dims(parsed.func)
            if dynamic:
                self.dynamic_dims[values_key] = dynamic
                if not getattr(kernel, "interpreted", False):
                    # the aligned form, compiled at a later call, with the configs this one had
                    configs = PassContext.merged_configs(self.pass_configs)
                    kernel = SizedKernels(kernel, lambda m: self._aligned(values, tensors, m, configs),
                                          _row_multiple(parsed.func))
            self.kernels[key(dynamic)] = kernel
        return kernel


    def _aligned(self, values, tensors, multiple, configs):
        parsed = parse_eager(self.fn, values, tensors, size_multiple=multiple)
        return compile_kernel(parsed.func, out_idx=parsed.out_idx, target=self.target, pass_configs=configs)


class SizedKernels:
    """A kernel with ``T.dynamic`` sizes, in two compiled forms that serve every size: one for any
    sizes (partial tiles masked, rows of any alignment moved element by element), and one for sizes
    that are multiples of ``multiple`` (16 bytes of the narrowest element), whose rows are 16-byte
    aligned, so tiles move in 16-byte copies. A call takes the second where its sizes allow,
    compiling it the first time.

    After a call the aligned form took, the next call goes straight to that form's C launcher for
    those sizes (``Kernel.__call__``'s way: no Python frame), which checks the call's sizes, strides
    and 16-byte addresses and hands any call it refuses back to ``_dispatch``; so a loop of one
    aligned size costs what a kernel of fixed sizes costs (issue 18)."""

    def __init__(self, general, compile_aligned, multiple: int):
        self.general, self.multiple = general, multiple
        self._compile_aligned, self._aligned = compile_aligned, None
        self._sizes = [tuple(w)[:2] for w in general.record.get("sizes", {}).values()]
        self._entry = self._dispatch

    def __getattr__(self, name):  # the general form's sources, trace, params ...
        return getattr(self.general, name)

    def aligned(self):
        if self._aligned is None:
            self._aligned = self._compile_aligned(self.multiple)
            self._aligned.refuse_to(self._dispatch)  # what its C launchers refuse comes back here
        return self._aligned

    # A call is a call of ``_entry``: the aligned form's C launcher of the last aligned call's sizes,
    # or ``_dispatch``. A property, as ``Kernel.__call__``, so that a call the C path takes runs no
    # Python frame.
    __call__ = property(operator.attrgetter("_entry"), doc="sized(*args, stream=None): as ``Kernel.__call__``.")

    def _dispatch(self, *args, **kwargs):
        """The form this call's sizes and addresses allow, called through its Python launcher
        (``_call``: the aligned form's C launcher may be what sent the call here)."""
        sizes = [int(args[t].shape[d]) for t, d in self._sizes if t < len(args) and hasattr(args[t], "shape")]
        if len(sizes) == len(self._sizes) and all(n % self.multiple == 0 for n in sizes) and \
                all(_address(a) % 16 == 0 for a in args if hasattr(a, "shape")):
            form = self.aligned()
            result = form._call(*args, **kwargs)
            self._entry = form._fast or self._dispatch  # this call's sizes' C launcher, where it made one
            return result
        self._entry = self._dispatch
        return self.general(*args, **kwargs)


def _address(array) -> int:
    """A GPU array's address (0 where it cannot be told: the launcher checks it then). A torch
    tensor's ``data_ptr()`` first: its ``__cuda_array_interface__`` builds a dict on each ask."""
    if type(array).__module__ == "torch":
        try:
            return int(array.data_ptr())
        except (RuntimeError, AttributeError):  # no storage (a meta tensor): the launcher says what is wrong
            return 0
    face = getattr(array, "__cuda_array_interface__", None)
    return int(face["data"][0]) if face else 0


def _row_multiple(func) -> int:
    """Elements in 16 bytes of the narrowest tensor a T.dynamic size shapes."""
    sizes = {p for p in func.params if isinstance(p, ir.Var) and p.name in func.attrs.get("dynamic_sizes", {})}
    widths = [p.dtype.storage_bits for p in func.params if isinstance(p, ir.Buffer) and
              any(d in sizes for d in p.shape)]
    return max(1, 128 // min(widths)) if widths else 1


def _dynamic_dims(func) -> dict:
    """Tensor name -> the dimensions of it that are ``T.dynamic`` sizes."""
    sizes = {p for p in func.params if isinstance(p, ir.Var) and p.name in func.attrs.get("dynamic_sizes", {})}
    out = {}
    for p in func.params:
        dims = [i for i, d in enumerate(getattr(p, "shape", ())) if d in sizes]
        if dims:
            out[p.name] = set(dims)
    return out


def _without_dims(tensors: dict, dynamic: dict) -> dict:
    """The call's tensor forms with their ``T.dynamic`` dimensions left out."""
    return {name: (tuple(None if i in dynamic.get(name, ()) else n for i, n in enumerate(shape)), dtype)
            for name, (shape, dtype) in tensors.items()}
