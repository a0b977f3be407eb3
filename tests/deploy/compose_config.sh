#!/usr/bin/env bash
# docker-compose validates deploy/docker-compose.yml without a Docker engine:
# the default profile (deploy/.env: gpu), --profile gpu, --profile cpu,
# COMPOSE_PROFILES=cpu and --profile sharded must all render, list the three
# profiles, and the rendered configuration must pass deploy_lint.py's
# structure checks.
#   compose_config.sh DOCKER_COMPOSE PYTHON SOURCE_DIR
set -euo pipefail
compose=$1 python=$2 src=$3
here=$(cd "$(dirname "$0")" && pwd)
file="$src/deploy/docker-compose.yml"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Keep the caller's Docker settings out of the check.
export DOCKER_CONFIG="$out/docker-config"
unset DOCKER_HOST COMPOSE_FILE COMPOSE_PROJECT_NAME
run() {
  local label=$1
  shift
  if ! "$@" >"$out/$label.yml" 2>"$out/$label.err"; then
    echo "FAIL: '$*' exited non-zero:" >&2
    cat "$out/$label.err" >&2
    exit 1
  fi
  echo "ok: $*"
}
run default env -u COMPOSE_PROFILES "$compose" -f "$file" config
run gpu "$compose" -f "$file" --profile gpu config
run cpu "$compose" -f "$file" --profile cpu config
run cpu-env env COMPOSE_PROFILES=cpu "$compose" -f "$file" config
run sharded "$compose" -f "$file" --profile sharded config
run quiet "$compose" -f "$file" config --quiet
"$compose" -f "$file" config --profiles >"$out/profiles.txt"
for p in cpu gpu sharded; do
  grep -qx "$p" "$out/profiles.txt" || { echo "FAIL: profile $p missing; profiles: $(cat "$out/profiles.txt")" >&2; exit 1; }
done
grep -qx "COMPOSE_PROFILES=gpu" "$src/deploy/.env" ||
  { echo "FAIL: deploy/.env must default COMPOSE_PROFILES=gpu (docs/operations.md relies on it)" >&2; exit 1; }
for label in default gpu cpu sharded; do
  "$python" "$here/deploy_lint.py" compose "$out/$label.yml" "$src"
done
