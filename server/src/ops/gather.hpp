// Gathered payload columns of Lookup and Join: the `select` of a
// request resolved against the index version it runs on, and the response
// Column messages the engine's GatherOutputs write into (the gather itself runs
// in the request's command graph, beside the probe).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "wire/column_codec.hpp"
#include "state/index_registry.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// One payload column a request selects.
struct SelectedColumn {
  uint32_t column = 0;  ///< position in the index's payload (HashIndex::payload())
  std::string name;
  engine::ColumnType type = engine::ColumnType::kInt32;
};

/// Resolves `select` (LookupRequest.select, JoinRequest.select) against the
/// payload of `version`, in select order. INVALID_ARGUMENT naming select[i] and the
/// name for a name the index has no column of, or one selected twice.
absl::StatusOr<std::vector<SelectedColumn>> ResolveSelect(
    const IndexVersion& version, const google::protobuf::RepeatedPtrField<std::string>& select);

/// Host bytes of the gathered columns of `rows` rows (values, bitmaps, string
/// offsets), not counting string value bytes, which only the gather knows.
uint64_t GatheredFixedBytes(std::span<const SelectedColumn> selected, uint64_t rows);

/// Host bytes of the objects a GatherTarget makes whatever its rows: per selected
/// column a Column message, its bookkeeping and its name (a bound, counted
/// against --max-result-bytes for every batch that selects columns).
uint64_t GatheredObjectBytes(std::span<const SelectedColumn> selected);

/// An upper bound of the encoded bytes of the selected columns' fields other than
/// their data, offsets and validity (name, type, length, null count, headers).
uint64_t GatheredHeaderBytes(std::span<const SelectedColumn> selected);

/// How many of `selected` are variable width (their value bytes share what is
/// left of a response's limit).
size_t VariableWidthCount(std::span<const SelectedColumn> selected);

/// The gathered columns of one lookup or join batch, written in place into
/// response Column messages.
class GatherTarget {
 public:
  /// Appends one Column per selected column to `out` (name, type), sized for
  /// `rows` output rows, and prepares the engine outputs that write into them;
  /// each string column may take at most `max_string_bytes` value bytes.
  GatherTarget(std::span<const SelectedColumn> selected, uint64_t rows, uint64_t max_string_bytes,
               google::protobuf::RepeatedPtrField<v1::Column>* out);
  GatherTarget(const GatherTarget&) = delete;
  GatherTarget& operator=(const GatherTarget&) = delete;

  /// The engine outputs for LookupNodeT::gather / JoinBatchT::gather (their
  /// buffers stay valid until Finish).
  std::vector<engine::GatherOutput> Outputs();

  /// After the run: keeps the first `kept` rows (a join's pairs written; a
  /// lookup's rows), sets length and null_count, and drops the validity bitmap of
  /// a column without nulls. Returns the bytes gathered (data, offsets, validity).
  uint64_t Finish(uint64_t kept);

 private:
  struct Target {
    uint32_t column = 0;
    engine::ColumnType type = engine::ColumnType::kInt32;
    v1::Column* message = nullptr;
    std::optional<PackedOutput<uint32_t>> offsets;  // variable width
    uint64_t null_count = 0;
  };
  uint64_t max_string_bytes_;
  std::vector<Target> targets_;
};

}  // namespace gpujoin::server
