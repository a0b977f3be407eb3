// HashIndexSpec validation and sizing helpers shared by every backend.
#include "gpujoin/engine/hash_index.hpp"

#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::engine {

namespace {
constexpr uint64_t kMaxCapacity = uint64_t{1} << 31;
}  // namespace

uint64_t GroupStorageBytes(const HashIndexSpec& spec, uint64_t slots, uint64_t rows) {
  if (spec.duplicates != DuplicatePolicy::kKeepAll) return 0;
  return slots * 8 + rows * 4;
}

absl::Status SnapshotKeyTypeMismatch(KeyType held, KeyType asked) {
  return absl::FailedPreconditionError(
      absl::StrCat("snapshot of ", std::string(KeyTypeName(asked)), " keys asked of an index with ",
                   std::string(KeyTypeName(held)), " keys (use ",
                   held == KeyType::kUint64 ? "Snapshot64" : "Snapshot", ")"));
}

absl::Status HashIndexSpec::Validate() const {
  if (capacity == 0 || !std::has_single_bit(capacity) || capacity > kMaxCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("capacity must be a power of two between 1 and 2^31, got ", capacity));
  }
  if (max_probe_count > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("max_probe_count ", max_probe_count,
                                                   " exceeds capacity ", capacity,
                                                   " (0 means capacity)"));
  }
  if (duplicates != DuplicatePolicy::kLowestRow && duplicates != DuplicatePolicy::kKeepAll) {
    return absl::InvalidArgumentError(absl::StrCat("duplicates ", static_cast<int>(duplicates),
                                                   " is neither lowest_row nor keep_all"));
  }
  if (key_type != KeyType::kUint32 && key_type != KeyType::kUint64 &&
      key_type != KeyType::kColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key_type ", static_cast<int>(key_type), " is neither uint32, uint64 nor columns"));
  }
  if (key_type != KeyType::kColumns) {
    if (!key_columns.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("key_columns: ", key_columns.size(), " given to a ",
                       std::string(KeyTypeName(key_type)), " index (key columns need key_type columns)"));
    }
    return absl::OkStatus();
  }
  if (key_columns.empty() || key_columns.size() > kMaxKeyColumns) {
    return absl::InvalidArgumentError(absl::StrCat("key_columns: ", key_columns.size(),
                                                   " columns; a key schema has 1 to ",
                                                   kMaxKeyColumns));
  }
  for (size_t c = 0; c < key_columns.size(); ++c) {
    if (!IsKeyColumnType(key_columns[c])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key_columns[", c, "]: ", std::string(ColumnTypeName(key_columns[c])),
          " cannot be a key column (int32, int64, uint32, uint64, string or binary)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> CapacityForRows(uint64_t expected_rows, double target_load_factor) {
  if (!(target_load_factor > 0.0 && target_load_factor <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_load_factor must be in (0, 1], got ", target_load_factor));
  }
  const double needed = std::ceil(static_cast<double>(expected_rows) / target_load_factor);
  if (needed > static_cast<double>(kMaxCapacity)) {
    return absl::InvalidArgumentError(absl::StrCat("expected_rows ", expected_rows,
                                                   " at load factor ", target_load_factor,
                                                   " needs more than the maximum capacity 2^31"));
  }
  const uint64_t slots = std::max<uint64_t>(1, static_cast<uint64_t>(needed));
  return static_cast<uint32_t>(std::bit_ceil(slots));
}

}  // namespace gpujoin::engine
