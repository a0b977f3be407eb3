#!/usr/bin/env bash
# Runs a deployment test command after checking that the tools it needs exist,
# so a missing tool fails the test with a message that names the Debian
# package (scripts/install-deps installs them all) instead of a cryptic error.
#
#   require.sh [--tool NAME PATH PACKAGE]... [--pymod PYTHON MODULE PACKAGE]... -- COMMAND...
#
# PATH is what CMake's find_program found (may be "...-NOTFOUND").
set -euo pipefail
missing=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --tool)
      name=$2 path=$3 package=$4
      shift 4
      if [ -z "$path" ] || [[ $path == *-NOTFOUND ]] || [ ! -x "$path" ]; then
        echo "FAIL: $name not found (CMake found: '${path}'). Install the Debian package '$package'" \
             "(scripts/install-deps does), then re-run cmake." >&2
        missing=1
      fi
      ;;
    --pymod)
      python=$2 module=$3 package=$4
      shift 4
      if ! "$python" -c "import $module" 2>/dev/null; then
        echo "FAIL: $python cannot import $module. Install the Debian package '$package'" \
             "(scripts/install-deps does)." >&2
        missing=1
      fi
      ;;
    *)
      echo "require.sh: unknown argument $1" >&2
      exit 2
      ;;
  esac
done
[ "${1:-}" = "--" ] || { echo "require.sh: missing -- COMMAND" >&2; exit 2; }
shift
[ "$missing" -eq 0 ] || exit 1
exec "$@"
