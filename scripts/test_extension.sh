#!/usr/bin/env bash
# Unit tests of the JupyterLab extension (extension/): install the node
# dependencies from the lockfile, type-check and compile the TypeScript, run
# jest. Needs only node and npm (no Python, no GPU, no browser), so it runs
# unattended in CI from a fresh clone. Exits non-zero on any failure.
#
# When a Python with jupyter-builder is at hand (.venv or PATH), it also
# bundles the labextension (rspack) into tileworkbench/labextension, which
# catches bundling errors early; set TW_SKIP_BUNDLE=1 to skip that step.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO/extension"

echo "node $(node --version), npm $(npm --version)"

echo "==> npm dependencies"
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi

echo "==> compile (tsc)"
npm run build:lib

echo "==> jest"
RESULTS="$(mktemp)"
status=0
npm test -- --ci --json --outputFile="$RESULTS" || status=$?
# One plain "N passed, N failed" line for CI logs that read closing lines.
node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);' "$RESULTS" || true
rm -f "$RESULTS"
[ "$status" -eq 0 ] || exit "$status"

if [ "${TW_SKIP_BUNDLE:-0}" != 1 ]; then
  BUILDER=""
  if [ -x "$REPO/.venv/bin/jupyter-builder" ]; then
    BUILDER="$REPO/.venv/bin"
  elif command -v jupyter-builder >/dev/null 2>&1; then
    BUILDER="$(dirname "$(command -v jupyter-builder)")"
  fi
  if [ -n "$BUILDER" ]; then
    echo "==> bundle the labextension (jupyter-builder from $BUILDER)"
    PATH="$BUILDER:$PATH" npm run build:labextension
    test -f "$REPO/tileworkbench/labextension/package.json"
  else
    echo "==> bundle skipped: no jupyter-builder (pip install jupyter-builder, or use scripts/test_extension_browser.sh)"
  fi
fi

echo "extension unit tests passed"
