#!/usr/bin/env bash
# End-to-end browser test of the JupyterLab extension.
#
# Builds the wheel from a clean copy of the working tree (so the hatch
# jupyter-builder hook really runs npm and the build output of the tree is not
# reused), installs it with its dependencies into a fresh venv, checks that
# `jupyter labextension list` shows tileworkbench enabled, starts a token-less
# JupyterLab on 127.0.0.1:<free port>, and drives it with system Chromium
# through playwright-core (extension/ui-tests/trace.test.mjs).
#
# Usage: scripts/test_extension_browser.sh [--self-contained | --notebook PATH]
#   --notebook PATH   notebook to run, relative to the repo or absolute
#                     (default notebooks/01_quickstart.ipynb, also TW_NOTEBOOK)
#   --self-contained  run a generated notebook that displays
#                     tests/fixtures/trace_sample.json, bench_sample.json and
#                     trace_timeline.json (a trace with a measured timeline)
# Without either flag the default notebook is used when it exists, else the
# self-contained mode (with a notice).
#
# Environment: PYTHON (interpreter that builds the wheel and makes the venv;
# default .venv/bin/python, else python3), TW_KEEP_TMP=1 keeps the temp dir.
# Screenshots: extension/ui-tests/screenshots/. Exits non-zero on any failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXT="$REPO/extension"
DEFAULT_NOTEBOOK="notebooks/01_quickstart.ipynb"
NOTEBOOK="${TW_NOTEBOOK:-}"
MODE=auto

while [ $# -gt 0 ]; do
  case "$1" in
    --self-contained) MODE=self; shift ;;
    --notebook) NOTEBOOK="$2"; MODE=notebook; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ "$MODE" = auto ]; then
  if [ -n "$NOTEBOOK" ]; then
    MODE=notebook
  elif [ -f "$REPO/$DEFAULT_NOTEBOOK" ]; then
    MODE=notebook; NOTEBOOK="$DEFAULT_NOTEBOOK"
  else
    echo "NOTE: $DEFAULT_NOTEBOOK does not exist; using the self-contained notebook." >&2
    MODE=self
  fi
