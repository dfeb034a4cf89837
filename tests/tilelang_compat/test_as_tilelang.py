"""``python -m tileworkbench.as_tilelang script.py`` runs a TileLang script unchanged (its
``import tilelang`` answered by tileworkbench), and ``as_tilelang()`` does the same for code run
inside it, putting back whatever ``tilelang`` modules the process had before."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest

import tileworkbench
import tileworkbench.language
from tileworkbench.as_tilelang import as_tilelang

REPO = Path(__file__).resolve().parents[2]

SCRIPT = '''import sys
import numpy as np
import tilelang
import tilelang.language as T
from helper import SCALE  # the script's own folder is importable, as under `python script.py`


def scale(n, block):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * SCALE
    return main


if __name__ == "__main__":
    n = int(sys.argv[1])
    kernel = tilelang.compile(scale(n, 64), target="cpu")
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    print(tilelang.__name__, sys.argv[0].endswith("prog.py"), float(np.abs(b - a * SCALE).max()))
'''


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tileworkbench.as_tilelang", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "TILEWORKBENCH_DISABLE_CACHE": "1"})


def test_a_tilelang_script_runs_unchanged_with_its_arguments_and_its_folder(tmp_path):
    (tmp_path / "helper.py").write_text("SCALE = 3.0\n")
    (tmp_path / "prog.py").write_text(SCRIPT)
    done = _run(str(tmp_path / "prog.py"), "320")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tileworkbench", "True", "0.0"]


def test_a_module_tileworkbench_refuses_says_why_and_a_missing_script_is_named(tmp_path):
    for n, statement in enumerate(("from tilelang import tvm", "import tvm", "from tvm import tir")):
        (tmp_path / f"uses_tvm{n}.py").write_text(statement + "\n")
        done = _run(str(tmp_path / f"uses_tvm{n}.py"))
        assert done.returncode == 1
        assert "ImportError: tileworkbench.tvm is not supported: tileworkbench has no TVM underneath" in done.stderr
    missing = _run(str(tmp_path / "nowhere.py"))
    assert missing.returncode == 2 and "no such script" in missing.stderr and "usage:" in missing.stderr


def test_inside_the_block_tilelang_is_tileworkbench_and_the_processs_own_tilelang_comes_back(monkeypatch):
    theirs = types.ModuleType("tilelang")
    theirs_language = types.ModuleType("tilelang.language")
    monkeypatch.setitem(sys.modules, "tilelang", theirs)
    monkeypatch.setitem(sys.modules, "tilelang.language", theirs_language)
    with as_tilelang():
        import tilelang
        import tilelang.language as T

        assert tilelang is tileworkbench and T is tileworkbench.language
    assert sys.modules["tilelang"] is theirs and sys.modules["tilelang.language"] is theirs_language
    import tilelang

    assert tilelang is theirs


def test_without_a_tilelang_before_none_is_left_after():
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "tilelang" or k.startswith("tilelang.")}
    try:
        with as_tilelang():
            import tilelang.profiler  # noqa: F401
        assert not [k for k in sys.modules if k == "tilelang" or k.startswith("tilelang.")]
        if importlib.util.find_spec("tilelang") is None:  # (no TileLang installed here: no alias is left)
            with pytest.raises(ImportError):
                import tilelang  # noqa: F401
    finally:
        sys.modules.update(saved)


def test_a_probe_for_tvm_finds_no_files_and_raises_nothing():
    """torch.compile's skip rules ask ``importlib.util.find_spec("tvm")`` and read its origin (TileLang's
    flash-attention backward example, unedited, stopped there when the finder raised)."""
    with as_tilelang():
        spec = importlib.util.find_spec("tvm")
        assert spec is None or spec.origin is None
        with pytest.raises(ImportError, match="tileworkbench has no TVM underneath"):
            import tvm  # noqa: F401
