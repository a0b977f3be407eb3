#!/usr/bin/env bash
# One device session for issue 3: the GPU-labelled tests (differential tests with
# the default build path and again with the direct path forced, hashing device
# tests), the CUDA instances of the engine and hashing backend tests,
# compute-sanitizer memcheck (and racecheck) on a small filter that includes the
# partitioned build, then gpujoin-bench. Expects a bundle made by
# ../shared/tools/bundle-for-device in .gpu (see docs/PERFORMANCE.md); logs go to
# $OUT (or /tmp/gpujoin-device). Prints a short table last.
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
  summary+=("$(printf '%-18s rc=%-3s %4ss  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY|RACECHECK SUMMARY|targets met' "$out/$name.log" | tr '\n' ' ' | cut -c1-90)")")
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.log" 2>&1
step gpu_tests_part 45 env GPUJOIN_CUDA_BUILD_PATH=partitioned .gpu/bin/gpu_differential_tests
step gpu_tests_direct 40 env GPUJOIN_CUDA_BUILD_PATH=direct .gpu/bin/gpu_differential_tests
step hash_device 20 .gpu/bin/hashing_device_test
step hash_backend 20 .gpu/bin/hashing_backend_test
step engine_cuda 30 .gpu/bin/engine_tests --gtest_filter='*cuda*:*Cuda*'
small='Shapes/BuildLookupDifferential.*/rows1000_*:Shapes/JoinDifferential.*/left1000_*:Differential.Partitioned*:Differential.BatchBuild*:Differential.RepeatedLookupShape*'
step memcheck 50 compute-sanitizer --tool memcheck --error-exitcode 9 .gpu/bin/gpu_differential_tests --gtest_filter="$small"
step bench 70 .gpu/bin/gpujoin-bench
step racecheck 25 compute-sanitizer --tool racecheck --error-exitcode 9 .gpu/bin/gpu_differential_tests --gtest_filter='Differential.PartitionedBatch*:Differential.PartitionedOverflow*'
echo "== failures (first lines)"
grep -hE '^\[  FAILED|Failure|CHECK FAILED|ERROR SUMMARY|RACECHECK SUMMARY' "$out"/*.log | head -30
echo "== bench (build rows and targets)"
grep -E '^operation|^copy|build|lookup\+found\+stats, all hits|targets met' "$out/bench.log"
echo "== summary"
cat "$out/gpu.log"
printf '%s\n' "${summary[@]}"
