#!/usr/bin/env bash
# Everything that needs the GPU, in one call: every @gpu test, then the benchmarks, then a short table.
# Run on the H200 from the source tree:  bash scripts/gpu_check.sh  (writes under $OUT when set)
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader || true
# Every step has a time limit: a kernel that deadlocks must cost minutes, not the whole lease.
timeout -k 10 ${TEST_TIMEOUT:-420} python3 -m pytest -m gpu tests -q -rs -p no:cacheprovider --continue-on-collection-errors ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}
bench_rc=0
if [ "${SKIP_BENCH:-0}" != "1" ]; then
  timeout -k 10 ${BENCH_TIMEOUT:-420} python3 -m tileworkbench.bench gemm ${BENCH_ARGS:-} --out "$OUT" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi
echo
echo "== summary =="
grep -E "passed|failed" "$OUT/gpu_tests.log" | tail -1
[ -f "$OUT/table.md" ] && cat "$OUT/table.md"
exit $(( tests_rc != 0 || bench_rc != 0 ))
