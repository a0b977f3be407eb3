#!/usr/bin/env bash
# Lookup throughput while snapshots are written (the target: snapshot writing
# must not reduce lookup throughput by more than 10 % while it runs). Starts
# gpujoind twice on loopback, each time measuring gpujoin-loadtest lookups on
# their own index (the loadtest's --build-keys index) for a fixed duration:
#   1. without --data-dir: the baseline, then the same load while a second,
#      large index (BIG_KEYS keys with an int64 payload column, built by the CLI
#      from a CSV) is rebuilt in a loop: the rebuild's own cost;
#   2. with --data-dir on a temporary directory: the baseline again, then the
#      same load and rebuild loop, where every rebuild also writes the big
#      index's snapshot in the background. The script checks from the log that
#      snapshot writes ran during the window (written or superseded lines after
#      the window's start) and reports how much of the window they covered.
# Prints a short table last: keys/s of each run and the ratios; the target's
# criterion is "rebuild + snapshot" against "rebuild" (the snapshot's own
# share), "rebuild + snapshot" against the baseline shows both costs together.
#
#   bash bench/snapshot_load_device.sh BUNDLE_DIR
#
# BUNDLE_DIR holds bin/gpujoind, bin/gpujoin-loadtest, bin/gpujoin and env.sh.
# Environment: BACKEND (cuda), BIG_KEYS (33554432 = 2^25), KEYS (lookup index
# rows, 1M), ROWS (batch rows, 64K), CONC (streams, 16), DURATION (s per run,
# 15), WARMUP (s, 1), GPUJOIND_ARGS (extra gpujoind flags), OUT (logs,
# /tmp/gpujoin-snapshot-load). Runs in about 150 s at the defaults on the H200
# host; every step has a timeout. Exit status 1 when a run failed, reported
# errors or wrong answers, or no snapshot write overlapped the window.
set -uo pipefail
bundle=${1:?usage: snapshot_load_device.sh BUNDLE_DIR}
source "$bundle/env.sh"
bin=$bundle/bin
backend=${BACKEND:-cuda}
big_keys=${BIG_KEYS:-33554432}
duration=${DURATION:-15}
warmup=${WARMUP:-1}
out=${OUT:-/tmp/gpujoin-snapshot-load}
mkdir -p "$out"
rm -f "$out/failures.log"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpujoin-snapshot-load.XXXXXX")
pid=
loop_pid=
cleanup() {
  [ -n "$loop_pid" ] && kill "$loop_pid" 2>/dev/null && wait "$loop_pid" 2>/dev/null
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# Failures are collected in a file: fail also runs in command substitutions.
fail() { echo "FAIL: $*" | tee -a "$out/failures.log" >&2; }

# The big index's source: key k (0..BIG_KEYS-1) and payload p, one CSV made once.
t0=$(date +%s%N)
{
  echo k,p
  timeout 60 paste -d, <(seq 0 $((big_keys - 1))) <(seq 1000000 $((big_keys + 999999)))
} >"$work/big.csv" || { fail "could not write $work/big.csv"; exit 1; }
echo "big.csv: $big_keys rows, $(stat -c %s "$work/big.csv") bytes in" \
  "$((($(date +%s%N) - t0) / 1000000)) ms"

read -r -a extra_args <<<"${GPUJOIND_ARGS:-}"
# start_server LABEL [gpujoind flag...]: sets pid, addr, log.
start_server() {
  local label=$1
  shift
  log=$out/gpujoind-$label.log
  "$bin/gpujoind" --listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0 --backend="$backend" \
    "${extra_args[@]}" "$@" >"$log" 2>&1 &
  pid=$!
  local ready=
  for _ in $(seq 1 600); do
    ready=$(grep -m1 "gpujoind ready" "$log") && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$ready" ]; then
    fail "gpujoind ($label) did not become ready:"
    tail -n 20 "$log"
    exit 1
  fi
  addr=$(sed -n 's/.*grpc=\([^ ]*\).*/\1/p' <<<"$ready")
  echo "$label: $ready"
}
stop_server() {
  kill "$pid" 2>/dev/null
  timeout 60 tail --pid="$pid" -f /dev/null
  wait "$pid" 2>/dev/null
  pid=
}

cli() { timeout 120 "$bin/gpujoin" --server "$addr" -q "$@"; }
build_big() {
  cli index build big --from "$work/big.csv" --key k --schema p:i64 --replace >/dev/null
}

# load LABEL: one loadtest run; sets kps to its keys/s (empty when it failed).
load() {
  local label=$1
  timeout $((duration * 3 + 90)) "$bin/gpujoin-loadtest" --server "$addr" --rpc lookup \
    --index lookups --build-keys "${KEYS:-1M}" --batch-rows "${ROWS:-64K}" \
    --concurrency "${CONC:-16}" --duration "$duration" --warmup "$warmup" \
    --json-file "$out/$label.json" >"$out/$label.txt" 2>"$out/$label.log" ||
    fail "loadtest $label exited with $? (see $out/$label.log)"
  local errors wrong
  errors=$(grep -o '"total_errors": *[0-9]*' "$out/$label.json" 2>/dev/null | grep -o '[0-9]*$')
  wrong=$(grep -o '"total_wrong_answers": *[0-9]*' "$out/$label.json" 2>/dev/null |
    grep -o '[0-9]*$')
  if [ "${errors:-0}" != 0 ] || [ "${wrong:-0}" != 0 ]; then
    fail "loadtest $label: ${errors:-?} errors, ${wrong:-?} wrong answers"
  fi
  kps=$(grep -o '"keys_per_second": *[0-9.e+-]*' "$out/$label.json" 2>/dev/null | head -1 |
    sed 's/.*: *//')
}

# with_rebuilds LABEL: `load` while the big index is rebuilt back to back; sets
# kps, rebuilds (finished during the run) and window_end (log lines at its end).
with_rebuilds() {
  local label=$1
  local stop=$work/stop-$label count=$work/count-$label
  rm -f "$stop"
  echo 0 >"$count"
  (
    n=0
    while [ ! -e "$stop" ]; do
      build_big || { echo "rebuild failed" >&2; break; }
      n=$((n + 1))
      echo $n >"$count"
    done
  ) 2>"$out/rebuilds-$label.log" &
  loop_pid=$!
  load "$label"
  rebuilds=$(cat "$count")
  window_end=$(wc -l <"$log")
  touch "$stop"
  timeout 150 tail --pid="$loop_pid" -f /dev/null
  wait "$loop_pid" 2>/dev/null
  loop_pid=
  [ "$rebuilds" -gt 0 ] || fail "$label: no rebuild finished during the run"
  if grep -q "rebuild failed" "$out/rebuilds-$label.log"; then fail "$label: a rebuild failed"; fi
}

# 1. No --data-dir.
start_server plain
load baseline-plain
base_plain=$kps
t0=$(date +%s%N)
build_big || fail "first build of big (plain)"
echo "first build of big through the CLI: $((($(date +%s%N) - t0) / 1000000)) ms"
with_rebuilds rebuild
rebuild_kps=$kps
rebuild_count=$rebuilds
stop_server

# 2. --data-dir: the same runs; every rebuild of big also writes its snapshot.
mkdir -p "$work/data"
start_server snapshot --data-dir="$work/data"
load baseline-snapshot
base_snap=$kps
build_big || fail "first build of big (snapshot)"
# The first build's snapshot written before the window, so that the window sees
# only the rebuilds' writes.
for _ in $(seq 1 300); do
  grep -q 'snapshot of index "big" version 1 written' "$log" && break
  sleep 0.2
done
window_start=$(wc -l <"$log")
with_rebuilds rebuild-snapshot
snap_kps=$kps
snap_count=$rebuilds
window=$(sed -n "$((window_start + 1)),${window_end}p" "$log")
written=$(grep -c 'snapshot of index "big" version [0-9]* written' <<<"$window")
superseded=$(grep -c 'snapshot of index "big" version [0-9]* superseded' <<<"$window")
write_seconds=$(grep -o 'snapshot of index "big" version [0-9]* written: [0-9]* bytes in [0-9.e-]* s' \
  <<<"$window" | awk '{s += $(NF-1)} END {printf "%.1f", s}')
snapshot_bytes=$(grep -o 'snapshot of index "big" version [0-9]* written: [0-9]*' <<<"$window" |
  tail -1 | awk '{print $NF}')
[ $((written + superseded)) -gt 0 ] || fail "no snapshot write of big ran during the window"
if grep -q 'snapshot of index "big" version [0-9]* failed' <<<"$window"; then
  fail "a snapshot write of big failed during the window"
fi
stop_server
ls -l "$work/data" >"$out/data-dir.txt" 2>&1

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "-" }'; }
mega() { awk -v x="$1" 'BEGIN { if (x > 0) printf "%.1f M", x / 1e6; else print "-" }'; }
echo
echo "== lookups while snapshots are written ($backend; lookup index ${KEYS:-1M} keys," \
  "${ROWS:-64K} rows x ${CONC:-16} streams, ${duration} s per run; big: $big_keys keys + int64)"
