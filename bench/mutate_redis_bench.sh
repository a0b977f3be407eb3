#!/usr/bin/env bash
# Durable small upsert batches, gpujoind against Redis, same machine, same run
# (docs/PERFORMANCE.md, "Mutations"):
#  - gpujoind on the CPU backend with --data-dir (the default --wal-sync=always:
#    every batch fsync'd before it is acknowledged, batches of several streams
#    sharing fsyncs), an index of KEYS uint64 keys with explicit values built
#    by gpujoin-loadtest, then `gpujoin-loadtest --rpc mutate`: STREAMS streams,
#    IN_FLIGHT batches outstanding each, batches of ROWS upserts of keys drawn
#    from the index's keyspace (half present);
#  - redis-server 7 with appendonly yes and appendfsync always (every write
#    fsync'd before its reply; one fsync per event-loop pass), then
#    redis-benchmark: STREAMS connections, pipeline IN_FLIGHT, each command an
#    MSET of ROWS random keys of the same keyspace (`k:<n>` -> `<n>`).
# Prints keys/s of each side and the ratio. Sides run one after the other,
# twice each, alternating (the host is shared: the best of each is kept).
#
#   bench/mutate_redis_bench.sh [BUILD_DIR]     (KEYS, ROWS, STREAMS, IN_FLIGHT, DURATION)
set -euo pipefail
build=${1:-build}
keys=${KEYS:-1048576}
rows=${ROWS:-100}
streams=${STREAMS:-8}
in_flight=${IN_FLIGHT:-1}
duration=${DURATION:-10}
command -v redis-server >/dev/null || {
  echo "mutate_redis_bench: redis-server not found (apt-get install redis-server)" >&2
  exit 2
}

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

gj_port=$(free_port)
mkdir -p "$work/gj"
"$build/bin/gpujoind" --backend=cpu --listen="127.0.0.1:$gj_port" --metrics-listen=none \
  --data-dir="$work/gj" >"$work/gpujoind.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "gpujoind ready" "$work/gpujoind.log" && break; sleep 0.1; done

redis_port=$(free_port)
mkdir -p "$work/redis"
redis-server --port "$redis_port" --dir "$work/redis" --appendonly yes --appendfsync always \
  --save '' --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

mset="MSET"
for _ in $(seq "$rows"); do mset+=" k:__rand_int__ __rand_int__"; done

gpujoin_run() {
  "$build/bin/gpujoin-loadtest" --server "127.0.0.1:$gj_port" --rpc mutate --key-type u64 \
    --build-keys "$keys" --keep-index --index mutate_bench --batch-rows "$rows" \
    --concurrency "$streams" --in-flight "$in_flight" --duration "$duration" --warmup 1 \
    --json-file "$work/gj.json" >/dev/null
  /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(int(r["keys_per_second"]), r["latency_ms"]["p50"], r["latency_ms"]["p99"], r["error_count"])' "$work/gj.json"
}
redis_run() {
  # About `duration` seconds of MSETs: sized from a short first run.
  local n=$((streams * in_flight * 200))
  local rps
  rps=$(redis-benchmark -p "$redis_port" -c "$streams" -P "$in_flight" -r "$keys" -n "$n" --csv \
          $mset | tail -1 | cut -d, -f2 | tr -d '"')
  n=$(/usr/bin/python3 -c "print(max(int(float('$rps') * $duration), 1000))")
  redis-benchmark -p "$redis_port" -c "$streams" -P "$in_flight" -r "$keys" -n "$n" --csv \
    $mset | tail -1 | /usr/bin/python3 -c "
import sys
f = [x.strip('\"') for x in sys.stdin.read().strip().split(',')]
print(int(float(f[1]) * $rows), f[4], f[6])"
}

best_gj=0 best_redis=0
for round in 1 2; do
  read -r gj_keys gj_p50 gj_p99 gj_errors < <(gpujoin_run)
  read -r redis_keys redis_p50 redis_p99 < <(redis_run)
  echo "round $round: gpujoind ${gj_keys} keys/s (p50 ${gj_p50} ms, p99 ${gj_p99} ms, errors ${gj_errors}); redis ${redis_keys} keys/s (p50 ${redis_p50} ms, p99 ${redis_p99} ms)"
  ((gj_keys > best_gj)) && best_gj=$gj_keys
  ((redis_keys > best_redis)) && best_redis=$redis_keys
done
/usr/bin/python3 -c "print(f'best: gpujoind {$best_gj/1e3:.1f}K keys/s, redis {$best_redis/1e3:.1f}K keys/s, ratio {$best_gj/$best_redis:.2f} (keys $keys, batches of $rows, $streams streams x $in_flight in flight)')"
