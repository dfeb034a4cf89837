"""The robustness suite's harness.

A case is a few lines of DSL source, run as a module of its own (registered with ``linecache``
so the front end reads it as it reads any file). A ``Bad`` case marks the line the error must
point at with ``# <-``; the harness checks that the error is a ``CompileError`` (or, at call
time, a ``KernelRuntimeError``), that its message matches, that it points at the marked line
with a caret under it, and that no other exception type escapes. A ``Good`` case must lower and
compile with NVRTC for sm_90a.

A case's source defines ``main`` (lowered for sm_90a unless it defines ``run()``, which does the
work instead). Names available to every case: ``T``, ``tw``, ``np``, ``SM90``, ``dry_call``
(calls a compiled kernel through the real host launcher with a runtime that checks arguments
and launches nothing, so call-time checks run without a GPU) and ``FakeGpuArray``.
"""

from __future__ import annotations

import importlib.util
import itertools
import linecache
import re
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench import CompileError, KernelRuntimeError
from tileworkbench.backend.runtime import Runtime

MARK = "# <-"
SM90 = "sm_90a"
INTERNAL = "internal error"  # the last-resort wrapper's words: a case that reaches it fails


@dataclass(frozen=True)
class Bad:
    """An invalid kernel or call: ``match`` is a regex its error message must contain."""

    id: str
    source: str
    match: str
    error: type = CompileError


@dataclass(frozen=True)
class Good:
    """A valid kernel: it lowers, and NVRTC compiles it; ``expect`` are texts of its device source."""

    id: str
    source: str
    expect: tuple = ()


EXPERIMENTS = Path(__file__).resolve().parents[2] / "scripts" / "experiments"


def experiment(name: str):
    """The kept experiment script ``scripts/experiments/<name>.py`` as a module (its folder on the
    path, for the helpers it shares with the others): a CI property runs a slice of its sweep."""
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def swept(sweep, config, seed: int) -> str:
    """One draw of an experiment's sweep (``experiment``) checked as its CI slice checks it: warnings
    quiet, no NVRTC; the sweep's outcome (``"ok..."``, ``"refused: ..."``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sweep.check(config, seed=seed, nvrtc=False)


def ids(cases) -> list[str]:
    return [c.id for c in cases]


def check_unique(cases):
    seen = [c.id for c in cases]
    dup = {i for i in seen if seen.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"
    return cases


# ---- running a case ------------------------------------------------------------------------

_modules = itertools.count()


def _source(case) -> str:
    return textwrap.dedent(case.source).strip("\n") + "\n"


def filename(case) -> str:
    return f"<robustness case {case.id}>"


def marked_line(case) -> int | None:
    for number, line in enumerate(_source(case).splitlines(), start=1):
        if line.rstrip().endswith(MARK):
            return number
    return None


def run(case):
    """Execute the case's module, then its ``run()`` or the lowering of its ``main``."""
    source, name = _source(case), filename(case)
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    namespace = {"T": T, "tw": tw, "np": np, "SM90": SM90, "dry_call": dry_call, "FakeGpuArray": FakeGpuArray,
                 "__name__": f"tw_robustness_{next(_modules)}"}
    exec(compile(source, name, "exec"), namespace)
    if "run" in namespace:
        return namespace["run"]()
    return tw.lower(namespace["main"], target=SM90)


