"""The C launch path (issue 18): ``fastcall.c`` built on first use and a ``Launcher`` per kernel.

A call through the generated Python launcher costs about 8 us on the H200's host, of which the
driver's ``cuLaunchKernel`` from C is 3-4 (``scripts/experiments/launch_floor.py``): the rest is
Python frames and attribute reads. ``fastcall.c`` makes the checks of the launcher's fast branch
(``Runtime.tensor``) and the launch in one C call, for kernels whose parameters are all tensors
of fixed shapes (``codegen.host.fast_call_plan``); anything it does not accept it hands, as it
came, to its ``fallback``, the Python launcher, which decides and words every error (``fastcall.c``'s
header says what exactly). The launcher is the kernel's ``__call__`` (``Kernel.take_c_path``), so
a call it takes runs no Python frame. Where torch offers DLPack's C exchange API (torch 2.10 on),
the launcher reads each tensor with one C call of it and the current stream from it
(``read_through_exchange_api``) instead of five attribute reads and a call of torch's.

The module is compiled with the system's C compiler (``cc``; ``CC`` overrides) against Python's
headers, once per source text (``fastcall.c`` and the header it includes), Python version and
platform, into the compile cache's folder (``<cache>/fastcall/``), the way Triton builds its
launchers. Where that cannot be done (no compiler, no ``Python.h``, ``TILEWORKBENCH_FASTCALL=0``),
``module()`` returns None, ``why_not()`` says why (and the ``tileworkbench`` logger, at INFO),
and every call takes the Python launcher: slower, never different.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("fastcall.c")
HEADERS = (Path(__file__).with_name("dlpack_exchange.h"),)  # what SOURCE includes: part of the build's tag
MODULE_NAME = "tileworkbench_fastcall"

_state: dict = {}  # "module": the loaded module or None, "why_not": the reason it is None
_lock = threading.Lock()  # one build at a time: prepare()'s thread and module() wait for each other


def _after_fork_in_child() -> None:
    """A process forked while prepare()'s thread built (autotuning forks its workers) holds a copy
    of the lock that no thread of its own will release, and no build under way: it starts afresh."""
    global _lock
    _lock = threading.Lock()
    if "module" not in _state:
        _state.pop("preparing", None)


os.register_at_fork(after_in_child=_after_fork_in_child)


def module(build_dir: Path):
    """The compiled ``tileworkbench_fastcall`` module (built into ``build_dir`` if not there yet),
    or None where it cannot be built or loaded (``why_not()`` says why). Decided once a process."""
    with _lock:
        if "module" not in _state:
            try:
                _state["module"], _state["why_not"] = _load(Path(build_dir)), None
            except _Unavailable as exc:
                _state["module"], _state["why_not"] = None, str(exc)
                logging.getLogger("tileworkbench").info(
                    "the C launch path is off (%s): calls take the Python launcher, checked alike, about twice "
                    "the host time", exc)
            except Exception as exc:  # a failure of ours: the kernels still load, on the Python launcher
                _state["module"], _state["why_not"] = None, f"{type(exc).__name__}: {exc}"
                logging.getLogger("tileworkbench").warning("the C launch path failed to load (%s: %s); calls take "
                                                           "the Python launcher", type(exc).__name__, exc)
        return _state["module"]


def prepare(build_dir: Path) -> None:
    """Start deciding ``module(build_dir)`` in a thread (a first build on a machine takes a few
    tenths of a second of ``cc``), so that it runs while the kernel being compiled is in NVRTC and
    is ready when the kernel loads; nothing if it is decided or under way."""
    if "module" in _state or _state.get("preparing"):
        return
    _state["preparing"] = True
    threading.Thread(target=module, args=(build_dir,), name="tileworkbench-fastcall-build").start()


def why_not() -> str | None:
    """Why the C launch path is off in this process (None: it is on, or not asked for yet)."""
    return _state.get("why_not")


class _Unavailable(Exception):
    pass


def _load(build_dir: Path):
    if os.environ.get("TILEWORKBENCH_FASTCALL", "1") == "0":
        raise _Unavailable("TILEWORKBENCH_FASTCALL=0")
    text = SOURCE.read_bytes() + b"".join(header.read_bytes() for header in HEADERS)
    tag = hashlib.sha256(text + sys.version.encode() + sysconfig.get_platform().encode()).hexdigest()[:16]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = build_dir / "fastcall" / f"{MODULE_NAME}-{tag}{suffix}"
    try:
        if not target.exists():
            _build(target)
    except OSError as exc:  # a cache folder we cannot write, a full disk: no C path, not a failed load
        raise _Unavailable(f"{SOURCE.name} could not be built into {target.parent}: {exc}") from exc
    spec = importlib.util.spec_from_file_location(MODULE_NAME, target)
    try:
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    except ImportError as exc:
        raise _Unavailable(f"the built module {target} does not load: {exc}") from exc
    return loaded


def _build(target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise _Unavailable("no C compiler (cc, gcc or clang) on the PATH")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise _Unavailable(f"no Python.h in {include} (install Python's development headers)")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built under a temporary name and renamed: processes building at once each leave a whole file.
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        built = Path(work) / target.name
        command = [compiler, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(built), "-ldl"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _Unavailable(f"{compiler} could not build {SOURCE.name}: {exc}") from exc
        if done.returncode != 0:
            raise _Unavailable(f"{compiler} could not build {SOURCE.name}: {done.stderr.strip()[-2000:]}")
        os.replace(built, target)
    _remove_older_builds(target)


def _remove_older_builds(target: Path) -> None:
    """Builds of earlier versions of the source for this Python (the same extension suffix):
    replaced by ``target``. A process that loaded one keeps its mapping."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for old in target.parent.glob(f"{MODULE_NAME}-*{suffix}"):
        if old != target:
            with contextlib.suppress(OSError):
                old.unlink()


