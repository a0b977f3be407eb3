#!/usr/bin/env bash
# CTest entry of the Node client tests (tests/node/*.test.js, `node --test`)
# against the gpujoind binary given as $1. Skips visibly (exit 77, which CTest
# reports as Skipped) when node is missing or older than 18; installs the npm
# dependencies from client/node's lockfile first (scripts/install-node-deps).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null; then
  echo "SKIPPED: node not found on PATH: the Node client tests need Node >= 18 and npm"
  exit 77
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "SKIPPED: node $(node --version) is older than 18: the Node client tests need Node >= 18"
  exit 77
fi
if ! command -v npm >/dev/null; then
  echo "SKIPPED: npm not found on PATH: the Node client's dependencies cannot be installed"
  exit 77
fi
"$here/../../scripts/install-node-deps"
export GPUJOIND=$1
# One test file at a time where the runner takes the flag (each file starts its own
# gpujoind on free ports, so running them in parallel is correct, only heavier).
flags=()
help=$(node --help)
[[ $help == *--test-concurrency* ]] && flags=(--test-concurrency=1)
# Every test has a 60 s timeout of its own (the `test` of server.js); as a
# backstop, a test file is cancelled after 120 s (node applies --test-timeout to
# each file it runs; Node before 20.11 has no such flag).
[[ $help == *--test-timeout* ]] && flags+=(--test-timeout=120000)
exec node --test "${flags[@]}" "$here"/*.test.js
