#!/usr/bin/env bash
# Unit tests of the JupyterLab extension (extension/): install the node
# dependencies from the lockfile, type-check and compile the TypeScript, run
# jest. Needs only node and npm (no Python, no GPU, no browser), so it runs
# unattended in CI from a fresh clone. Exits non-zero on any failure.
#
# When a Python with jupyter-builder is at hand (.venv or PATH), it also
# bundles the labextension (rspack) into tileworkbench/labextension, which
# catches bundling errors early; set TW_SKIP_BUNDLE=1 to skip that step.
#
# Repeat runs take a fast path: `npm ci` is skipped while package-lock.json is
# what node_modules was installed from, and the bundle while nothing under
# extension/ (sources, configs, lockfile) changed since it was built (stamps in
# node_modules/.tw-lock.sha256 and tileworkbench/labextension/.tw-sources.sha256).
# TW_FULL_BUILD=1 does both anyway. A fresh clone (CI) always builds.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO/extension"

echo "node $(node --version), npm $(npm --version)"

# shellcheck source=scripts/extension_stamps.sh
. "$REPO/scripts/extension_stamps.sh"

echo "==> npm dependencies"
LOCK_HASH="$(lock_hash)"
if [ "${TW_FULL_BUILD:-0}" != 1 ] && [ -d node_modules ] && [ "$(cat node_modules/.tw-lock.sha256 2>/dev/null)" = "$LOCK_HASH" ]; then
  echo "up to date: package-lock.json unchanged since node_modules was installed (TW_FULL_BUILD=1 reinstalls)"
elif [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
  echo "$LOCK_HASH" > node_modules/.tw-lock.sha256
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
  if bundle_is_current "$REPO"; then
    echo "==> bundle up to date: nothing under extension/ changed since it was built (TW_FULL_BUILD=1 rebuilds)"
  elif [ -n "$BUILDER" ]; then
    echo "==> bundle the labextension (jupyter-builder from $BUILDER)"
    PATH="$BUILDER:$PATH" npm run build:labextension
    test -f "$REPO/tileworkbench/labextension/package.json"
    extension_sources_hash > "$REPO/tileworkbench/labextension/.tw-sources.sha256"
  else
    echo "==> bundle skipped: no jupyter-builder (pip install jupyter-builder, or use scripts/test_extension_browser.sh)"
  fi
fi

echo "extension unit tests passed"
