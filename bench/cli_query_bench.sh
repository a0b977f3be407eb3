#!/usr/bin/env bash
# The README quick start's question — mean latency by sensor type — over an
# EVENT_ROWS-row events CSV (event_id, sensor_id, latency_ms) and a
# SENSOR_ROWS-row sensors index (sensor_id, type, site; 8 types; about 90% of
# the events' sensors exist), answered three ways on a CPU gpujoind, in one run:
#   - `gpujoin query` (one plan: lookup, group by type, mean);
#   - today's pipeline without plans: `gpujoin join --out` then `gpujoin agg`;
#   - DuckDB (npm @duckdb/node-api) running the same SQL on the same files
#     (it reads the sensors CSV itself; the gpujoin runs use the resident index).
# Prints a Markdown table (median wall seconds of REPEAT alternating runs, peak
# client RSS) and checks that the answers agree.
#
# usage: bench/cli_query_bench.sh [BUILD_DIR]   (default build)
# env:   REPEAT (3), EVENT_ROWS (10000000), SENSOR_ROWS (1000000), GPUJOIND_FLAGS,
#        WORK (/tmp/gpujoin-query-bench), DUCKDB_NODE_MODULES (a node_modules
#        holding @duckdb/node-api; DuckDB is skipped when unset)
set -euo pipefail
build=${1:-build}
event_rows=${EVENT_ROWS:-10000000}
sensor_rows=${SENSOR_ROWS:-1000000}
work=${WORK:-/tmp/gpujoin-query-bench}
cli=$build/bin/gpujoin
server=$build/bin/gpujoind
mkdir -p "$work"
events=$work/events_${event_rows}.csv
sensors=$work/sensors_${sensor_rows}.csv

if [ ! -s "$events" ] || [ ! -s "$sensors" ]; then
  echo "generating $events and $sensors" >&2
  /usr/bin/python3 - "$events" "$sensors" "$event_rows" "$sensor_rows" <<'EOF'
import random, sys
events, sensors, n_events, n_sensors = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(34)
types = ["co2", "temp", "humidity", "noise", "light", "pressure", "motion", "door"]
with open(sensors, "w") as f:
    f.write("sensor_id,type,site\n")
    buf = []
    for i in range(n_sensors):
        buf.append(f"{i * 3 + 1},{types[(i * 7) % 8]},site-{i % 50}\n")
        if len(buf) == 100000:
            f.write("".join(buf)); buf = []
    f.write("".join(buf))
with open(events, "w") as f:
    f.write("event_id,sensor_id,latency_ms\n")
    buf = []
    top = int(n_sensors * 1.1)
    for i in range(n_events):
        s = rng.randrange(top) * 3 + 1
        buf.append(f"{i},{s},{(i * 37) % 5000 / 100}\n")
        if len(buf) == 100000:
            f.write("".join(buf)); buf = []
    f.write("".join(buf))
EOF
fi

source "$(dirname "$0")/cli_bench_lib.sh"
start_cpu_server
G() { "$cli" -q --server 127.0.0.1:$port "$@"; }
G index build sensors --from "$sensors" --key sensor_id --replace >/dev/null

repeat=${REPEAT:-3}

cat >"$work/pipeline.sh" <<EOF
set -e
"$cli" -q --server 127.0.0.1:$port join --left "$events" --right index:sensors --on sensor_id --out "$work/joined.csv"
"$cli" -q --server 127.0.0.1:$port agg --from "$work/joined.csv" --group type --op mean --value latency_ms --out "$work/pipeline.csv"
EOF
have_duck=no
if [ -n "${DUCKDB_NODE_MODULES:-}" ] && [ -d "$DUCKDB_NODE_MODULES/@duckdb/node-api" ]; then
  have_duck=yes
  cat >"$work/duck.mjs" <<EOF
import { createRequire } from 'module';
const require = createRequire('$DUCKDB_NODE_MODULES/');
const { DuckDBInstance } = require('@duckdb/node-api');
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run(\`COPY (SELECT s.type, avg(e.latency_ms) AS mean_latency_ms
  FROM read_csv('$events') e JOIN read_csv('$sensors') s USING (sensor_id)
  GROUP BY s.type ORDER BY s.type) TO '$work/duckdb.csv' (HEADER)\`);
EOF
fi
for _ in $(seq "$repeat"); do
  measure query "$cli" -q --server 127.0.0.1:$port query --from "$events" --lookup sensors:sensor_id \
    --group-by type --agg 'mean(latency_ms)' --out "$work/query.csv"
  measure pipeline bash "$work/pipeline.sh"
  if [ $have_duck = yes ]; then measure duckdb node "$work/duck.mjs"; fi
done
declare -A wall
for k in "${!walls[@]}"; do wall[$k]=$(median "${walls[$k]}"); done

echo
echo "events: $events ($(du -m "$events" | cut -f1) MB); sensors index: $sensor_rows rows"
echo "| run | wall s | events/s | peak client RSS |"
echo "| --- | ---: | ---: | ---: |"
fmt() { awk -v r="$1" -v s="$2" 'BEGIN { printf "%.2f M", r / s / 1e6 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f MiB", k / 1024 }'; }
for k in query pipeline duckdb; do
  [ -n "${wall[$k]:-}" ] || continue
  echo "| $k | ${wall[$k]} | $(fmt "$event_rows" "${wall[$k]}") | $(mib "${rss[$k]}") |"
done
echo
echo "query:";    sort "$work/query.csv"
echo "pipeline:"; sort "$work/pipeline.csv" 2>/dev/null || true
if [ $have_duck = yes ]; then echo "duckdb:"; cat "$work/duckdb.csv"; fi
