"""The Binder (repo2docker) setup installs the package with its extension and runs the notebooks."""

import os
import re
import stat

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_post_build_installs_the_package_and_checks_the_extension():
    path = os.path.join(REPO, "binder", "postBuild")
    assert os.stat(path).st_mode & stat.S_IXUSR, "postBuild must be executable"
    with open(path) as fh:
        text = fh.read()
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert re.search(r"pip install [^\n]*\s\"\.\[lab\]\"\s*$", text, re.MULTILINE), \
        "installs the repository (non-editable) with its notebook stack"
    assert "jupyter labextension list" in text and "tileworkbench" in text


def test_environment_has_python_node_and_the_notebook_runtime():
    with open(os.path.join(REPO, "binder", "environment.yml")) as fh:
        text = fh.read()
    assert re.search(r"^\s*- python=3\.1\d", text, re.MULTILINE)
    assert re.search(r"^\s*- nodejs>=", text, re.MULTILINE)  # the npm build of extension/
    for package in ("jupyterlab", "ipywidgets", "ipykernel"):
        assert package in text
    # no CUDA wheels with GPU drivers: the image is CPU-only
    assert "cupy" not in text and "torch" not in text
