#!/usr/bin/env bash
# CLI end-to-end benchmark: generates a LEFT_ROWS-row CSV (event_id,
# key, value) and a RIGHT_ROWS-row CSV (key, label, score; unique keys; about
# half the left keys match one), integer keys or with KEY=uuid UUID text, starts
# a CPU gpujoind, and measures with /usr/bin/time -v, in one run:
#   - gpujoin join of the two files written to CSV (ad hoc: the right file
#     becomes a temporary index), against DuckDB (npm @duckdb/node-api) on
#     the same files writing the same CSV;
#   - gpujoin lookup of the left file against an index of the right keys.
# Prints a Markdown table (median wall seconds of REPEAT alternating runs,
# rows/s, peak client RSS).
#
# usage: bench/cli_bench.sh [BUILD_DIR]   (default build-c)
# env:   KEY (int: multiples of 7919 up to about 3.2e10, uint64 keys; uuid: random
#        version-4 UUID text, 36 characters, a string key), REPEAT (3), LEFT_ROWS
#        (10000000), RIGHT_ROWS (2000000), WORK (/tmp/gpujoin-cli-bench),
#        DUCKDB_NODE_MODULES (a node_modules holding @duckdb/node-api; DuckDB is
#        skipped when unset or missing: npm install @duckdb/node-api under /tmp)
set -euo pipefail
build=${1:-build-c}
left_rows=${LEFT_ROWS:-10000000}
right_rows=${RIGHT_ROWS:-2000000}
work=${WORK:-/tmp/gpujoin-cli-bench}
cli=$build/bin/gpujoin
server=$build/bin/gpujoind
mkdir -p "$work"
key_kind=${KEY:-int}
case $key_kind in
  int) suffix= ;;
  uuid) suffix=_uuid ;;
  *) echo "KEY must be int or uuid, not '$key_kind'" >&2; exit 2 ;;
esac
left=$work/left${suffix}_${left_rows}.csv
right=$work/right${suffix}_${right_rows}.csv

if [ ! -s "$left" ] || [ ! -s "$right" ]; then
  echo "generating $left and $right" >&2
  /usr/bin/python3 - "$left" "$right" "$left_rows" "$right_rows" "$key_kind" <<'EOF'
import random, sys
left, right, n_left, n_right = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(24)
keys = list(range(1, n_right + 1))
rng.shuffle(keys)
# Key k (1 <= k <= 2 * n_right) as written: k * 7919, or with KEY=uuid the k-th
# of 2 * n_right distinct random version-4 UUIDs.
text = lambda k: k * 7919
if sys.argv[5] == "uuid":
    uuids = set()
    while len(uuids) < 2 * n_right:
        x = rng.getrandbits(128) & ~(0xF << 76) & ~(0x3 << 62) | (0x4 << 76) | (0x2 << 62)
        h = "%032x" % x
        uuids.add(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    uuids = sorted(uuids)
    rng.shuffle(uuids)
    text = lambda k: uuids[k - 1]
with open(right, "w") as f:
    f.write("key,label,score\n")
    buf = []
    for i, k in enumerate(keys):
        buf.append(f"{text(k)},label-{i % 1000},{(i * 37) % 10000 / 100}\n")
        if len(buf) == 100000:
            f.write("".join(buf)); buf = []
    f.write("".join(buf))
with open(left, "w") as f:
    f.write("event_id,key,value\n")
    buf = []
    # About half the left keys match a right key.
    for i in range(n_left):
        k = text(rng.randrange(1, 2 * n_right + 1))
        buf.append(f"{i},{k},{i % 977}\n")
        if len(buf) == 100000:
            f.write("".join(buf)); buf = []
    f.write("".join(buf))
EOF
fi

source "$(dirname "$0")/cli_bench_lib.sh"
start_cpu_server
repeat=${REPEAT:-3}

"$cli" -q --server 127.0.0.1:$port index build bench_right --from "$right" --key key --no-payload \
  --replace >/dev/null
have_duck=no
if [ -n "${DUCKDB_NODE_MODULES:-}" ] && [ -d "$DUCKDB_NODE_MODULES/@duckdb/node-api" ]; then
  have_duck=yes
  cat >"$work/duck.mjs" <<EOF
import { createRequire } from 'module';
const require = createRequire('$DUCKDB_NODE_MODULES/');
const { DuckDBInstance } = require('@duckdb/node-api');
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run(\`COPY (SELECT l.event_id, l.key, l.value, r.label, r.score
  FROM read_csv('$left') l JOIN read_csv('$right') r USING (key))
  TO '$work/join_duckdb.csv' (HEADER)\`);
EOF
fi
# The runs alternate, so that load from elsewhere on the machine hits both alike.
for _ in $(seq "$repeat"); do
  measure join "$cli" -q --server 127.0.0.1:$port join --left "$left" --right "$right" --on key \
    --out "$work/join_gpujoin.csv"
  if [ $have_duck = yes ]; then measure duckdb node "$work/duck.mjs"; fi
  measure lookup "$cli" -q --server 127.0.0.1:$port lookup bench_right --from "$left" --key key \
    --out "$work/lookup_gpujoin.csv"
done
declare -A wall
for k in "${!walls[@]}"; do wall[$k]=$(median "${walls[$k]}"); done
join_rows=$(($(wc -l <"$work/join_gpujoin.csv") - 1))
duck="skipped (set DUCKDB_NODE_MODULES)"
if [ $have_duck = yes ]; then
  duck_rows=$(($(wc -l <"$work/join_duckdb.csv") - 1))
  duck=ok
fi

fmt() { awk -v r="$1" -v s="$2" 'BEGIN { printf "%.2f M rows/s", r / s / 1e6 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f MiB", k / 1024 }'; }
echo
echo "keys: $key_kind; $left ($(du -m "$left" | cut -f1) MB), $right"
echo "| run | rows in | rows out | wall s | rate (left rows) | peak client RSS |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
echo "| gpujoin join (ad hoc, CSV out) | $left_rows x $right_rows | $join_rows | ${wall[join]} | $(fmt "$left_rows" "${wall[join]}") | $(mib "${rss[join]}") |"
if [ "$duck" = ok ]; then
  echo "| DuckDB (node-api) join, CSV out | $left_rows x $right_rows | $duck_rows | ${wall[duckdb]} | $(fmt "$left_rows" "${wall[duckdb]}") | $(mib "${rss[duckdb]}") |"
else
  echo "| DuckDB | $duck | | | | |"
fi
echo "| gpujoin lookup (resident index, CSV out) | $left_rows | $left_rows | ${wall[lookup]} | $(fmt "$left_rows" "${wall[lookup]}") | $(mib "${rss[lookup]}") |"
