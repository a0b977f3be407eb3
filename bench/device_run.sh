#!/usr/bin/env bash
# One device session: every GPU test binary with GPUJOIN_REQUIRE_GPU=1 (a GPU
# test that skips is a failure here), gpujoin-bench right after them, the
# cuCollections reference benchmark when the bundle has it (bin/cuco_bench, built
# by ../shared/tools/cuco-bench/build.sh), and compute-sanitizer memcheck and
# racecheck on small filters. Usage:
#   bash bench/device_run.sh BUNDLE_DIR
# BUNDLE_DIR was made by ../shared/tools/bundle-for-device (bench/README.md
# lists the binaries). Logs go to $OUT/logs.tar.gz (or /tmp/gpujoin-device).
# Prints a short table last. STEPS=REGEX and DEADLINE=S (device_steps.sh) split
# the steps over several calls of at most 10 minutes each.
set -uo pipefail
bundle=${1:?usage: device_run.sh BUNDLE_DIR}
source "$bundle/env.sh"
export GPUJOIN_REQUIRE_GPU=1
out=${OUT:-/tmp/gpujoin-device}
logs=$out/logs
mkdir -p "$logs"
STEP_LOGS=$logs
here=$(cd "$(dirname "$0")" && pwd)
source "$here/device_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$logs/gpu.log" 2>&1
bin=$bundle/bin
has() { [ -x "$bin/$1" ]; }
step gpu_tests 300 $bin/gpu_differential_tests
step tile_build 60 $bin/gpu_tile_build_tests
has gpu_payload_differential_tests && step payload 120 $bin/gpu_payload_differential_tests
has gpu_multi_value_differential_tests && step multi_value 180 $bin/gpu_multi_value_differential_tests
has gpu_key_columns_differential_tests && step key_columns 120 $bin/gpu_key_columns_differential_tests
has gpu_aggregate_differential_tests && step aggregate 120 $bin/gpu_aggregate_differential_tests
has gpu_aggregate_graph_tests && step aggregate_graphs 60 $bin/gpu_aggregate_graph_tests
has gpu_aggregate_typed_differential_tests && step aggregate_typed 180 \
  $bin/gpu_aggregate_typed_differential_tests
# Typed aggregation on the small shapes of each path: memcheck, and
# racecheck on the shared-memory paths (block-shared, shared-range).
agg_typed_small='*rows100003_groups16_*:*rows100003_groups256_*:*rows100003_groups257*:*rows1000_*:*rows5001_*'
has gpu_aggregate_typed_differential_tests && step memcheck_aggregate_typed 300 compute-sanitizer \
  --tool memcheck --error-exitcode 9 $bin/gpu_aggregate_typed_differential_tests \
  --gtest_filter="$agg_typed_small"
has gpu_aggregate_typed_differential_tests && step racecheck_aggregate_typed 300 compute-sanitizer \
  --tool racecheck --error-exitcode 9 $bin/gpu_aggregate_typed_differential_tests \
  --gtest_filter='*rows100003_groups256_*:*rows5001_*:*rows100003_groups257*'
# Float32 and count nodes through the backend (uploads, one call, widened
# output words) on small shapes, and their captured graphs: memcheck.
agg_small='Shapes/AggregateDifferential.*/rows0_*:*/rows1_*:*/rows1000_*:*rows100003_groups16_*'
agg_small+=':*rows100003_groups257_*'
has gpu_aggregate_differential_tests && step memcheck_aggregate 240 compute-sanitizer \
  --tool memcheck --error-exitcode 9 $bin/gpu_aggregate_differential_tests \
  --gtest_filter="$agg_small"
has gpu_aggregate_graph_tests && step memcheck_aggregate_graphs 240 compute-sanitizer \
  --tool memcheck --error-exitcode 9 $bin/gpu_aggregate_graph_tests
