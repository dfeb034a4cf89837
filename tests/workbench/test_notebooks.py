"""Every notebook in notebooks/ executes without an error on this (CPU-only) machine."""

import glob
import os

import pytest

from tileworkbench.mime import BENCH_MIME, TRACE_MIME

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb")))


def test_the_notebooks_exist():
    names = [os.path.basename(p) for p in NOTEBOOKS]
    assert names == ["01_quickstart.ipynb", "02_pipelining.ipynb", "03_benchmarks.ipynb", "04_attention.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The kernel imports tileworkbench from this source tree (installed or not). jupyter_client
    # starts the "python3" kernel with this interpreter (it replaces the spec's "python").
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    if path.endswith("01_quickstart.ipynb"):
        bundles = [o["data"] for o in outputs if "data" in o]
        trace = next(d for d in bundles if TRACE_MIME in d)
        doc = trace[TRACE_MIME]
        assert doc["barriers"]["events"] and "text/html" in trace
        assert any("application/vnd.jupyter.widget-view+json" in d for d in bundles)  # the stepper
        text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert "No NVIDIA GPU here" in text or "matches torch" in text
    if path.endswith("02_pipelining.ipynb"):  # the measured timeline: this GPU's, or the recorded one
        bundles = [o["data"] for o in outputs if "data" in o]
        assert any('data-tw="measured-timeline"' in d.get("text/html", "") for d in bundles)
        text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert "protocol violations: 0 of" in text
    if path.endswith("04_attention.ipynb"):
        bundles = [o["data"] for o in outputs if "data" in o]
        assert any(TRACE_MIME in d for d in bundles)  # the overlapped kernel's workbench
        assert any("image/png" in d for d in bundles)  # the recorded benchmark's plot
        text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        assert "findings: none" in text and text.count("against float64") == 4
        assert "V_shared_empty" in text and "for (int k_1 = 1;" in text  # the overlapped loop, peeled


def test_benchmarks_notebook_plots_recorded_results(tmp_path, monkeypatch):
    """03_benchmarks with a recorded result present: a table, the machine it came from, a plot."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    import shutil

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "notebooks", "03_benchmarks.ipynb"), tmp_path / "notebooks")
    shutil.copy(os.path.join(REPO, "tests", "fixtures", "bench_sample.json"),
                tmp_path / "benchmarks" / "results" / "gemm-sample.json")
    # a record of another suite beside it is counted, not shown as a GEMM record
    (tmp_path / "benchmarks" / "results" / "tilelang-sample.json").write_text(
        '{"schema": "tileworkbench.tilelang-side-by-side", "version": 1, "rows": []}')
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(str(tmp_path / "notebooks" / "03_benchmarks.ipynb"), as_version=4)
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(tmp_path / "notebooks")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "1 recorded GEMM result file(s)" in text and "(1 other records)" in text and "Recorded on:" in text
    data = [o["data"] for o in outputs if "data" in o]
    assert any("image/png" in d for d in data)  # the TFLOP/s plot
    assert any(BENCH_MIME in d for d in data)
    assert any("NVIDIA H200" in d.get("text/html", "") for d in data)


def test_a_real_kernels_cells_are_named_as_jupyter_shows_them(monkeypatch):
    """Through ipykernel (where a cell's code lives in /tmp/ipykernel_NNNN/NNNN.py): the generated
    CUDA names the cell as Jupyter numbers it, `In [2], line L`, and so does a compile error (with
    IPython 9 the label was the next cell's number)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    kernel_cell = ("%%tilekernel double --no-display\n"
                   "import tileworkbench.language as T\n\n"
                   "@T.prim_func\n"
                   "def double(A: T.Tensor((256,), \"float32\"), B: T.Tensor((256,), \"float32\")):\n"
                   "    with T.Kernel(2, threads=128) as bx:\n"
                   "        for i in T.Parallel(128):\n"
                   "            B[bx * 128 + i] = A[bx * 128 + i] * {}\n")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext tileworkbench"),
        nbformat.v4.new_code_cell(kernel_cell.format("3.25")),
        nbformat.v4.new_code_cell("print([l for l in double.get_kernel_source().splitlines() if 'from In [' in l][0])"),
        nbformat.v4.new_code_cell(kernel_cell.format("A")),
    ])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=True).execute()
    banner = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert "from In [2], line 5 (double)" in banner and "ipykernel" not in banner  # its def line
    (error,) = [o for o in nb.cells[3].outputs if o.get("output_type") == "error"]
    message = error["evalue"]
    assert message.startswith("In [4], line 8") and "ipykernel" not in message
