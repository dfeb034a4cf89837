"""CUDA of the program's own: ``T.import_source`` puts device functions before the kernel (once
each) and ``T.call_extern`` calls one with values (a pointer argument is refused: the compiler's
barriers and race checks cannot see through it); NVRTC compiles the result; the CPU interpreters
say they cannot run such a function."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.values import Unsupported

from tests.extern_programs import TWICE_PLUS, twice_plus
from tests.tilelang_compat.kernel_files import main_with


def test_the_imported_source_stands_once_before_the_kernel_and_compiles():
    source = tw.lower(twice_plus, target="sm_90a").kernel_source
    kernel = source[source.index("// ---- kernel ----"):]
    assert kernel.count(TWICE_PLUS.strip()) == 1
    assert kernel.index(TWICE_PLUS.strip()) < kernel.index('extern "C"')
    assert "twice_plus(X[" in kernel and "touch(tx" in kernel
    compile_check(source, "sm_90a")


def test_the_cpu_interpreter_says_it_cannot_run_the_function():
    with pytest.raises(Unsupported, match="twice_plus"):
        tw.compile(twice_plus, target="cpu")(np.ones(256, np.float32), np.zeros(256, np.float32))


@pytest.mark.parametrize("statement, message", [
    ("S = T.alloc_shared((128,), 'float32')\nT.call_extern('handle', 'fill', T.access_ptr(S[0], 'w'))",
     r"argument 1 is a pointer; only values are passed"),
    ("T.call_extern('float32', 'tw::copy_vec<16>', X[0])", r"the function's name is a C\+\+ identifier"),
    ("T.call_extern('float32', 'f', 'text')", r"argument 1 must be a number"),
    ("T.import_source(42)", "T.import_source takes the CUDA source as a non-empty string"),
])
def test_what_cannot_be_called_is_refused_at_its_line(tmp_path, statement, message):
    with pytest.raises(CompileError, match=message) as info:
        main_with(tmp_path, "X: T.Tensor((128,), 'float32')", statement.replace("\n", "\n        "))
    line = 7 + statement.count("\n")
    assert f"kernel_file.py:{line}" in str(info.value)
