#!/usr/bin/env bash
# One device session for issue 3: GPU differential tests, the engine tests on the
# cuda backend, compute-sanitizer (memcheck + racecheck) on a small filter, then
# gpujoin-bench. Expects a bundle made by ../shared/tools/bundle-for-device in
# .gpu (see docs/PERFORMANCE.md); logs go to $OUT (or /tmp/gpujoin-device).
set -uo pipefail
source .gpu/env.sh
out=${OUT:-/tmp/gpujoin-device}
mkdir -p "$out"
summary=()
step() {  # step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$name.log" | tr '\n' ' ' | cut -c1-80)")")
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.log" 2>&1
step gpu_tests 240 .gpu/bin/gpu_differential_tests
step engine_cuda 120 .gpu/bin/engine_tests --gtest_filter='*cuda*:*Cuda*'
small='Shapes/BuildLookupDifferential.*/rows1000_*:Shapes/JoinDifferential.*/left1000_*:Shapes/AggregateDifferential.*/rows1000_*:Shapes/AggregateDifferential.*/rows100003_groups17_*:Differential.RepeatedLookupShape*:Differential.BatchBuild*'
step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/bin/gpu_differential_tests --gtest_filter="$small"
step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/bin/gpu_differential_tests --gtest_filter="$small"
step bench 200 .gpu/bin/gpujoin-bench
echo "== failures (first lines)"
grep -hE '^\[  FAILED|Failure|CHECK FAILED|ERROR SUMMARY|RACECHECK SUMMARY' "$out"/*.log | head -40
echo "== bench"
tail -40 "$out/bench.log"
echo "== summary"
cat "$out/gpu.log"
printf '%s\n' "${summary[@]}"
