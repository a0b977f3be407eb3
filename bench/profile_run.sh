#!/usr/bin/env bash
# Nsight Compute profile of the build and lookup kernels that gpujoin-bench runs
# (one launch each at full size), when `ncu` exists on the device host. Expects a
# bundle made by ../shared/tools/bundle-for-device (the first argument);
# writes $OUT/ncu.txt (or /tmp/gpujoin-device/ncu.txt) and prints a short summary.
set -uo pipefail
bundle=${1:?usage: profile_run.sh BUNDLE_DIR [groups]}
source "$bundle/env.sh"
out=${OUT:-/tmp/gpujoin-device}
mkdir -p "$out"
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "$ncu" ]; then echo "ncu: not found on this host"; exit 0; fi
echo "ncu: $ncu"
if [ "${2:-}" = hash_agg ]; then
  # The row hash kernels of `gpujoin-bench --only=hash` (int64 hash64 and hash32,
  # 16-byte strings hash64) and the grouped-sum kernels of `--only=aggregate
  # --groups=256` (int64 values): the first timed launch of each, with the
  # memory and warp-state sections.
  # With --reps=5 each case launches its kernel 7 times: skip 2, 9 and 16 profile
  # the first timed launch of hash64 int64, hash32 int64 and hash64 string.
  : > "$out/ncu_hash.txt"
  for skip in 2 9 16; do
    timeout "${NCU_TIMEOUT:-60}" "$ncu" --clock-control none --kernel-name 'regex:Hash(Fixed|Rows)Kernel' \
      --launch-skip $skip --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section Occupancy --section WarpStateStats --section LaunchStats \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum \
      "$bundle/bin/gpujoin-bench" --only=hash --reps=5 >> "$out/ncu_hash.txt" 2>&1
    echo "ncu hash skip $skip rc=$?"
  done
  timeout "${NCU_TIMEOUT:-120}" "$ncu" --clock-control none --kernel-name 'regex:AccumulateKernel' \
    --launch-skip 2 --launch-count 3 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats \
    --metrics dram__bytes_read.sum,smsp__inst_executed_op_shared_atom.sum \
    "$bundle/bin/gpujoin-bench" --only=aggregate --groups=256 > "$out/ncu_agg.txt" 2>&1
  echo "ncu agg rc=$?"
  for f in "$out/ncu_hash.txt" "$out/ncu_agg.txt"; do
    grep -E '^  [A-Za-z_].*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Compute \(SM\) Throughput|Registers Per|dram__bytes|shared_atom|Stall|Issued Warp' "$f" |
      sed -E 's/\(gpujoin::engine::detail::.*//; s/^ +//' | cut -c1-110 | head -80
  done
  exit 0
fi
if [ "${2:-}" = groups ]; then
  # The group pass of the first keep_all build `gpujoin-bench --only=multi_value`
  # runs (4 rows per key, 2^26 rows): the probe of every row, CUB's radix sort
  # passes, group bounds, sizes and the value list; per kernel its duration and
  # DRAM traffic (one pass: no replay). The lowest_row builds timed before it
  # sort too (the tile path): the group pass's sort kernels are those between
  # RowSlotsKernel and GroupBoundsKernel.
  timeout "${NCU_TIMEOUT:-200}" "$ncu" --clock-control none \
    --kernel-name 'regex:RowSlots|DeviceRadixSort|GroupBounds|GroupSizes|GroupValues' \
    --launch-count 90 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    "$bundle/bin/gpujoin-bench" --only=multi_value > "$out/ncu_groups.txt" 2>&1
  echo "ncu groups rc=$?"
  grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum|dram__bytes_(read|write).sum|DRAM Throughput' \
    "$out/ncu_groups.txt" | sed -E 's/\(gpujoin::engine::detail::DeviceTable.*//; s/^ +//' | cut -c1-110
  exit 0
fi
# Three passes over `gpujoin-bench --profile` (each operation runs three times:
# two warm-ups and one timed): the build kernels (direct insert, the tile
# kernels), the finalisation pass, then the lookup kernels (all hits and 50 %
# misses, load 0.8).
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
timeout "${NCU_TIMEOUT:-200}" "$ncu" --kernel-name 'regex:InsertKernel|TileDedupKernel|TileSortKernel|TilePlaceKernel' \
  --launch-count 20 $sections "$bundle/bin/gpujoin-bench" --profile > "$out/ncu_build.txt" 2>&1
echo "ncu build rc=$?"
# The finalisation pass of the direct build (values[row] gathered at random).
timeout "${NCU_TIMEOUT:-200}" "$ncu" --kernel-name 'regex:FinalizeKernel' --launch-count 6 $sections \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
  "$bundle/bin/gpujoin-bench" --profile > "$out/ncu_finalize.txt" 2>&1
echo "ncu finalize rc=$?"
# Load 0.8 only (skip load 0.5's 6 launches: hits and misses, three runs each).
timeout "${NCU_TIMEOUT:-200}" "$ncu" --kernel-name 'regex:LookupKernel' --launch-skip 6 \
  --launch-count 6 $sections --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum \
  "$bundle/bin/gpujoin-bench" --profile > "$out/ncu_lookup.txt" 2>&1
echo "ncu lookup rc=$?"
for f in "$out/ncu_build.txt" "$out/ncu_finalize.txt" "$out/ncu_lookup.txt"; do
  grep -E '^  [A-Za-z_].*\(|Duration|DRAM Throughput|L2 Hit Rate|Achieved Occupancy|Compute \(SM\) Throughput|Registers Per' "$f" |
    sed -E 's/\(gpujoin::engine::detail::DeviceTable.*//; s/^ +//' | cut -c1-110
done
