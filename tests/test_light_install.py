"""The compiler and runtime need none of the notebook stack (issue 21): `pip install tileworkbench`
brings numpy, cuda-bindings and NVRTC; JupyterLab, ipywidgets, IPython, pandas and matplotlib are
the `lab` extra, and a workbench feature used without them says which extra to install."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileworkbench.errors import lab_dependency

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_STACK = ("jupyterlab", "ipywidgets", "IPython", "pandas", "matplotlib")

COMPILE_AND_LIST = """
import sys
import tileworkbench as tw
import tileworkbench.language as T

@T.prim_func
def double(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0

tw.compile(double, out_idx=[1], load_device=False)
print(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_the_package_depends_on_the_compiler_stack_only():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = " ".join(project["dependencies"]).lower()
    assert not any(p.lower() in names for p in NOTEBOOK_STACK)
    lab = " ".join(project["optional-dependencies"]["lab"]).lower()
    assert all(p.lower() in lab for p in NOTEBOOK_STACK)


def test_compiling_a_kernel_imports_none_of_the_notebook_stack(tmp_path):
    script = tmp_path / "compile_only.py"  # a file: the front end reads the kernel's source
    script.write_text(COMPILE_AND_LIST)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout.split()
    assert not set(NOTEBOOK_STACK) & set(out), set(NOTEBOOK_STACK) & set(out)


def test_a_workbench_feature_without_the_lab_extra_names_it():
    with pytest.raises(ImportError, match=r"the pass stepper needs not_a_package_xyz, part of tileworkbench's "
                                          r"notebook stack: pip install 'tileworkbench\[lab\]'"):
        lab_dependency("not_a_package_xyz.widgets", "the pass stepper")
