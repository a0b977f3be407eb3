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
# The NVIDIA driver's libraries are absent from build images and mounted into
# containers by the NVIDIA Container Toolkit, so they need no package.
driver_libs='^\s*(libcuda|libnvidia-ml)\.so\.1 => not found'
unresolved=$(grep "not found" <<<"$ldd_out" | grep -Ev "$driver_libs" || true)
if [ -n "$unresolved" ]; then
  echo "runtime-packages: unresolved libraries:" >&2
  echo "$unresolved" >&2
  exit 1
fi

# "libx.so.1 => /path/libx.so.1 (0x...)" lines; the dynamic loader and vDSO
# have no "=>" target and come with libc6 anyway.
mapfile -t libs < <(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$ldd_out" | sort -u)

# Merged-/usr systems record a library under /lib/... or /usr/lib/..., so ask
# dpkg about the path as given, its real path and the other prefix, all in one
# (slow) dpkg-query call; paths no package owns are simply absent from its answer.
candidates() {
  local lib=$1 real c
  real=$(readlink -f "$lib")
  for c in "$lib" "$real"; do
    echo "$c"
    case $c in
      /usr/*) echo "${c#/usr}" ;;
      *) echo "/usr$c" ;;
    esac
  done
}
mapfile -t all < <(for lib in "${libs[@]}"; do candidates "$lib"; done | sort -u)
[ ${#all[@]} -gt 0 ] || exit 0
# Lines "pkg[:arch][, pkg2...]: /path"; skip diversion notes.
owners=$(dpkg-query -S "${all[@]}" 2>/dev/null | grep -v '^diversion ' || true)

status=0
packages=()
for lib in "${libs[@]}"; do
  pkg=""
  while read -r c; do
    pkg=$(awk -v path="$c" 'index($0, ": " path) && substr($0, length($0) - length(path) + 1) == path {
             sub(/: .*/, ""); sub(/,.*/, ""); sub(/:[a-z0-9]+$/, ""); print; exit }' <<<"$owners")
    [ -n "$pkg" ] && break
  done < <(candidates "$lib")
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package owns $lib" >&2
    status=1
  else
    packages+=("$pkg")
  fi
done
[ "$status" -eq 0 ] || exit "$status"
printf '%s\n' "${packages[@]}" | sort -u
