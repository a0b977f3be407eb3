#!/usr/bin/env bash
# Prints, one per line and sorted, the Debian/Ubuntu packages that ship the
# shared libraries the given ELF binaries load (ldd's resolved paths, mapped
# with dpkg-query -S). The Dockerfile's build stage runs it on the built
# binaries so that the runtime stage installs exactly those packages and no
# -dev package. Exits non-zero when a library is missing ("not found") or is
# not owned by any package, so a broken image fails at build time, not at run.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
for bin in "$@"; do
  [ -x "$bin" ] || { echo "runtime-packages: $bin: not an executable file" >&2; exit 1; }
done

ldd_out=$(ldd "$@")
if grep -q "not found" <<<"$ldd_out"; then
  echo "runtime-packages: unresolved libraries:" >&2
  grep "not found" <<<"$ldd_out" >&2
  exit 1
fi

# Owner of one library path; merged-/usr systems record either /lib/... or
# /usr/lib/..., so try the path as given, its real path and the other prefix.
owner() {
  local lib=$1 real candidates c
  real=$(readlink -f "$lib")
  candidates=("$lib" "$real")
  for c in "$lib" "$real"; do
    case $c in
      /usr/*) candidates+=("${c#/usr}") ;;
      *) candidates+=("/usr$c") ;;
    esac
  done
  for c in "${candidates[@]}"; do
    if out=$(dpkg-query -S "$c" 2>/dev/null); then
      # "libfoo1:amd64: /path" (a diversion line may come first; take the owner line).
      sed -n 's/^\([^ :]*\)\(:[a-z0-9]*\)\{0,1\}: .*/\1/p' <<<"$out" | head -n 1
      return 0
    fi
  done
  echo "runtime-packages: no package owns $lib" >&2
  return 1
}

# "libx.so.1 => /path/libx.so.1 (0x...)" lines; the dynamic loader and vDSO
# have no "=>" target and come with libc6 anyway.
libs=$(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$ldd_out" | sort -u)
{
  for lib in $libs; do
    owner "$lib"
  done
} | sort -u
