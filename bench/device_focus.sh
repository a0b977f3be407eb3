#!/usr/bin/env bash
# A short device session for the kernels a change touched, when device time is
# scarce: in order of priority, each step under its own timeout and all of them
# within DEADLINE seconds (default 270; a step that would start later is
# skipped and said so). Usage: bash bench/device_focus.sh BUNDLE_DIR. Logs go to
# $OUT (or /tmp/gpujoin-device); prints the bench rows and a summary last.
set -uo pipefail
bundle=${1:?usage: device_focus.sh BUNDLE_DIR}
source "$bundle/env.sh"
export GPUJOIN_REQUIRE_GPU=1
out=${OUT:-/tmp/gpujoin-device}
mkdir -p "$out"
STEP_LOGS=$out
here=$(dirname "$0")
source "$here/device_steps.sh"
bin=$bundle/bin
t_start=$(date +%s)
deadline=${DEADLINE:-270}
run() {  # run NAME TIMEOUT CMD...: a step when its binary exists and time is left
  local name=$1 limit=$2
  local left=$((deadline - ($(date +%s) - t_start)))
  if [ "$left" -lt 15 ]; then summary+=("$(printf '%-18s skipped (deadline)' "$name")"); return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  shift 2
  [ -x "$1" ] || [ "$1" = compute-sanitizer ] || [ "$1" = bash ] || [ "$1" = env ] || {
    summary+=("$(printf '%-18s missing %s' "$name" "$1")"); return; }
  step "$name" "$limit" "$@"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.log" 2>&1
run hash_device 90 $bin/hashing_device_test
run agg_typed 90 $bin/gpu_aggregate_typed_differential_tests
run bench_hash 40 $bin/gpujoin-bench --only=hash
run bench_agg 60 $bin/gpujoin-bench --only=aggregate --groups=256
run ncu_hash_agg 150 bash "$here/profile_run.sh" "$bundle" hash_agg
if command -v cuobjdump >/dev/null; then
  # Shared-memory atomics per accumulate kernel (ATOMS.ADD vs ATOMS.CAST.SPIN loops).
  timeout 60 cuobjdump -sass $bin/gpujoin-bench 2>/dev/null | awk '/Function :/{f=$3}
    /ATOMS/ && f ~ /AccumulateKernel/ {match($0, /ATOMS[.A-Z0-9]*/); c[f " " substr($0, RSTART, RLENGTH)]++}
    END {for (k in c) print c[k], k}' | sort -k2 > "$out/sass_agg_summary.log"
fi
run memcheck_hash 60 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/hashing_device_test --gtest_filter='*Resident*:*Issue22FlatTypes*:*Issue22Lists*:*EveryType*'
run memcheck_agg 60 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/gpu_aggregate_typed_differential_tests --gtest_filter='*rows100003_groups16_*:*rows100003_groups256_*:*rows1_*'
run racecheck_agg 60 compute-sanitizer --tool racecheck --error-exitcode 9 $bin/gpu_aggregate_typed_differential_tests --gtest_filter='*rows100003_groups256_*'
mkdir -p /tmp/gj-snap
run index_image 60 $bin/gpu_index_image_differential_tests
run snapshot_bench 60 $bin/gpujoin-snapshot-bench --backend cuda --keys 67108864 --dir /tmp/gj-snap --repeat 3
echo "== failures (first lines)"
grep -hE '^\[  FAILED|Failure|CHECK FAILED|FAIL:|ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]' "$out"/*.log | head -30
echo "== bench"
cat "$out"/bench_*.log "$out"/snapshot_bench.log 2>/dev/null | grep -E "^operation|^copy|^hash|^group|int64|restore|GB/s|targets met" | head -40
echo "== ncu hash/agg"
tail -60 "$out/ncu_hash_agg.log" 2>/dev/null
echo "== sass"
cat "$out/sass_agg_summary.log" 2>/dev/null
echo "== summary"
cat "$out/gpu.log"
printf '%s\n' "${summary[@]}"
