#!/usr/bin/env bash
# One device session for the CUDA backend's per-batch service overhead:
# the GPU differential tests, the CUDA instances of the engine tests, the
# hashing device and backend tests, then gpujoind (CUDA) with gpujoin-loadtest:
# for 1K batches at 16 streams with in-flight 4, the executor size (16 and 32
# threads) under the three GPU wait modes -- blocking (--cuda-wait-poll-us=0),
# spinning (--cuda-spin-wait) and hybrid (--cuda-wait-poll-us=$POLL_US,
# default 30) -- then 1-stream 1K lookup/join latency per mode, and with TABLE=1
# the service table (lookup and join, 1K and 1M rows, 1/4/16 streams, with the
# echo ceiling). Usage: bash bench/service_device_run.sh BUNDLE_DIR, a bundle made
# by ../shared/tools/bundle-for-device holding gpu_differential_tests, engine_tests,
# gpujoind and gpujoin-loadtest (hashing_device_test and hashing_backend_test run
# when present). Logs go to $OUT (or /tmp/gpujoin-service-device), packed into
# logs.tar.gz. Prints the test summary, the executor comparison, the latency rows
# and (TABLE=1) the table last. The rows labelled nograph repeat the blocking ones
# with join CUDA Graphs off (--cuda-join-graphs=false), for a before/after.
set -uo pipefail
bundle=${1:?usage: service_device_run.sh BUNDLE_DIR}
source "$bundle/env.sh"
export GPUJOIN_REQUIRE_GPU=1  # a GPU test that finds no device fails here
out=${OUT:-/tmp/gpujoin-service-device}
mkdir -p "$out/logs"
logs=$out/logs
STEP_LOGS=$logs
source "$(dirname "$0")/device_steps.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$logs/gpu.log" 2>&1
step gpu_tests 300 "$bundle/bin/gpu_differential_tests"
step engine_cuda 60 "$bundle/bin/engine_tests" --gtest_filter='*cuda*:*Cuda*'
[ -x "$bundle/bin/hashing_device_test" ] && step hash_device 30 "$bundle/bin/hashing_device_test"
[ -x "$bundle/bin/hashing_backend_test" ] && step hash_backend 30 "$bundle/bin/hashing_backend_test"

table=loadtest/run-service-table.sh
d=${DURATION:-1} w=${WARMUP:-0.3}
exec_rows=()
executor() {  # executor LABEL THREADS [gpujoind flag...]
  local label=$1 threads=$2; shift 2
  ROWS=1K CONC=16 DURATION=$d WARMUP=$w GPUJOIND_ARGS="--executor-threads=$threads $*" \
    timeout 60 bash $table "$bundle/bin/gpujoind" "$bundle/bin/gpujoin-loadtest" "$logs/exec-$label" \
    cuda --in-flight 4 >"$logs/exec-$label.log" 2>&1
  local rc=$?
  local l j
  l=$(awk '$1=="lookup" && $2=="server" {print $7, $13, $NF, "err=" $15 "+" $16}' "$logs/exec-$label/lookup.txt" 2>/dev/null)
  j=$(awk '$1=="join" && $2=="server" {print $7, $13, $NF, "err=" $15 "+" $16}' "$logs/exec-$label/join.txt" 2>/dev/null)
  exec_rows+=("$(printf '%-14s rc=%-2s lookup %-22s join %s' "$label" "$rc" "$l" "$j")")
}
poll=${POLL_US:-30}
executor block-16 16 --cuda-wait-poll-us=0
executor spin-16 16 --cuda-spin-wait
executor hybrid-16 16 --cuda-wait-poll-us=$poll
executor block-32 32 --cuda-wait-poll-us=0
executor spin-32 32 --cuda-spin-wait
executor hybrid-32 32 --cuda-wait-poll-us=$poll
# Join CUDA Graphs off (--cuda-join-graphs=false): the same blocking row without replay.
executor nograph-16 16 --cuda-wait-poll-us=0 --cuda-join-graphs=false
lat_rows=()
latency() {  # latency LABEL [gpujoind flag...]: 1 stream, 1K rows, default executor and in-flight
  local label=$1; shift
  ROWS=1K CONC=1 DURATION=$d WARMUP=$w GPUJOIND_ARGS="$*" timeout 60 bash $table "$bundle/bin/gpujoind" \
    "$bundle/bin/gpujoin-loadtest" "$logs/lat-$label" cuda >"$logs/lat-$label.log" 2>&1
  local rc=$? rpc r
  for rpc in lookup join; do
    r=$(awk -v rpc=$rpc '$1==rpc && $2=="server" {print $7, "p50=" $11, "p99=" $13, $NF, "err=" $15 "+" $16}' \
      "$logs/lat-$label/$rpc.txt" 2>/dev/null)
    lat_rows+=("$(printf '%-8s rc=%-2s %-6s %s' "$label" "$rc" "$rpc" "$r")")
  done
}
latency block --cuda-wait-poll-us=0
latency spin --cuda-spin-wait
latency hybrid --cuda-wait-poll-us=$poll
latency nograph --cuda-wait-poll-us=0 --cuda-join-graphs=false
table_rc=skipped
if [ "${TABLE:-0}" = 1 ]; then
  ROWS=1K,1M DURATION=$d WARMUP=$w timeout 120 bash $table "$bundle/bin/gpujoind" \
    "$bundle/bin/gpujoin-loadtest" "$logs/table" cuda >"$logs/table.log" 2>&1
  table_rc=$?
fi
tar -C "$out" -czf "$out/logs.tar.gz" logs 2>/dev/null
echo "== failures (first lines)"
grep -hE '^\[  FAILED|Failure' "$logs"/*.log | head -20
echo "== tests"
cat "$logs/gpu.log"
printf '%s\n' "${summary[@]}"
echo "== executor, 1K rows, 16 streams, in-flight 4 (batches/s p99ms %echo errors+wrong)"
printf '%s\n' "${exec_rows[@]}"
echo "== latency, 1K rows, 1 stream (batches/s p50/p99 ms %echo errors+wrong)"
printf '%s\n' "${lat_rows[@]}"
echo "== table rc=$table_rc"
[ -f "$logs/table.log" ] && tail -n 30 "$logs/table.log"