has gpu_memory_budget_tests && step memory_budget 60 $bin/gpu_memory_budget_tests
has gpu_sticky_error_tests && step sticky_error 60 $bin/gpu_sticky_error_tests
has gpu_host_buffer_tests && step host_buffer 60 $bin/gpu_host_buffer_tests
# Index images and snapshots: CUDA vs CPU exports and cross-backend
# imports, the snapshot service tests on CUDA, the 2^26-key restore rate.
has gpu_index_image_differential_tests && step index_images 60 $bin/gpu_index_image_differential_tests
has gpu_index_image_differential_tests && step memcheck_images 180 compute-sanitizer --tool memcheck \
  --error-exitcode 9 $bin/gpu_index_image_differential_tests
has server_snapshot_integration_tests && step snapshots_service 180 env GPUJOIN_TEST_BACKEND=cuda \
  GPUJOIND=$bin/gpujoind $bin/server_snapshot_integration_tests
has gpujoin-snapshot-bench && step snapshot_bench 240 $bin/gpujoin-snapshot-bench --backend cuda \
  --keys 67108864 --dir /tmp
# Plans on the device: random row and aggregate plans against the CPU
# backend's host path (engine_tests' cuda cases), under memcheck and
# racecheck; the plan against its nodes back to back over 2^24 rows, and
# over 64K, 4K and 256 rows with CUDA Graph replay on and off.
plans='*PlanDevice*cuda*:*PlanReplay*cuda*:*PlanTest*cuda*:*PlanFilter*cuda*'
has engine_tests && step plans_device 180 $bin/engine_tests --gtest_filter="$plans"
has engine_tests && step memcheck_plans 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $bin/engine_tests --gtest_filter='*PlanDevice*cuda*:*PlanReplay*cuda*'
has engine_tests && step racecheck_plans 240 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $bin/engine_tests --gtest_filter='*PlanDevice*cuda*:*PlanReplay*cuda*'
has gpujoin-plan-bench && step plan_bench 120 $bin/gpujoin-plan-bench --backend cuda --rows 16777216
has gpujoin-plan-bench && step plan_bench_small 120 bash -c "for r in 65536 4096 256; do for g in on off; do $bin/gpujoin-plan-bench --backend cuda --rows \$r --repeat 21 --graphs \$g; done; done"
# A 256-key plan over 3 indexes against one and three lookups, on a CUDA
# gpujoind (docs/PERFORMANCE.md, "Plans").
has gpujoin-query-bench && step query_bench 120 bash -c "\"$bin/gpujoind\" \
  --listen=127.0.0.1:50077 --metrics-listen=none --backend=cuda & p=\$!; sleep 4; \
  \"$bin/gpujoin-query-bench\" --target 127.0.0.1:50077 --repeat 2000; rc=\$?; \
  kill \$p; wait \$p; exit \$rc"
# Service faults on the CUDA backend: budget exhaustion by staging, rebuilds
# under eight checking streams, a client killed mid-stream (gpujoind and
# gpujoin_vanishing_client from the bundle).
has server_fault_tests && step faults 120 env GPUJOIN_TEST_BACKEND=cuda GPUJOIND=$bin/gpujoind \
  $bin/server_fault_tests
has server_snapshot_fault_tests && step snapshot_faults 180 env GPUJOIN_TEST_BACKEND=cuda \
  GPUJOIND=$bin/gpujoind $bin/server_snapshot_fault_tests
has server_key_type_integration_tests && step key_types 120 env GPUJOIN_TEST_BACKEND=cuda \
  GPUJOIND=$bin/gpujoind $bin/server_key_type_integration_tests
has server_payload_integration_tests && step payload_service 120 env GPUJOIN_TEST_BACKEND=cuda \
  GPUJOIND=$bin/gpujoind $bin/server_payload_integration_tests
