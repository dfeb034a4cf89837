"""`make lab` starts JupyterLab even as root (containers, Binder-like machines), where JupyterLab
refuses to run without --allow-root; as anyone else it passes no such flag."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_passes_allow_root_exactly_when_running_as_root(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    jupyter = fake / "jupyter"
    jupyter.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\n')
    jupyter.chmod(0o755)
    # -o install: take the install target as done; BIN: our stand-in for the venv's jupyter
    subprocess.run(["make", "-s", "-o", "install", "lab", f"BIN={fake}"], cwd=ROOT, check=True, timeout=60)
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["lab", "notebooks/"]
    assert ("--allow-root" in args) == (os.geteuid() == 0)
