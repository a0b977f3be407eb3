// The requests of fuzz_mutate (docs/operations.md, "Fuzzing"): its input
// read as the index's setup and, frame by frame, as Mutate batches with at most
// one defect each (mutate_model.hpp, mutate_input, has the byte layout), each
// with the answer the documented checks of ops/mutate.cpp give it, in their
// order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/v1/gpujoin.pb.h"
#include "key_model.hpp"
#include "mutate_model.hpp"

namespace gpujoin::fuzz::mutate_input {

/// The index every input mutates, and its payload column.
inline constexpr char kIndex[] = "m";
inline constexpr char kColumn[] = "p";

/// An input frame's bytes, read in order; zeros once they run out.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint8_t Next() { return pos_ < bytes_.size() ? static_cast<uint8_t>(bytes_[pos_++]) : 0; }
  /// The next `n` bytes (zeros past the end).
  std::string Take(size_t n);
  bool done() const { return pos_ >= bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

/// The index an input sets up (the setup frame's first three bytes).
struct Setup {
  KeyKind kind = kUint32;
  bool keep_all = false;
  bool explicit_values = false;
  bool payload = false;
  v1::ColumnType payload_type = v1::COLUMN_TYPE_INT64;
  uint32_t capacity = 8;
  double max_load_factor = 0;  ///< unset: 0.8
  uint32_t probe_bound = 0;    ///< 0: the capacity
  uint32_t first_value = 0;
  uint64_t max_rows = 0;  ///< --max-mutation-rows
  KeySchemaModel schema;
  KeyRowList universe;

  bool words() const { return kind == kUint32 || kind == kUint64; }
  size_t width() const { return kind == kUint64 ? 8 : 4; }
  double load_factor() const { return max_load_factor == 0 ? 0.8 : max_load_factor; }
};

/// Reads the setup frame's first three bytes.
Setup ReadSetup(Reader& in);

/// Reads one key code (kRawKey).
std::optional<KeyTuple> ReadKey(Reader& in, const Setup& s);

/// `keys` (key words) as a uint32 or uint64 column, packed or as a values list
/// (which is present even without rows).
v1::U32Column Words32(const KeyRowList& keys, bool as_list);
v1::U64Column Words64(const KeyRowList& keys, bool as_list);

/// Sets the keys of a probe (LookupRequest, LeftBatch) in the index's key field.
template <typename Message>
void PutProbeKeys(const Setup& s, const KeyRowList& keys, Message* m) {
  if (s.kind == kUint32) {
    *m->mutable_keys() = Words32(keys, false);
  } else if (s.kind == kUint64) {
    *m->mutable_keys64() = Words64(keys, false);
  } else {
    AppendKeyColumns(s.schema, keys, /*named=*/true, m->mutable_key_columns());
  }
}

/// What a batch must get: OK, or an error code and text its message contains.
struct Expected {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string text;
};

/// One batch: the request, its keys as the model reads them (deletes also as
/// the model counts them), the upsert rows' values and payload, and the
/// answer the documented checks give it.
struct Batch {
  v1::MutateRequest request;
  KeyRowList deletes;
  std::vector<DeleteKey> delete_keys;
  KeyRowList upserts;
  std::vector<ModelRow> rows;
  Expected expected;
};

/// Batch `b` (1-based) of the input, from its frame: an index of setup `s`
/// that gives rows from `next_row_id` (a row-ID index) and holds what `model`
/// holds (it tells the keys no index can hold).
Batch MakeBatch(const Setup& s, uint32_t b, Reader& in, uint64_t next_row_id,
                const MutationModel& model);

}  // namespace gpujoin::fuzz::mutate_input
