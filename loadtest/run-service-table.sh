#!/usr/bin/env bash
# Measures the service table of docs/PERFORMANCE.md: starts gpujoind on a free
# loopback port, runs gpujoin-loadtest for lookup and join at every batch size
# and concurrency with the in-process echo ceiling, scrapes /metrics, and prints
# the tables last.
#
#   loadtest/run-service-table.sh GPUJOIND GPUJOIN_LOADTEST OUT_DIR BACKEND [loadtest args...]
#
# BACKEND is cpu or cuda; the loadtest args go to every run (e.g. --key-type uuid
# for string keys, --key-type pair for composite ones). Environment overrides: KEYS (index rows, 1M), ROWS
# (batch rows, 1K,64K,1M), CONC (streams, 1,4,16), CHANNELS (4), DURATION (s, 2),
# WARMUP (s, 0.5), GPUJOIND_ARGS (extra gpujoind flags, split on spaces, e.g.
# "--executor-threads=16"). Writes OUT_DIR/{gpujoind.log,lookup.txt,lookup.json,join.txt,
# join.json,metrics.txt}. Exit status 1 when any run reported errors or wrong answers.
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,15p' "$0"; exit 2; }
gpujoind=$1 loadtest=$2 out=$3 backend=$4
shift 4
mkdir -p "$out"

read -r -a extra_args <<<"${GPUJOIND_ARGS:-}"
"$gpujoind" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 --backend="$backend" \
  "${extra_args[@]}" >"$out/gpujoind.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 1 600); do
  grep -q "gpujoind ready" "$out/gpujoind.log" && break
  kill -0 $pid 2>/dev/null || { echo "gpujoind exited:"; cat "$out/gpujoind.log"; exit 2; }
  sleep 0.1
done
ready=$(grep -m1 "gpujoind ready" "$out/gpujoind.log") || { echo "gpujoind not ready"; exit 2; }
addr=$(sed -n 's/.*grpc=\([^ ]*\).*/\1/p' <<<"$ready")
metrics=$(sed -n 's/.*metrics=\([^ ]*\).*/\1/p' <<<"$ready")
echo "$ready"
grep -m1 "executor:" "$out/gpujoind.log"

status=0
for rpc in lookup join; do
  "$loadtest" --server "$addr" --rpc "$rpc" --build-keys "${KEYS:-1M}" \
    --batch-rows "${ROWS:-1K,64K,1M}" --concurrency "${CONC:-1,4,16}" \
    --channels "${CHANNELS:-4}" --duration "${DURATION:-2}" --warmup "${WARMUP:-0.5}" \
    --echo --json-file "$out/$rpc.json" "$@" >"$out/$rpc.txt" 2>"$out/$rpc.log" || status=1
done

# /metrics through bash's /dev/tcp (no curl needed on a bare host).
if [ -n "$metrics" ] && exec 3<>"/dev/tcp/${metrics%:*}/${metrics##*:}"; then
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$metrics" >&3
  cat <&3 >"$out/metrics.txt"
  exec 3<&-
  grep -E '^gpujoin_rpc_duration_seconds_(sum|count)\{rpc="(Lookup|Join)"' "$out/metrics.txt"
fi
cat "$out/lookup.txt" "$out/join.txt"
exit $status
