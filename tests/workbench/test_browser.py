"""The report in a real browser: headless Chromium renders it and every section is in the DOM."""

import os
import re
import shutil
import subprocess

import pytest

from tileworkbench import cli

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
GEMM_ARGS = ["1024", "1024", "1024", "128", "128", "32", "float16", "float16", "float32", "128", "3"]


def _chromium() -> str:
    found = shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):  # Debian: install it (the Makefile does too)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, env=env, check=False)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, timeout=900, env=env, check=False)
        found = shutil.which("chromium")
    if not found:
        pytest.skip("chromium is not installed and could not be installed with apt-get")
    return found


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert cli.main(["report", "tileworkbench.examples.gemm::matmul_tma_copy", "--args", *GEMM_ARGS,
                     "-o", str(out)]) == 0
    return out


def _browser(args, tmp_path, timeout=120):
    cmd = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def test_every_section_is_in_the_rendered_dom(report, tmp_path):
    run = _browser(["--dump-dom", report.as_uri()], tmp_path)
    dom = run.stdout
    assert "<html" in dom, run.stderr[-2000:]
    for name in ("pass-list", "passes", "device-source", "host-source", "smem", "barriers", "smem-timeline",
                 "barrier-timeline"):
        assert f'data-tw="{name}"' in dom, name
    passes = re.findall(r'class="tw-pass" data-pass="([^"]+)"', dom)
    assert "inject_software_pipeline" in passes and "lower_tma" in passes
    assert dom.count('data-tw="ir"') == len(passes) and dom.count('data-tw="diff"') == len(passes)
    assert 'class="tw-diff-add"' in dom  # a diff with added lines
    assert "tw::tma_load(A_desc" in dom  # device source
    assert "def launch(" in dom  # host source
    assert dom.count('class="tw-smem-buffer"') == 5  # A, B, the result tile over them, two barriers
    assert dom.count('class="tw-barrier-event"') > 100 and 'data-kind="wait"' in dom


def test_screenshot_is_not_blank(report, tmp_path):
    import matplotlib.image

    shot = tmp_path / "report.png"
    run = _browser([f"--screenshot={shot}", "--window-size=1280,2400", report.as_uri()], tmp_path)
    assert shot.exists(), run.stderr[-2000:]
    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1280
    # SVG boxes and text, not an empty page: many distinct colours
    distinct = {tuple(p) for p in (pixels[::8, ::8, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(distinct) > 20
