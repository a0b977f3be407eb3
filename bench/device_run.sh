#!/usr/bin/env bash
# One device session for issue 3: the device-level kernel tests, GPU differential
# tests, the engine tests on the cuda backend, gpujoin-bench, then
# compute-sanitizer (memcheck + racecheck) on the device-level kernel tests
# (every build strategy, small tables). Expects a bundle made by ../shared/tools/bundle-for-device in
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
step device_build 40 .gpu/bin/gpu_device_build_tests
step gpu_tests 100 .gpu/bin/gpu_differential_tests
# The same suite with the split insert forced (the region build's fallback).
GPUJOIN_CUDA_BUILD_STRATEGY=split step gpu_tests_split 100 .gpu/bin/gpu_differential_tests
step engine_cuda 60 .gpu/bin/engine_tests --gtest_filter='*cuda*:*Cuda*'
step bench 150 .gpu/bin/gpujoin-bench
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/bin/gpu_device_build_tests
step racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/bin/gpu_device_build_tests
echo "== failures (first lines)"
grep -hE '^\[  FAILED|Failure|CHECK FAILED|ERROR SUMMARY|RACECHECK SUMMARY' "$out"/*.log | head -40
echo "== bench"
tail -60 "$out/bench.log"
echo "== summary"
cat "$out/gpu.log"
printf '%s\n' "${summary[@]}"