def lowered_or_refused(work, what: str, own_protocol: bool = False):
    """``work()``'s result, or None where it raised a ``CompileError`` a property allows: one that
    names a kernel line and is no internal error (nor, with ``own_protocol``, the barrier checker
    rejecting a protocol the compiler wrote itself, in programs with no barrier of their own).
    Anything else fails the property, naming ``what`` (the program or its parameters)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return work()
        except CompileError as err:
            text = str(err)
            assert INTERNAL not in text.lower(), f"internal error on {what}:\n{text}"
            assert err.loc is not None, f"no location on {what}:\n{text}"
            assert not (own_protocol and "barrier check" in text.lower()), \
                f"the checker rejected the compiler's own protocol on {what}:\n{text}"
            return None
        except Exception as exc:  # anything else escaping is the bug these properties exist to catch
            raise AssertionError(f"{type(exc).__name__} escaped on {what}: {exc}") from exc


def check_bad(case: Bad):
    try:
        run(case)
    except case.error as err:
        _check_error(case, err)
        return err
    except Exception as exc:  # anything else escaping is the bug this suite exists to catch
        raise AssertionError(f"{case.id}: {type(exc).__name__} escaped instead of {case.error.__name__}: {exc}") \
            from exc
    raise AssertionError(f"{case.id}: accepted, but it should raise {case.error.__name__} matching {case.match!r}")


def _check_error(case: Bad, err: Exception):
    text = str(err)
    assert re.search(case.match, text), f"{case.id}: message does not match {case.match!r}:\n{text}"
    assert INTERNAL not in text.lower(), f"{case.id}: reached the internal-error wrapper:\n{text}"
    assert " at 0x" not in text, f"{case.id}: the message shows an object's address:\n{text}"
    line = marked_line(case)
    if line is None:
        return
    loc = getattr(err, "loc", None)
    assert loc is not None, f"{case.id}: the error has no location:\n{text}"
    assert (loc.file, loc.line) == (filename(case), line), \
        f"{case.id}: points at {loc.file}:{loc.line}, not the marked line {line}:\n{text}"
    lines = text.splitlines()
    assert lines[0].startswith(f"{filename(case)}:{line}: "), text
    assert lines[-1].strip() == "^", f"{case.id}: no caret under the line:\n{text}"
    assert MARK in lines[-2], f"{case.id}: the quoted line is not the marked one:\n{text}"


def check_good(case: Good):
    artifact = run(case)
    if not isinstance(artifact, tw.Artifact):  # a run() that lowers itself returns the artifact
        raise AssertionError(f"{case.id}: run() must return the lowered Artifact")
    for text in case.expect:
        assert text in artifact.device_source, f"{case.id}: {text!r} not in the device source"
    from tileworkbench.backend.nvrtc import compile_check

    compile_check(artifact.device_source, "sm_90a", name=f"{artifact.kernel_name}.cu")
    return artifact


# ---- call-time checks without a GPU ------------------------------------------------------------


class FakeGpuArray:
    """An object with ``__cuda_array_interface__`` at a made-up address: enough for the launcher's
    argument checks, never dereferenced."""

    def __init__(self, shape, typestr="<f2", ptr=1 << 20, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}
        self.shape = tuple(shape)


class DryRuntime(Runtime):
    """The real argument checks and tensor-map field checks; nothing reaches a driver or a GPU."""

    def __init__(self, smem_bytes: int):
        super().__init__(module=None, smem_bytes=smem_bytes)
        self.launches: list = []
        self.packed: list = []  # (the parameters, the stream) of each launch

    def _encode_tensor_map(self, *fields):
        return np.zeros(1, dtype="V128")[0]

    def persistent_blocks(self, kernel_name, tiles, block, smem_bytes):
        return min(tiles, 132)

    def resident_blocks(self, kernel_name, block, smem_bytes):
        return 132  # an H200's multiprocessors, a block each

    def launch(self, kernel_name, grid, block, smem_bytes, args, stream=0):
        self.launches.append((kernel_name, grid, block))
        self.packed.append((args, stream))


def dry_call(kernel, *args, **keywords):
    """Call ``kernel`` (from ``tw.compile(..., load_device=False)``) through its host launcher on a
    ``DryRuntime``; returns the runtime (its ``launches``)."""
    runtime = DryRuntime(kernel.record["smem_bytes"])
    kernel.bind_runtime(runtime)
    kernel(*args, **keywords)
    return runtime


__all__ = ["Bad", "Good", "KernelRuntimeError", "CompileError", "check_bad", "check_good", "check_unique", "ids"]
