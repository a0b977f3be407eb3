#!/usr/bin/env bash
# gpujoin-router's cost: gpujoin-loadtest against one gpujoind directly, then
# against gpujoin-router in front of 1..N shards (`gpujoind --shard I/N`), with
# the CPU seconds of the router and of the shards read from /proc. Prints one
# block per setting: the loadtest table and "cpu router=S shards=S".
#
#   bench/router_bench.sh BIN_DIR OUT_DIR BACKEND [SHARD_COUNTS] [loadtest args...]
#
# BIN_DIR holds gpujoind, gpujoin-router and gpujoin-loadtest; BACKEND is cpu
# or cuda; SHARD_COUNTS a comma list (default 1,2). The loadtest args replace
# the default `--build-keys 1M --batch-rows 100,64K --concurrency 1,16
# --duration 4 --warmup 0.5`. Exit status 1 when any run reported errors.
set -uo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
bin=$1 out=$2 backend=$3
counts=${4:-1,2}
[[ $counts =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  { echo "router_bench.sh: SHARD_COUNTS must be a comma list of counts, got '$counts'"; exit 2; }
shift $(($# >= 4 ? 4 : 3))
load_args=("$@")
[ ${#load_args[@]} -gt 0 ] || load_args=(--build-keys 1M --batch-rows 100,64K
  --concurrency 1,16 --duration 4 --warmup 0.5)
mkdir -p "$out"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null' EXIT

# start NAME READY_WORD CMD...: runs CMD in the background, waits for its
# "READY_WORD ready: grpc=ADDR" line and sets $addr and $pid.
start() {
  local name=$1 word=$2 log
  shift 2
  log=$out/$name.log
  "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q "$word ready" "$log" && break
    kill -0 "$pid" 2>/dev/null || { echo "$name exited:"; cat "$log"; exit 2; }
    sleep 0.1
  done
  addr=$(sed -n "s/.*$word ready: grpc=\([^ ]*\).*/\1/p" "$log" | head -1)
  [ -n "$addr" ] || { echo "$name not ready"; exit 2; }
}
cpu_seconds() {  # user + system seconds the given pids have used so far
  local t=0 p f
  for p in "$@"; do
    read -r -a f <"/proc/$p/stat" || continue
    t=$((t + f[13] + f[14]))
  done
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'
}
server() {  # server NAME [flags...]
  local name=$1
  shift
  start "$name" gpujoind "$bin/gpujoind" --listen=127.0.0.1:0 --metrics-listen=none \
    --backend="$backend" "$@"
}

status=0
# CPU seconds of the measured window: the loadtest's build included, the
# processes' start (CUDA initialisation) not.
since() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }
server direct
direct=$pid
before=$(cpu_seconds "$direct")
"$bin/gpujoin-loadtest" --server "$addr" "${load_args[@]}" >"$out/direct.txt" 2>&1 || status=1
echo "== direct, 1 gpujoind ($backend)"
cat "$out/direct.txt"
echo "cpu server=$(since "$before" "$(cpu_seconds "$direct")")"
kill "$direct"
wait "$direct" 2>/dev/null

for n in ${counts//,/ }; do
  shard_pids=() shard_addrs=()
  for ((i = 0; i < n; i++)); do
    server "shard$n-$i" --shard="$i/$n"
    shard_pids+=("$pid")
    shard_addrs+=("$addr")
  done
  list=$(IFS=,; echo "${shard_addrs[*]}")
  start "router$n" gpujoin-router "$bin/gpujoin-router" --listen=127.0.0.1:0 \
    --metrics-listen=none --shards="$list"
  router=$pid
  router_before=$(cpu_seconds "$router")
  shards_before=$(cpu_seconds "${shard_pids[@]}")
  "$bin/gpujoin-loadtest" --server "$addr" "${load_args[@]}" >"$out/router$n.txt" 2>&1 ||
    status=1
  echo "== router over $n shard(s) ($backend)"
  cat "$out/router$n.txt"
  echo "cpu router=$(since "$router_before" "$(cpu_seconds "$router")")" \
    "shards=$(since "$shards_before" "$(cpu_seconds "${shard_pids[@]}")")"
  kill "$router" "${shard_pids[@]}"
  wait "$router" "${shard_pids[@]}" 2>/dev/null
done
exit $status
