#!/usr/bin/env bash
# One device session for issue 3: the GPU-labelled differential tests with the
# default build paths (the tile path for large builds) and with each path forced
# (waves, direct, tiles), the device-level build tests (gpu_wave_build_tests:
# wave and tile paths, explicit values, position tags, hot keys), gpujoin-bench
# (build phases, lookups on tables from the default and the wave path) right
# after them, the hashing device tests, the CUDA instances of the engine tests
# (default paths, then the wave path forced) and hashing backend tests,
# compute-sanitizer memcheck and racecheck on small filters that include the
# forced wave path and the tile path's large-tile reduction. Expects a bundle
# made by ../shared/tools/bundle-for-device in $GPU_BUNDLE, default .gpu (see
# docs/PERFORMANCE.md); logs go to $OUT (or /tmp/gpujoin-device). Prints a short
# table last.
set -uo pipefail
bundle=${GPU_BUNDLE:-.gpu}  # the bundle directory (bundle-for-device)
source "$bundle/env.sh"
out=${OUT:-/tmp/gpujoin-device}
mkdir -p "$out"
STEP_LOGS=$out
source "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.log" 2>&1
step gpu_tests 60 $bundle/bin/gpu_differential_tests
step gpu_tests_waves 60 env GPUJOIN_CUDA_BUILD_PATH=waves $bundle/bin/gpu_differential_tests
step gpu_tests_direct 60 env GPUJOIN_CUDA_BUILD_PATH=direct $bundle/bin/gpu_differential_tests
step gpu_tests_tiles 60 env GPUJOIN_CUDA_BUILD_PATH=tiles $bundle/bin/gpu_differential_tests
step wave_build 30 $bundle/bin/gpu_wave_build_tests
step bench 120 $bundle/bin/gpujoin-bench
step hash_device 20 $bundle/bin/hashing_device_test
step hash_backend 20 $bundle/bin/hashing_backend_test
step engine_cuda 30 $bundle/bin/engine_tests --gtest_filter='*cuda*:*Cuda*'
step engine_cuda_waves 30 env GPUJOIN_CUDA_BUILD_PATH=waves $bundle/bin/engine_tests --gtest_filter='*cuda*:*Cuda*'
small='Shapes/BuildLookupDifferential.*/rows1000_*:Shapes/JoinDifferential.*/left1000_*'
small+=':Shapes/JoinDifferential.*/left33_*:Shapes/JoinDifferential.*/left129_*'
small+=':Shapes/JoinDifferential.*/left4096_*:Paths/ForcedPathDifferential.*:Differential.BatchBuild*:Differential.RepeatedLookupShape*'
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 $bundle/bin/gpu_differential_tests --gtest_filter="$small"
step memcheck_wave 60 compute-sanitizer --tool memcheck --error-exitcode 9 $bundle/bin/gpu_wave_build_tests --gtest_filter='*OneKey*:*Validity*:*ManyRegions*:*Spilled*:*TileOfMany*:*TileBuffer*'
race='Paths/ForcedPathDifferential.BatchBuildMatchesCpu/*'
race+=':Paths/ForcedPathDifferential.OverflowKeepsLowestRow/*:Shapes/JoinDifferential.*/left4096_*'
step racecheck 30 compute-sanitizer --tool racecheck --error-exitcode 9 $bundle/bin/gpu_differential_tests --gtest_filter="$race"
step racecheck_wave 40 compute-sanitizer --tool racecheck --error-exitcode 9 $bundle/bin/gpu_wave_build_tests --gtest_filter='*OneKey*:*Spilled*:*TileOfMany*'
echo "== failures (first lines)"
grep -hE '^\[  FAILED|Failure|CHECK FAILED|ERROR SUMMARY|RACECHECK SUMMARY' "$out"/*.log | head -30
echo "== bench (build rows, phases, lookups, targets)"
grep -E '^operation|^copy|build|phase|lookup\+found\+stats|waves|targets met' "$out/bench.log"
echo "== summary"
cat "$out/gpu.log"
printf '%s\n' "${summary[@]}"