printf '%-34s %12s %12s  %s\n' run keys/s "/baseline" notes
printf '%-34s %12s %12s\n' "baseline (no --data-dir)" "$(mega "$base_plain")" 1.000
printf '%-34s %12s %12s  %s\n' "with rebuild" "$(mega "$rebuild_kps")" \
  "$(ratio "$rebuild_kps" "$base_plain")" "$rebuild_count rebuilds of big"
printf '%-34s %12s %12s\n' "baseline (--data-dir, idle)" "$(mega "$base_snap")" 1.000
printf '%-34s %12s %12s  %s\n' "with rebuild + snapshot" "$(mega "$snap_kps")" \
  "$(ratio "$snap_kps" "$base_snap")" \
  "$snap_count rebuilds; $written writes ($write_seconds s), $superseded superseded"
echo "snapshot's own share: (rebuild + snapshot) / rebuild = $(ratio "$snap_kps" "$rebuild_kps")," \
  "each against its baseline $(ratio "$(ratio "$snap_kps" "$base_snap")" \
  "$(ratio "$rebuild_kps" "$base_plain")") (target >= 0.90); snapshot writes of" \
  "${snapshot_bytes:-?} bytes covered $write_seconds s of the $duration s window"
# Where the writes covered only part of the window, the loss while one runs is
# the window's loss over that fraction (an estimate; superseded writes uncounted).
awk -v r="$(ratio "$(ratio "$snap_kps" "$base_snap")" "$(ratio "$rebuild_kps" "$base_plain")")" \
  -v w="$write_seconds" -v d="$duration" 'BEGIN {
    f = w / d; if (f > 1) f = 1
    if (r > 0 && f > 0) printf "estimated throughput while a write runs: %.3f of the rebuild-only rate\n", 1 - (1 - r) / f
  }'
if [ -s "$out/failures.log" ]; then
  echo "== failures"
  cat "$out/failures.log"
  exit 1
fi
