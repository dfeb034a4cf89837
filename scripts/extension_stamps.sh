# Content hashes that tell the extension's scripts whether a repeat run may reuse what an
# earlier one built (sourced by scripts/test_extension.sh and scripts/test_extension_browser.sh).
# Run from extension/.

lock_hash() {
  sha256sum package-lock.json 2>/dev/null | cut -d' ' -f1
}

# Every file under extension/ that is not ignored build output (sources, styles, configs, the
# lockfile), by content; outside a git checkout a fresh value each time, so nothing is reused.
extension_sources_hash() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -z . | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
  else
    echo "no-git-$$-$RANDOM"
  fi
}

# Whether $1/tileworkbench/labextension was bundled from extension/'s current sources (its stamp,
# written by test_extension.sh after a bundle, matches) and TW_FULL_BUILD does not ask for a build.
bundle_is_current() {
  [ "${TW_FULL_BUILD:-0}" != 1 ] && [ -f "$1/tileworkbench/labextension/package.json" ] \
    && [ "$(cat "$1/tileworkbench/labextension/.tw-sources.sha256" 2>/dev/null)" = "$(extension_sources_hash)" ]
}
