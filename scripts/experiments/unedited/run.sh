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
# WHO may also list runs in order ("tilelang ours base"): "base" runs the tileworkbench found in
# BASE (a folder holding another commit's tileworkbench/: `git archive COMMIT tileworkbench | tar
# -x -C BASE`), so that one call times a change against the commit before it beside TileLang
# (session 40's A/Bs); ROUNDS (1) repeats the list.
set -u
repo=$(cd "$(dirname "$0")/../../.." && pwd)
examples=${EXAMPLES:?set EXAMPLES to a copy of TileLang examples/}
out=${OUT:-/tmp/unedited}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
for round in $(seq "${ROUNDS:-1}"); do
for f in $(cat "$@"); do
  for who in $( [ "${WHO:-ours}" = both ] && echo tilelang ours || echo "${WHO:-ours}" ); do
    now=$(date +%s)
    if [ $((now - start)) -gt "${BUDGET:-400}" ]; then echo "$f $who: not run (time)"; continue; fi
    log=$out/$who.$(echo "$f" | tr / _).$round.log
    case $who in
      tilelang) (cd "$examples/$(dirname "$f")" && PYTHONPATH=${SITE:-/tmp/tl} timeout "${PER:-60}" python3 "$(basename "$f")" > "$log" 2>&1);;
      ours) (cd "$examples/$(dirname "$f")" && PYTHONPATH=$repo timeout "${PER:-60}" python3 -m tileworkbench.as_tilelang "$(basename "$f")" > "$log" 2>&1);;
      base) (cd "$examples/$(dirname "$f")" && PYTHONPATH=${BASE:?set BASE for the base runs} timeout "${PER:-60}" python3 -m tileworkbench.as_tilelang "$(basename "$f")" > "$log" 2>&1);;
      *) echo "WHO: tilelang, ours, base or both, not $who" >&2; exit 2;;
    esac
    rc=$?
    echo "$f round $round $who: rc=$rc $(( $(date +%s) - now ))s | $(grep -v "Warning\|warnings.warn\|^\s*$\|@tilelang\|^  " "$log" | tail -2 | tr '\n' ' ' | cut -c1-200)"
  done
done
done
