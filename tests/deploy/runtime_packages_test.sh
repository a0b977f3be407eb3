#!/usr/bin/env bash
# Checks deploy/docker/runtime-packages.sh, which the Dockerfile's build stage
# uses to choose the runtime image's packages, on binaries built here:
#   1. it lists the gRPC runtime library package and no -dev package;
#   2. it fails, naming the library, when a library is owned by no package.
#   runtime_packages_test.sh SCRIPT BINARY...
set -euo pipefail
script=$1
shift
out=$("$script" "$@") || { echo "FAIL: $script $* exited non-zero" >&2; exit 1; }
echo "packages for $*:"
echo "$out" | sed 's/^/  /'
grep -q '^libgrpc++' <<<"$out" || { echo "FAIL: no libgrpc++ runtime package listed" >&2; exit 1; }
if grep -- '-dev$' <<<"$out"; then
  echo "FAIL: a -dev package is listed for the runtime image" >&2
  exit 1
fi

# A copy of libz.so.1 outside any package, found first through LD_LIBRARY_PATH.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
zlib=$(ldd "$1" | awk '$1 == "libz.so.1" {print $3}')
if [ -z "$zlib" ]; then
  echo "FAIL: $1 does not load libz.so.1; the negative check needs another library" >&2
  exit 1
fi
cp "$zlib" "$tmp/"
if LD_LIBRARY_PATH="$tmp" "$script" "$1" >"$tmp/out" 2>"$tmp/err"; then
  echo "FAIL: $script accepted a library no package owns ($tmp/libz.so.1)" >&2
  exit 1
fi
grep -q "no package owns $tmp/libz.so.1" "$tmp/err" ||
  { echo "FAIL: unexpected error text: $(cat "$tmp/err")" >&2; exit 1; }
echo "ok: a library owned by no package is rejected: $(cat "$tmp/err")"