# Mutations: CUDA and CPU index images compared after every random
# upsert/delete batch; the service's Mutate on CUDA.
has gpu_mutation_differential_tests && step mutation 180 $bin/gpu_mutation_differential_tests
has gpu_mutation_differential_tests && step memcheck_mutation 300 compute-sanitizer --tool memcheck \
  --error-exitcode 9 $bin/gpu_mutation_differential_tests
has server_mutate_integration_tests && step mutate_service 180 env GPUJOIN_TEST_BACKEND=cuda \
  GPUJOIND=$bin/gpujoind $bin/server_mutate_integration_tests
has server_key_columns_integration_tests && step key_columns_service 120 env \
  GPUJOIN_TEST_BACKEND=cuda GPUJOIND=$bin/gpujoind $bin/server_key_columns_integration_tests
# The Python suites with every gpujoind on CUDA: routers over CUDA shards, the
# randomized plans, mutations, dictionaries and key schemas (the bundle's
# python/ holds the generated stubs; python3 there has grpcio, numpy, pandas,
# pytest and pytest-xdist; its protobuf reads Debian's generated stubs only in
# its pure-Python implementation). Not the ones that check for pip.
has gpujoin-router && [ -d "$bundle/python" ] && step python_cuda 480 env GPUJOIN_TEST_BACKEND=cuda \
  PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python \
  GPUJOIN_TEST_TIMEOUT=180 PYTHONPATH="$here/../client/python:$bundle/python" python3 -m pytest \
  -q -p no:cacheprovider -n 8 --rootdir="$here/../tests/python" --gpujoind="$bin/gpujoind" \
  "$here/../tests/python" --ignore="$here/../tests/python/client_test.py" \
  --ignore="$here/../tests/python/test_client.py" \
  --ignore="$here/../tests/python/test_install.py" --ignore="$here/../tests/python/test_dask.py"
# Several GPUs (issue 38): gpujoind --devices over all of them, its tests on
# CUDA, then 64K-row lookups at 16 streams through one device and through all.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -ge 2 ] && [ -d "$bundle/python" ]; then
  step devices_cuda 300 env GPUJOIN_TEST_BACKEND=cuda GPUJOIN_TEST_CUDA_DEVICES=$gpus \
    PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python PYTHONPATH="$here/../client/python:$bundle/python" \
    python3 -m pytest -q -p no:cacheprovider --rootdir="$here/../tests/python" \
    --gpujoind="$bin/gpujoind" "$here/../tests/python/test_devices.py"
  for d in 0 all; do
    step devices_service_$d 120 env GPUJOIND_ARGS="--devices=$d" KEYS=16M ROWS=64K CONC=16 \
      bash "$here/../loadtest/run-service-table.sh" "$bin/gpujoind" "$bin/gpujoin-loadtest" \
      "$logs/devices-$d" cuda
  done
  # Replicated: every device holds the whole index; 100- and 64K-row batches take turns.
  step devices_service_replicated 120 env GPUJOIND_ARGS="--devices=all" KEYS=16M \
    ROWS=100,64K CONC=16 bash "$here/../loadtest/run-service-table.sh" "$bin/gpujoind" \
    "$bin/gpujoin-loadtest" "$logs/devices-replicated" cuda --replicated
  # Device-resident: one index over every GPU against one GPU (gpujoin-bench devices).
  step devices_bench 180 $bin/gpujoin-bench --only '^devices$'
