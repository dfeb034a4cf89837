"""The README's kernel is real code: it lowers and takes the Hopper path it advertises."""

import importlib.util
import pathlib
import re

import tileworkbench as tw

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_kernel_lowers(tmp_path):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    definition = code.split("import cupy")[0]  # the rest needs a GPU (tests/gpu/test_demo_gpu.py runs it)
    path = tmp_path / "readme_kernel.py"
    path.write_text(definition)
    spec = importlib.util.spec_from_file_location("readme_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    artifact = tw.lower(module.matmul(4096, 4096, 4096), target={"kind": "cuda", "arch": "sm_90"})
    assert "tw::wgmma_gemm_ss" in artifact.device_source
    # as the README says: warp-specialised, results out through one TMA store
    assert artifact.func.attrs["warp_specialized"]["applied"], artifact.func.attrs["warp_specialized"]
    assert "ws_producer" in artifact.trace.ir_after("warp_specialize")
    assert "tw::tma_store(C_desc" in artifact.device_source