def launcher(mod, name: str, function: int, plan: dict, device: int, torch_dtypes: list, outputs, encoders: list,
             error_type, exchange_api: bool = True):
    """A ``Launcher`` for one kernel on ``device`` (``function``: its ``CUfunction`` there), from
    its fast-call plan, each tensor's torch dtype, the indices of the outputs (``out_idx``) and
    each tensor map's encoder (address -> its 128 bytes); None where libcuda cannot be opened
    (``why_not()``). Calls go on torch's current stream of the device. With ``exchange_api`` (and
    a torch that offers it) the launcher reads each tensor through DLPack's C exchange API."""
    import torch

    reason = mod.bind()
    if reason is not None:
        _state["why_not"] = reason
        return None
    specs, maps = plan_arguments(plan, torch_dtypes, outputs, encoders,
                                 lambda p, dtype: _template(torch, p, dtype, device))
    try:
        made = mod.Launcher(name, function, tuple(plan["grid"]), tuple(plan["block"]), plan["smem_bytes"], device,
                            specs, maps, torch.Tensor, _cupy_get_device(), torch._C._cuda_getCurrentRawStream,
                            error_type, torch.empty_like)
    except RuntimeError as exc:  # no current context on this thread: calls take the Python launcher
        _state["why_not"] = str(exc)
        return None
    if exchange_api:
        read_through_exchange_api(made, torch.Tensor, [torch.empty(0, dtype=dtype) for dtype in torch_dtypes])
    return made


EXCHANGE_API = "__dlpack_c_exchange_api__"  # DLPack 1.3's name for the capsule on a tensor type


def read_through_exchange_api(made, tensor_type, probes: list) -> bool:
    """Have ``made`` read its tensors through DLPack's C exchange API where ``tensor_type`` offers
    one (torch 2.10 on): one C call a tensor instead of five attribute reads, and the current
    stream without a Python call. ``probes``: a tensor of each parameter's dtype (its dtype as the
    API reads it is what that parameter must have). Whether the launcher took it."""
    capsule = getattr(tensor_type, EXCHANGE_API, None)
    if capsule is None:
        return False
    try:
        return made.use_exchange_api(capsule, tuple(probes))
    except (TypeError, ValueError) as exc:  # not a capsule of that name: the attributes stay
        logging.getLogger("tileworkbench").info("%s.%s is not DLPack's exchange API (%s): tensors are read by "
                                                "their attributes", tensor_type.__name__, EXCHANGE_API, exc)
        return False


def plan_arguments(plan: dict, dtypes: list, outputs, encoders: list, template) -> tuple:
    """(specs, maps): what ``Launcher`` takes for the plan's tensors (each one's dtype object from
    ``dtypes``; ``template(param, dtype)`` for each output) and tensor maps (with ``encoders``)."""
    specs = tuple((dtype, tuple(p["shape"]), tuple(p["strides"]), p["align"], i in outputs,
                   template(p, dtype) if i in outputs else None)
                  for i, (p, dtype) in enumerate(zip(plan["params"], dtypes)))
    maps = tuple((m["tensor"], encode) for m, encode in zip(plan["maps"], encoders))
    return specs, maps


def _template(torch, param: dict, dtype, device: int):
    """What ``torch.empty_like`` makes an output from: one element of its dtype on its device seen
    at its shape (an expanded view: no memory held), so the new tensor is row-major (torch lays out
    what is not dense that way); None where the output's strides are not row-major (``new_empty``
    then makes it, and the check hands what does not fit back to the Python launcher)."""
    if not param["row_major"]:
        return None
    return torch.empty((), dtype=dtype, device=f"cuda:{device}").expand(param["shape"])


def _cupy_get_device():
    import cupy

    return cupy.cuda.runtime.getDevice