fi
if [ "$MODE" = notebook ]; then
  case "$NOTEBOOK" in /*) NB_FILE="$NOTEBOOK" ;; *) NB_FILE="$REPO/$NOTEBOOK" ;; esac
  if [ ! -f "$NB_FILE" ]; then
    echo "ERROR: notebook $NB_FILE not found" >&2
    exit 2
  fi
fi

if [ -z "${PYTHON:-}" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi

step() { printf '\n==> %s (%ss)\n' "$*" "$SECONDS"; }

WORK="$(mktemp -d /tmp/tw-browser-test.XXXXXX)"
SERVER_PID=""
cleanup() {
  local status=$?
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    # The server was started with setsid: its id is also its process-group id,
    # so this ends the server and the kernels it started, and nothing else.
    kill -TERM -- "-$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ] && [ -f "$WORK/jupyter.log" ]; then
    echo "---- last lines of the JupyterLab log ----" >&2
    tail -n 40 "$WORK/jupyter.log" >&2 || true
  fi
  if [ "${TW_KEEP_TMP:-0}" = 1 ]; then
    echo "kept $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$status"
}
trap cleanup EXIT INT TERM

step "browser"
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" != 0 ]; then
    # Installing a browser needs root; as anyone else the browser test is skipped, saying how to get it.
    echo "SKIPPED browser test: it drives Chromium at /usr/bin/chromium, which is not installed; as root," \
         "apt-get install chromium (Debian/Ubuntu), then run make test again" >&2
    exit 0
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
/usr/bin/chromium --version

step "node dependencies (playwright-core)"
if [ ! -d "$EXT/node_modules/playwright-core" ]; then
  (cd "$EXT" && npm ci --no-audit --no-fund)
fi

step "clean copy of the working tree"
SRC="$WORK/src"
mkdir -p "$SRC"
if git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Tracked plus untracked-but-not-ignored files: what a commit would contain.
  (cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$SRC")
else
  tar -C "$REPO" --exclude=.venv --exclude=node_modules --exclude=.git \
    --exclude=tileworkbench/labextension --exclude=extension/lib -cf - . | tar -C "$SRC" -xf -
fi
if [ ! -f "$SRC/README.md" ]; then
  # pyproject names README.md as the readme; it belongs to the Python package,
  # not to this test, so a missing one is reported but does not block it.
  echo "WARNING: README.md is missing from the repository; using a placeholder in the test copy." >&2
  echo "# tileworkbench" >"$SRC/README.md"
fi

# Fast path: where test_extension.sh just bundled the labextension from these very sources,
# the copy takes it along and the wheel's build hook skips npm (skip-if-exists); a fresh clone,
# changed sources or TW_FULL_BUILD=1 build it inside the copy, as a user's `pip install` does.
# shellcheck source=scripts/extension_stamps.sh
. "$REPO/scripts/extension_stamps.sh"
if (cd "$EXT" && bundle_is_current "$REPO"); then
  echo "reusing tileworkbench/labextension: built from the current extension/ sources (TW_FULL_BUILD=1 rebuilds)"
  cp -r "$REPO/tileworkbench/labextension" "$SRC/tileworkbench/labextension"
fi

step "build the wheel (hatch-jupyter-builder runs the npm build unless the bundle came along)"
"$PYTHON" -m pip wheel -v --no-deps -w "$WORK/dist" "$SRC" >"$WORK/wheel.log" 2>&1 || {
  tail -n 60 "$WORK/wheel.log" >&2
  exit 1
}
grep -E "hatch_jupyter_builder|Rspack|compiled" "$WORK/wheel.log" || true
WHEEL="$(ls "$WORK"/dist/tileworkbench-*.whl)"
# The listing is read whole first: under pipefail, `unzip -l | grep -q` fails whenever grep finds the
# file and exits before unzip has written the rest (SIGPIPE), as a fresh-clone CI run did once.
WHEEL_FILES="$(unzip -l "$WHEEL")"
grep -q "share/jupyter/labextensions/tileworkbench/package.json" <<<"$WHEEL_FILES" || {
  echo "ERROR: the wheel does not ship the labextension" >&2
  exit 1
}

step "install the wheel into a fresh venv"
"$PYTHON" -m venv "$WORK/venv"
VENV="$WORK/venv"
# pip notes the local find-links/index folders that lack a package; keep the log readable.
"$VENV/bin/python" -m pip install -q "${WHEEL}[lab]" 2>&1 | { grep -v "is ignored: it is neither" || true; }
# No news or update pop-ups over the page under test (they would also try the network).
mkdir -p "$VENV/share/jupyter/lab/settings"
echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' \
  >"$VENV/share/jupyter/lab/settings/overrides.json"

# Keep Jupyter's config, data and runtime files out of $HOME and away from any
# other installation's kernels or settings.
export JUPYTER_CONFIG_DIR="$WORK/jupyter/config"
export JUPYTER_DATA_DIR="$WORK/jupyter/data"
export JUPYTER_RUNTIME_DIR="$WORK/jupyter/runtime"
export IPYTHONDIR="$WORK/ipython"
export JUPYTER_PLATFORM_DIRS=1

step "jupyter labextension list"
"$VENV/bin/jupyter" labextension list >"$WORK/labext.txt" 2>&1
cat "$WORK/labext.txt"
grep -Eq "^[[:space:]]*tileworkbench v[^ ]+ .*enabled.*OK" "$WORK/labext.txt" || {
  echo "ERROR: tileworkbench is not listed as enabled and OK" >&2
  exit 1
}

step "notebook ($MODE)"
ROOT="$WORK/root"
mkdir -p "$ROOT"
FIXTURE=""
TIMELINE_FIXTURE=""
if [ "$MODE" = self ]; then
  cp "$REPO/tests/fixtures/trace_sample.json" "$REPO/tests/fixtures/bench_sample.json" \
    "$REPO/tests/fixtures/trace_timeline.json" "$ROOT/"
  "$VENV/bin/python" - "$ROOT/trace_demo.ipynb" <<'PY'
import json, sys
# Bundles carry text/html and text/plain fallbacks, as the package's own
# display does, so the test also checks that JupyterLab picks our renderer.
show = ("def show(mime, path):\n"
        "    doc = json.load(open(path))\n"
        "    display({mime: doc, 'text/html': '<p>static fallback</p>', 'text/plain': 'fallback'}, raw=True)\n")
cells = [
    ("markdown", "# tileworkbench renderer test\nDisplays the fixture trace, benchmark record and measured timeline."),
    ("code", "import json\nfrom IPython.display import display\n\n" + show),
    ("code", "show('application/vnd.tileworkbench.trace.v1+json', 'trace_sample.json')"),
    ("code", "show('application/vnd.tileworkbench.bench.v1+json', 'bench_sample.json')"),
    # Last, so the first trace output stays trace_sample.json (the checks count its passes).
    ("code", "show('application/vnd.tileworkbench.trace.v1+json', 'trace_timeline.json')"),
]
nb = {
    "nbformat": 4, "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "cells": [
        {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": src,
         **({"outputs": [], "execution_count": None} if kind == "code" else {})}
        for i, (kind, src) in enumerate(cells)
    ],
}
json.dump(nb, open(sys.argv[1], "w"), indent=1)
PY
  NB_PATH="trace_demo.ipynb"
  FIXTURE="$ROOT/trace_sample.json"
  TIMELINE_FIXTURE="$ROOT/trace_timeline.json"
elif [ "${NB_FILE#"$REPO"/}" != "$NB_FILE" ] && [ -f "$SRC/${NB_FILE#"$REPO"/}" ]; then
  # A repository notebook runs inside the clean copy, so relative paths work
  # and the browser session never modifies the repository's own file.
  ROOT="$SRC"
  NB_PATH="${NB_FILE#"$REPO"/}"
else
  # A notebook from elsewhere runs in a copy of its folder.
  mkdir -p "$ROOT/nb"
  cp -r "$(dirname "$NB_FILE")/." "$ROOT/nb/"
  NB_PATH="nb/$(basename "$NB_FILE")"
fi

step "start JupyterLab"
PORT="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
setsid "$VENV/bin/jupyter" lab --no-browser --allow-root \
  --ServerApp.ip=127.0.0.1 --ServerApp.port="$PORT" --ServerApp.port_retries=0 \
  --IdentityProvider.token= --ServerApp.password= \
  --ServerApp.root_dir="$ROOT" \
  --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
  --LabApp.expose_app_in_browser=True \
  >"$WORK/jupyter.log" 2>&1 &
SERVER_PID=$!
URL="http://127.0.0.1:$PORT"
for i in $(seq 1 120); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "ERROR: JupyterLab exited during start-up" >&2
    exit 1
  fi
  if curl -fsS "$URL/api" >/dev/null 2>&1; then
    echo "JupyterLab ready at $URL after $i polls"
    break
  fi
  if [ "$i" -eq 120 ]; then
    echo "ERROR: JupyterLab did not answer $URL/api within 60 s" >&2
    exit 1
  fi
  sleep 0.5
done

step "browser test"
SHOTS="$EXT/ui-tests/screenshots"
rm -rf "$SHOTS"
mkdir -p "$SHOTS"
(cd "$EXT" && TW_LAB_URL="$URL" TW_NOTEBOOK="$NB_PATH" TW_FIXTURE="$FIXTURE" \
  TW_TIMELINE_FIXTURE="$TIMELINE_FIXTURE" TW_SCREENSHOTS="$SHOTS" \
  node --test --test-reporter=spec ui-tests/trace.test.mjs)

step "done: screenshots in $SHOTS"
ls "$SHOTS"
# TW_README_IMAGES=1: refresh the pictures README.md shows (docs/img) from this run.
if [ "${TW_README_IMAGES:-0}" = "1" ]; then
  for shot in stepper-stepped stepper-side-by-side stepper-dark source smem-timeline barrier-timeline; do
    cp "$SHOTS/$shot.png" "$REPO/docs/img/$shot.png"
  done
  step "README images refreshed in docs/img"
fi
