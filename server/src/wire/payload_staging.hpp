// The payload columns of one BuildIndex call: their declaration in
// IndexSpec.payload, and the rows that BuildChunk.payload sends for them, staged
// into one contiguous host column per declared column in the engine's layout
// (little-endian values, LSB-first bitmaps, uint64 string offsets), ready for
// the build node as engine::ColumnViews.
//
// Every check of the wire rules (docs/api.md, "Payload columns") happens here,
// before anything is copied, and fails with INVALID_ARGUMENT naming the chunk's
// field (`chunks[N].payload[M]`) and the column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// Most payload columns one index may declare (each costs a staged column and a
/// stored one; a lookup or join selects each at most once).
inline constexpr size_t kMaxPayloadColumns = 1024;

/// The staged payload of one build. Not thread-safe: owned by one BuildSession.
class PayloadStaging {
 public:
  /// One wire column chunk that passed validation: views of the chunk's Column
  /// message, which must stay alive until Append.
  struct Part {
    size_t column = 0;  ///< position in the declaration
    uint64_t rows = 0;
    /// Fixed width: rows * width bytes; kBool: the bitmap; variable width: the
    /// bytes the rows cover, data[offsets[0], offsets[rows]).
    std::string_view data;
    /// Variable width: the wire's rows + 1 int32 offsets (not rebased).
    DecodedColumn<int32_t> offsets;
    /// Empty when the part has no null row; else its validity bitmap.
    std::string_view validity;
  };
  /// The validated payload of one BuildChunk, in wire order.
  using Chunk = std::vector<Part>;

  /// Declares the columns of `specs` (IndexSpec.payload): names
  /// [A-Za-z0-9_.-]{1,128}, unique, a column type other than UNSPECIFIED, at most
  /// kMaxPayloadColumns. INVALID_ARGUMENT naming spec.payload[i].name or .type.
  absl::Status Declare(const google::protobuf::RepeatedPtrField<v1::PayloadColumnSpec>& specs);

  /// Checks one chunk's payload columns (`chunk_field` is "chunks[N]"): each names a
  /// declared column, has its declared type, and `length` rows whose data,
  /// offsets and validity have the sizes of that type (docs/api.md); offsets are
  /// non-decreasing from >= 0 to at most the data's bytes; STRING rows are valid
  /// UTF-8; no column grows past `max_rows` rows, which `max_rows_are` names
  /// in the error ("the most a build may have"). Returns the parts to append.
  absl::StatusOr<Chunk> Validate(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                 std::string_view chunk_field, uint64_t max_rows,
                                 std::string_view max_rows_are = "the most a build may have") const;

  /// Host bytes that Append(chunk) will add to bytes() (the growth of the staged
  /// columns' buffers), so that they can be counted before they are taken.
  uint64_t GrowthBytes(const Chunk& chunk) const;

  /// Appends the parts to their columns (bitmaps continue at the column's row,
  /// whatever its bit position; offsets are rebased to the staged bytes).
  void Append(const Chunk& chunk);

  /// INVALID_ARGUMENT naming the first column whose rows differ from `key_rows`
  /// (every column must have one row per key row at the end of the input).
  absl::Status CheckRows(uint64_t key_rows) const;

  /// The staged columns for the build node (valid until the next Append or Clear).
  std::vector<engine::ColumnView> Views() const;
  /// Their shapes (type, nulls, string bytes) for the memory estimates.
  std::vector<engine::PayloadShape> Shapes() const;
  /// The declared names, in declaration order.
  std::vector<std::string> Names() const;

  size_t size() const { return columns_.size(); }
  bool empty() const { return columns_.empty(); }
  /// Host bytes the staged columns hold (their buffers' capacities).
  uint64_t bytes() const;
  /// Frees the staged rows (the declaration stays).
  void Clear();

 private:
  struct Column {
    std::string name;
    engine::ColumnType type = engine::ColumnType::kInt32;
    uint64_t rows = 0;
    std::vector<std::byte> data;    // values, the kBool bitmap, or string bytes
    std::vector<uint64_t> offsets;  // variable width: rows + 1, offsets[0] = 0
    std::vector<uint8_t> validity;  // kept from the column's first null row on
    bool nullable = false;          // a row was null: `validity` covers every row
  };
  /// The sizes a column's buffers reach when `chunk`'s parts for it are appended.
  struct Target {
    uint64_t rows = 0;
    size_t data = 0, offsets = 0, validity = 0;
  };
  Target TargetOf(size_t column, const Chunk& chunk) const;

  std::vector<Column> columns_;
};

}  // namespace gpujoin::server
