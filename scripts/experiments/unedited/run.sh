#!/bin/bash
# TileLang's example scripts, not edited at all, run by `python -m tileworkbench.as_tilelang FILE`
# in their own folder (their own inputs, kernel, check against torch, often a timing), or with
# WHO=tilelang by TileLang itself (its unpacked site on PYTHONPATH: SITE, default /tmp/tl).
#
#   EXAMPLES=/path/to/tilelang/examples OUT=/tmp/out bash scripts/experiments/unedited/run.sh LIST_FILE...
#
# EXAMPLES: a copy of TileLang's examples folder (the repository's `examples/`; on the device
# machine carry it, e.g. in .tilelang/); LIST_FILE: paths under it, whitespace-separated (this
# folder's lists: the scripts run in sessions 30 to 33; side_by_side3.txt is session 33's, docs/experiments.md). Knobs: PER (seconds a
# script, 60), BUDGET (seconds in all, 400), WHO (ours | tilelang | both). One line a script: its exit
# code, seconds, and the last lines it printed; each script's whole output in $OUT.
set -u
repo=$(cd "$(dirname "$0")/../../.." && pwd)
examples=${EXAMPLES:?set EXAMPLES to a copy of TileLang examples/}
out=${OUT:-/tmp/unedited}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
for f in $(cat "$@"); do
  for who in $( [ "${WHO:-ours}" = both ] && echo tilelang ours || echo "${WHO:-ours}" ); do
    now=$(date +%s)
    if [ $((now - start)) -gt "${BUDGET:-400}" ]; then echo "$f $who: not run (time)"; continue; fi
    log=$out/$who.$(echo "$f" | tr / _).log
    if [ "$who" = tilelang ]; then
      (cd "$examples/$(dirname "$f")" && PYTHONPATH=${SITE:-/tmp/tl} timeout "${PER:-60}" python3 "$(basename "$f")" > "$log" 2>&1)
    else
      (cd "$examples/$(dirname "$f")" && PYTHONPATH=$repo timeout "${PER:-60}" python3 -m tileworkbench.as_tilelang "$(basename "$f")" > "$log" 2>&1)
    fi
    rc=$?
    echo "$f $who: rc=$rc $(( $(date +%s) - now ))s | $(grep -v "Warning\|warnings.warn\|^\s*$\|@tilelang\|^  " "$log" | tail -2 | tr '\n' ' ' | cut -c1-200)"
  done
done
