#!/usr/bin/env bash
# The whole suite, as CI runs it: Python tests (GPU tests skip without a GPU), then the
# JupyterLab extension's tests. Exit code 5 from pytest (no tests collected) is a failure.
set -u
cd "$(dirname "$0")/.."
BIN=.venv/bin
status=0

# Undefined names, unused imports and syntax errors first (a broken branch of the parser once
# passed every test: nothing exercised it).
$BIN/ruff check --select F,E9 --output-format concise tileworkbench scripts tests || status=1

$BIN/python -m pytest -q -rs tests
rc=$?
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests: that is a failure, not a pass" >&2
  status=1
elif [ $rc -ne 0 ]; then
  status=1
fi

for script in scripts/test_extension.sh scripts/test_extension_browser.sh; do
  if [ -f "$script" ]; then
    echo "== $script"
    bash "$script" || status=1
  fi
done
exit $status
