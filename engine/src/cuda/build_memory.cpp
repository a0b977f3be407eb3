#include "cuda/build_memory.hpp"

#include <algorithm>

#include "cuda/index/groups.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/payload/payload_ops.hpp"

namespace gpujoin::engine::detail {
namespace {

// A stream-ordered allocation of `bytes` as the pool may charge it.
uint64_t PoolBytes(uint64_t bytes) {
  return (bytes + kPoolGranularityBytes - 1) / kPoolGranularityBytes * kPoolGranularityBytes;
}

// What storing `shape.payload` takes (StorePayload, lowering/lower_payload.cpp): the
// winners (kLowestRow: one per slot; a kKeepAll build reads the group pass's
// rows instead) and null counts for the whole store, and per column its upload
// (values or string bytes and offsets, validity) and the string scan's scratch
// (over the slots, or the kept rows, at most every row). Columns are stored one
// after the other, each freeing its upload first, but the pool need not reuse a
// freed block for an allocation of another size, so every column is counted.
uint64_t PayloadTransientBytes(const HashIndexSpec& spec, const BuildShape& shape) {
  if (shape.payload.empty()) return 0;
  const uint64_t rows = shape.rows;
  const bool keep_all = spec.duplicates == DuplicatePolicy::kKeepAll;
  const uint64_t positions = keep_all ? rows : TableAllocationSlots(spec.capacity);
  uint64_t bytes = (keep_all ? 0 : PoolBytes(positions * sizeof(uint32_t))) +
                   PoolBytes(shape.payload.size() * sizeof(unsigned long long));
  for (const PayloadShape& column : shape.payload) {
    if (IsVariableWidth(column.type)) {
      bytes += PoolBytes(column.string_bytes) + PoolBytes((rows + 1) * sizeof(uint64_t)) +
               PoolBytes(StoredStringScanBytes(positions));
    } else if (column.type == ColumnType::kBool) {
      bytes += PoolBytes(BitmapBytes(rows));
    } else {
      bytes += PoolBytes(rows * ColumnWidth(column.type));
    }
    if (column.nullable) bytes += PoolBytes(BitmapBytes(rows));
  }
  return bytes;
}

}  // namespace

uint64_t BuildNodeTransientBytes(const HashIndexSpec& spec, const BuildShape& shape, BuildPath path,
                                 uint64_t transient_max_bytes) {
  const uint64_t rows = shape.rows;
  const uint64_t payload = PayloadTransientBytes(spec, shape);
  if (rows == 0) return payload;
  // Key words, or a key schema's fingerprints, row validity and hash validity
  // (its key columns are the index's memory once uploaded: key_column_bytes).
  uint64_t uploads =
      shape.key_type == KeyType::kColumns
          ? PoolBytes(rows * sizeof(uint64_t)) + PoolBytes(rows) + PoolBytes((rows + 7) / 8)
          : PoolBytes(rows * KeyBytes(shape.key_type));
  if (shape.batch) {
    if (shape.batch_validity) uploads += PoolBytes(rows * sizeof(uint32_t));
    uploads += PoolBytes(uint64_t{shape.batch_chunks} * sizeof(uint64_t));  // chunk starts
    uploads += PoolBytes(uint64_t{shape.batch_chunks} * sizeof(uint32_t));  // chunk bases
  } else if (shape.explicit_values) {
    uploads += PoolBytes(rows * sizeof(uint32_t));
  }
  if (shape.key_type == KeyType::kColumns) {
    // The grouping pass's table (key_rows.hpp), freed before a kKeepAll
    // build's group pass (after which the payload is stored) or the payload
    // (whose winners PayloadTransientBytes counts): the larger of the two.
    const uint64_t groups = spec.duplicates == DuplicatePolicy::kKeepAll
                                ? PoolBytes(GroupScratchBytes(spec.capacity, rows, true))
                                : 0;
    return uploads + std::max(PoolBytes(KeyBuildScratchBytes(rows)), groups + payload);
  }
  const uint64_t buffer = BuildTransientBytes(spec.capacity, rows, path, shape.key_type);
  // A buffer over the cap is never allocated: the build inserts directly.
  const bool allocated = buffer != 0 && (transient_max_bytes == 0 || buffer <= transient_max_bytes);
  // A kKeepAll build's group pass (after the table, alive while the payload is
  // stored), with a winner per slot, which it takes only after overflow.
  const uint64_t groups = spec.duplicates == DuplicatePolicy::kKeepAll
                              ? PoolBytes(GroupScratchBytes(spec.capacity, rows, true))
                              : 0;
  // The tile buffer is freed before the payload is stored; both are counted
  // for the same reason as the columns.
  return uploads + (allocated ? PoolBytes(buffer) : 0) + groups + payload;
}

}  // namespace gpujoin::engine::detail
