"""The Makefile and the scripts it runs: `make lab` starts JupyterLab even as root (containers,
Binder-like machines), where JupyterLab refuses to run without --allow-root, and as anyone else
passes no such flag; a repeat `make test` reuses the extension's build only while its sources
stand still."""

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


def test_the_extension_fast_path_rebuilds_exactly_when_its_sources_change(tmp_path):
    """scripts/extension_stamps.sh: the bundle's stamp moves with any non-ignored file under
    extension/ and not with ignored build output; CI asks for the full build."""
    ext = tmp_path / "extension"
    (ext / "src").mkdir(parents=True)
    (ext / "src" / "index.ts").write_text("export const a = 1;\n")
    (ext / ".gitignore").write_text("lib/\nnode_modules/\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    script = ROOT / "scripts" / "extension_stamps.sh"

    def stamp():
        out = subprocess.run(["bash", "-c", f". {script} && extension_sources_hash"], cwd=ext,
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    first = stamp()
    (ext / "lib").mkdir()
    (ext / "lib" / "index.js").write_text("built\n")  # ignored output: no rebuild
    assert stamp() == first
    (ext / "src" / "index.ts").write_text("export const a = 2;\n")
    assert stamp() != first
    assert "export TW_FULL_BUILD=1" in (ROOT / ".ci" / "run").read_text()
