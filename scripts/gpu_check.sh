#!/usr/bin/env bash
# Everything that needs the GPU, in one call: every @gpu test, then the benchmarks (GEMM vs cuBLAS, TileLang's
# programs vs TileLang, attention vs torch SDPA and TileLang, the host time per launch, what a measured timeline
# costs), then a short table.
# Run on the H200 from the source tree:  bash scripts/gpu_check.sh  (writes under $OUT when set)
# Knobs: SKIP_TESTS=1, SKIP_BENCH=1, SKIP_TILELANG=1, SKIP_LAUNCH=1, SKIP_ATTENTION=1, SKIP_TIMELINE=1, BENCH_ARGS="--quick",
# TILELANG_FAMILIES=attention,gemm_fp8, ATTENTION_ROWS=8192x128,decode, *_TIMEOUT (a session's device time can split it in two calls).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader || true
# Every step has a time limit: a kernel that deadlocks must cost minutes, not the whole lease.
tests_rc=0
if [ "${SKIP_TESTS:-0}" != "1" ]; then
  timeout -k 10 ${TEST_TIMEOUT:-420} python3 -m pytest -m gpu tests -q -rs -p no:cacheprovider --continue-on-collection-errors ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log"
  tests_rc=${PIPESTATUS[0]}
fi
bench_rc=0
if [ "${SKIP_BENCH:-0}" != "1" ]; then
  timeout -k 10 ${BENCH_TIMEOUT:-420} python3 -m tileworkbench.bench gemm ${BENCH_ARGS:-} --out "$OUT" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi
# TileLang 0.1.15 side by side where its unpacked site travels along (docs/tilelang.md); ours alone otherwise
if [ -f .tilelang/site.tar.xz ] && [ ! -d /tmp/tl/tilelang ]; then
  mkdir -p /tmp/tl && tar -xJf .tilelang/site.tar.xz -C /tmp/tl
fi
[ -d /tmp/tl/tilelang ] && TL_PATH=:/tmp/tl || TL_PATH=
launch_rc=0
if [ "${SKIP_LAUNCH:-0}" != "1" ]; then
  PYTHONPATH=$PYTHONPATH$TL_PATH timeout -k 10 ${LAUNCH_TIMEOUT:-180} python3 -m tileworkbench.bench launch --out "$OUT" 2>&1 \
    | grep -v "TileLang:tilelang" | tee "$OUT/launch.log"
  launch_rc=${PIPESTATUS[0]}
fi
tl_rc=0
if [ "${SKIP_TILELANG:-0}" != "1" ]; then
  PYTHONPATH=$PYTHONPATH$TL_PATH timeout -k 10 ${TILELANG_TIMEOUT:-300} python3 -m tileworkbench.bench tilelang ${TILELANG_FAMILIES:+--families $TILELANG_FAMILIES} --out "$OUT" 2>&1 \
    | grep -v "TileLang:tilelang" | tee "$OUT/tilelang.log"
  tl_rc=${PIPESTATUS[0]}
fi
attn_rc=0
if [ "${SKIP_ATTENTION:-0}" != "1" ]; then
  PYTHONPATH=$PYTHONPATH$TL_PATH timeout -k 10 ${ATTENTION_TIMEOUT:-420} python3 -m tileworkbench.bench attention ${ATTENTION_ROWS:+--rows $ATTENTION_ROWS} --out "$OUT" 2>&1 \
    | grep -v "TileLang:tilelang" | tee "$OUT/attention.log"
  attn_rc=${PIPESTATUS[0]}
fi
timeline_rc=0
if [ "${SKIP_TIMELINE:-0}" != "1" ]; then
  timeout -k 10 ${TIMELINE_TIMEOUT:-300} python3 -m tileworkbench.bench timeline --out "$OUT" 2>&1 | tee "$OUT/timeline.log"
  timeline_rc=${PIPESTATUS[0]}
fi
echo
echo "== summary =="
[ -f "$OUT/gpu_tests.log" ] && grep -E "passed|failed" "$OUT/gpu_tests.log" | tail -1
[ -f "$OUT/table.md" ] && cat "$OUT/table.md"
[ -f "$OUT/launch.log" ] && grep "^|" "$OUT/launch.log"
[ -f "$OUT/tilelang.log" ] && grep "^|" "$OUT/tilelang.log"
[ -f "$OUT/attention.log" ] && grep -E "^\||^- " "$OUT/attention.log"
[ -f "$OUT/timeline.log" ] && grep "^|" "$OUT/timeline.log"
exit $(( tests_rc != 0 || bench_rc != 0 || tl_rc != 0 || launch_rc != 0 || attn_rc != 0 || timeline_rc != 0 ))
