"""``make demo`` on a GPU machine: it installs CuPy, not torch, so the demo's GPU half must run
without torch; both kernels are checked against float32 and shown next to cuBLAS, each labelled."""

from __future__ import annotations

import os
import subprocess
import sys

from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)

WITHOUT_TORCH = ("import sys; sys.modules['torch'] = None; from tileworkbench.demo import main; "
                 "sys.exit(main(['--size', '2048', '--out', sys.argv[1]]))")


def test_the_demo_runs_both_gemms_on_cupy_alone(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    out = run.stdout
    assert "cuBLAS (cupy.matmul)" in out
    assert "spec GEMM (matmul_tma_copy" in out and "matmul 128x256x64 s3 t256 (warp-specialised, persistent)" in out
    assert out.count("x cuBLAS") == 2 and "WRONG" not in out
    assert (tmp_path / "report.html").exists()


def test_the_readme_example_runs_as_written(tmp_path):
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    script = tmp_path / "readme_example.py"  # a file: the front end reads the kernel's source
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "__global__" in run.stdout and "def launch" in run.stdout