fi
step bench 180 $bin/gpujoin-bench
has cuco_bench && step cuco 120 $bin/cuco_bench
step hash_device 120 $bin/hashing_device_test
step hash_backend 60 $bin/hashing_backend_test
# Device hashing (new flat types, dictionaries, lists of flat values).
step memcheck_hash 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $bin/hashing_device_test --gtest_filter='*Issue22*'
step engine_cuda 60 $bin/engine_tests --gtest_filter='*cuda*:*Cuda*'
small='Shapes/BuildLookupDifferential.*/*_rows1000_*:Shapes/JoinDifferential.*/*_left1000_*'
small+=':Shapes/JoinDifferential.*/*_left33_*:Shapes/JoinDifferential.*/*_left129_*'
small+=':Shapes/JoinDifferential.*/*_left4096_*:Paths/ForcedPathDifferential.*:*Differential.BatchBuild*'
small+=':*Differential.RepeatedLookupShape*:TransientCapDifferential.*'
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/gpu_differential_tests --gtest_filter="$small"
step memcheck_tile 90 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/gpu_tile_build_tests --gtest_filter='*OneKey*:*Validity*:*TileOfMany*:*LongRun*:*TransientCap*'
race='Paths/ForcedPathDifferential.BatchBuildMatchesCpu/*'
race+=':Paths/ForcedPathDifferential.OverflowKeepsLowestRow/*:Shapes/JoinDifferential.*/*_left4096_*'
step racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 $bin/gpu_differential_tests --gtest_filter="$race"
has gpu_key_columns_differential_tests && step memcheck_key_columns 240 compute-sanitizer \
  --tool memcheck --error-exitcode 9 $bin/gpu_key_columns_differential_tests
has gpu_key_columns_differential_tests && step racecheck_key_columns 240 compute-sanitizer \
  --tool racecheck --error-exitcode 9 $bin/gpu_key_columns_differential_tests
has gpu_payload_differential_tests && step memcheck_payload 240 compute-sanitizer --tool memcheck \
  --error-exitcode 9 $bin/gpu_payload_differential_tests --gtest_filter='Paths/PayloadDifferential.*'
pay_race='Paths/PayloadDifferential.JoinGathersPerPairLikeCpu/direct_*'
pay_race+=':Paths/PayloadDifferential.BatchBuildWithMasksLikeCpu/tiles_*'
has gpu_payload_differential_tests && step racecheck_payload 120 compute-sanitizer --tool racecheck \
  --error-exitcode 9 $bin/gpu_payload_differential_tests --gtest_filter="$pay_race"
# Multi-value indexes and join kinds: every test but the large hot-key
# one on one key word per build path under memcheck; racecheck on the joins of
# every kind (the merge-path scatter shares memory within a block) and a batch build.
mv_mem='Paths/MultiValueDifferential.*/direct_u32:Paths/MultiValueDifferential.*/tiles_u64'
mv_mem+=':-*HotKeySpreadsOverManyBlocks*'
has gpu_multi_value_differential_tests && step memcheck_multi_value 300 compute-sanitizer \
  --tool memcheck --error-exitcode 9 $bin/gpu_multi_value_differential_tests --gtest_filter="$mv_mem"
mv_race='Paths/MultiValueDifferential.EveryJoinKindLikeCpu/direct_u32'
mv_race+=':Paths/MultiValueDifferential.BatchBuildAndBatchJoinsLikeCpu/tiles_u64'
has gpu_multi_value_differential_tests && step racecheck_multi_value 240 compute-sanitizer \
  --tool racecheck --error-exitcode 9 $bin/gpu_multi_value_differential_tests --gtest_filter="$mv_race"
step racecheck_tile 90 compute-sanitizer --tool racecheck --error-exitcode 9 $bin/gpu_tile_build_tests --gtest_filter='*OneKey*:*TileOfMany*'
echo "== failures (first lines)"
grep -hE '^\[  FAILED|^FAILED |^ERROR |Failure|CHECK FAILED|FAIL:|ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]' "$logs"/*.log | head -30
[ -f "$logs/bench.log" ] && { echo "== bench"; grep -E "^operation|^copy|^build|^lookup|^join|^semi|^anti|^group|^u64|^multi|^hash|targets met" "$logs/bench.log" | grep -v "^build  "; }
[ -f "$logs/cuco.log" ] && { echo "== cuco"; grep -vE '^#' "$logs/cuco.log" | head -40; }
tar -czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
echo "== summary"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
printf '%s\n' "${summary[@]}"
