# Shared by the CLI benchmarks (cli_bench.sh, cli_query_bench.sh); sourced
# with $cli, $server and $work set.
#
# start_cpu_server: a CPU gpujoind on a free loopback port ($port), stopped
# when the script exits, waited for until it is healthy; GPUJOIND_FLAGS adds
# flags (e.g. --dictionary-max-values=0 to measure without dictionaries).
start_cpu_server() {
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # shellcheck disable=SC2086  # GPUJOIND_FLAGS is a list of flags
  "$server" --backend cpu --listen 127.0.0.1:$port --metrics-listen none ${GPUJOIND_FLAGS:-} \
    >"$work/gpujoind.log" 2>&1 &
  server_pid=$!
  trap 'kill $server_pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    "$cli" --server 127.0.0.1:$port health >/dev/null 2>&1 && break
    sleep 0.1
  done
}

# measure NAME CMD...: wall seconds and max RSS (KiB) from /usr/bin/time -v;
# every call adds one run to walls[NAME] and keeps the largest RSS in rss[NAME].
declare -A walls rss
measure() {
  local name=$1
  shift
  /usr/bin/time -v "$@" 2>"$work/$name.time" >/dev/null
  local w r
  w=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; print s}' "$work/$name.time")
  r=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/$name.time")
  walls[$name]="${walls[$name]:-} $w"
  if [ -z "${rss[$name]:-}" ] || [ "$r" -gt "${rss[$name]}" ]; then rss[$name]=$r; fi
}

# median "W1 W2 ...": the median of the runs' values.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
