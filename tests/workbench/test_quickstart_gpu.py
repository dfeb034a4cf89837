"""The GPU cell of notebooks/01_quickstart.ipynb, run as written against the compiled spec GEMM."""

import json
import os
import sys
import types

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _gpu_cell() -> str:
    with open(os.path.join(REPO, "notebooks", "01_quickstart.ipynb")) as fh:
        nb = json.load(fh)
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    (cell,) = [c for c in code if "detect_arch() is None" in c]
    return cell


def test_the_cell_is_guarded_by_gpu_detection():
    cell = _gpu_cell()
    assert cell.startswith("from tileworkbench.target import detect_arch")
    assert "torch.testing.assert_close" in cell and "torch.matmul" in cell


@pytest.mark.gpu
def test_gpu_cell_runs_checks_and_times(capsys, monkeypatch):
    from tileworkbench.target import detect_arch

    if detect_arch() is None:
        pytest.skip("no NVIDIA GPU")
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    shown = []
    if "IPython" not in sys.modules:
        try:
            import IPython.display
        except ImportError:  # the GPU image may lack IPython: give the cell a display() to call
            ipy = types.ModuleType("IPython")
            ipy.version_info = (9, 0, 0)  # matplotlib looks at it when IPython is in sys.modules
            ipy.display = types.ModuleType("IPython.display")
            monkeypatch.setitem(sys.modules, "IPython", ipy)
            monkeypatch.setitem(sys.modules, "IPython.display", ipy.display)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", shown.append, raising=False)
    import tileworkbench
    from tileworkbench.examples.gemm import matmul_tma_copy

    gemm = tileworkbench.compile(matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32",
                                                 128, 3), out_idx=2)
    exec(_gpu_cell(), {"gemm": gemm})  # noqa: S102
    out = capsys.readouterr().out
    assert "matches torch" in out and "TFLOP/s" in out
    assert len(shown) == 1 and type(shown[0]).__name__ == "Figure"
