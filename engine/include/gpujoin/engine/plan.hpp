// Plans: lookups on several indexes, filters, a grouped aggregation,
// projection and a limit over the rows of a stream's batches, run by the
// engine as one request (docs/engine.md "Plans"; the Query RPC, docs/api.md).
//
// A Plan is already resolved: columns are positions in the table each step
// sees, payload columns positions in an index's payload, types checked. The
// server compiles it from its wire form against the indexes' schemas
// (server/src/plan/); PlanRun executes it batch by batch on a Backend. An
// aggregate plan of the device's shape runs on the backend's device when it
// has one (plan_device.hpp: the CUDA backend). Otherwise the independent
// lookups of a batch are one command graph of LookupNodeT / JoinNodeT (with
// their payload gathers) and its measures one graph of AggregateNodes, so the
// probes, gathers and aggregation run where the backend runs them; filter
// masks, row compaction and group codes are computed on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

class Backend;
class DevicePlanBatch;
struct DevicePlanInput;

/// A host column a plan reads or makes, in Arrow's layout: fixed-width values
/// little-endian (rows * width bytes), kBool a bitmap, kString and kBinary
/// rows + 1 uint32 offsets into `data`. `validity` empty = no nulls, else a
/// bitmap (1 = valid); a null row's value bytes are zero (strings: empty).
struct PlanColumn {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint32_t> offsets;
  std::vector<uint8_t> validity;

  bool valid(uint64_t row) const { return validity.empty() || BitAt(validity, row); }
  /// Row `row` of a kString / kBinary column.
  std::string_view text(uint64_t row) const {
    return {reinterpret_cast<const char*>(data.data()) + offsets[row],
            offsets[row + 1] - offsets[row]};
  }
  /// Row `row` of a fixed-width column of C++ type T.
  template <class T>
  T value(uint64_t row) const {
    T v;
    std::memcpy(&v, data.data() + row * sizeof(T), sizeof(T));
    return v;
  }
  /// Host bytes the column holds.
  uint64_t bytes() const {
    return data.size() + offsets.size() * sizeof(uint32_t) + validity.size();
  }
};

/// Named columns of one length.
struct PlanTable {
  std::vector<std::string> names;
  std::vector<PlanColumn> columns;
  uint64_t rows = 0;

  uint64_t bytes() const {
    uint64_t b = 0;
    for (const PlanColumn& c : columns) b += c.bytes();
    return b;
  }
};

/// A literal of a filter: an integer (any int64 or uint64 value), a float, a
/// string (also for binary columns) or a boolean.
struct PlanLiteral {
  enum class Kind { kInteger, kFloat, kString, kBool };
  Kind kind = Kind::kInteger;
  __int128 integer = 0;
  double real = 0;
  std::string text;
  bool boolean = false;
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe };

/// A filter expression over the columns of the table its step sees, with SQL's
/// three-valued logic (docs/api.md "Query").
struct PlanExpr {
  enum class Kind { kCompare, kIsNull, kIsNotNull, kIn, kNotIn, kAnd, kOr, kNot };
  Kind kind = Kind::kCompare;
  CompareOp op = CompareOp::kEq;       ///< kCompare
  uint32_t column = 0;                 ///< kCompare, kIsNull, kIsNotNull, kIn, kNotIn
  std::vector<PlanLiteral> literals;   ///< kCompare: one; kIn, kNotIn: one or more
  std::vector<PlanExpr> children;      ///< kAnd, kOr: two or more; kNot: one
};

/// Looks the key formed by `key_columns` up in the step's index (given to each
/// run: PlanRun::RunBatch's `indexes[index_slot]`) and appends the payload
/// columns `select` (positions in its payload) and a kBool found column. For
/// a key word index `key_columns` is one integer column (int32, int64, uint32,
/// uint64; a null or a value the key word cannot hold is missing); for a key
/// schema one column per key column, of its types.
struct PlanLookupStep {
  uint32_t index_slot = 0;
  KeyType key_type = KeyType::kUint32;
  std::vector<uint32_t> key_columns;
  std::vector<uint32_t> select;
  JoinKind kind = JoinKind::kInner;
  /// Optional, one per `select` entry: -1, or the label table
  /// (Plan::label_types) of a kString / kBinary entry. Such an entry comes out
  /// as a kUint32 column of label ids: the column's values numbered by the run
  /// in first-seen order, the same over the whole stream whatever index
  /// version a batch reads. When the index keeps a live dictionary of the
  /// column (HashIndex::LiveDictionaryOf) its codes are gathered instead of
  /// the strings and each distinct code of a batch is labelled once.
  std::vector<int32_t> select_labels;
};

struct PlanFilterStep {
  PlanExpr where;
};

/// One measure of an aggregation. `column` is unset (kNoColumn) for count().
struct PlanMeasure {
  static constexpr uint32_t kNoColumn = 0xffffffffu;
  AggregateOp op = AggregateOp::kCount;
  uint32_t column = kNoColumn;
  /// kCount of a float column: count its finite values (those kSum and kMean
  /// take) rather than its non-null ones.
  bool finite_only = false;
};

/// Groups by `group_by` (integer, kBool, kString, kBinary columns; nulls form
/// one group) in first-arrival order; the output has the group-by columns then
/// one column per measure (docs/api.md gives the types).
struct PlanAggregateStep {
  std::vector<uint32_t> group_by;
  std::vector<PlanMeasure> measures;
  /// Optional, one per measure: the names errors give them (their output columns).
  std::vector<std::string> measure_names;
  /// Optional, one per group_by entry: -1, or the label table whose ids the
  /// column holds (a lookup's select_labels); its output column then has the
  /// labels, of the table's type.
  std::vector<int32_t> group_labels;
};

/// Keeps `columns` in this order (names are the compiler's business).
struct PlanProjectStep {
  std::vector<uint32_t> columns;
};

/// Keeps the first `rows` rows that reach it over the whole stream.
struct PlanLimitStep {
  uint64_t rows = 0;
};

using PlanStep =
    std::variant<PlanLookupStep, PlanFilterStep, PlanAggregateStep, PlanProjectStep, PlanLimitStep>;

/// The steps and the number of index slots the lookup steps use.
struct Plan {
  std::vector<PlanStep> steps;
  uint32_t index_slots = 0;
  /// The column types the aggregate step sees (aggregate plans; a labelled
  /// column is kUint32).
  std::vector<ColumnType> aggregate_input_types;
  /// The type (kString or kBinary) of each label table.
  std::vector<ColumnType> label_types;
  /// Position of the aggregate step, or steps.size() for a row plan.
  size_t AggregatePosition() const;
};

/// What one step did in one run.
struct PlanStepStatistics {
  uint64_t rows_in = 0;
  uint64_t rows_out = 0;
  QueryStatistics query;  ///< lookup steps
  bool ran = false;
  /// Ran on the backend's device (plan_device.hpp), else on the host path.
  bool on_device = false;
};

/// Bounds of one plan run (the service's limits).
struct PlanLimits {
  /// Most host bytes one batch's table may grow to (a keep_all lookup expands
  /// rows); RESOURCE_EXHAUSTED naming `bytes_limit_name` beyond it.
  uint64_t max_table_bytes = uint64_t{1} << 30;
  std::string bytes_limit_name = "the plan's table bytes";
  /// Most groups an aggregation may hold.
  uint64_t max_groups = uint64_t{1} << 24;
  std::string groups_limit_name = "the plan's groups";
  /// Whether batches of a device-shaped plan run as the backend's lowered
  /// batch (plan_device.hpp; every backend has one). False runs every step
  /// on the host path: the tests' reference.
  bool device_batches = true;
};

/// Executes a plan over a stream of batches, in stream order (not thread-safe:
/// one batch at a time). Row plans answer every batch; aggregate plans gather
/// every batch's rows into groups and answer at Finish (or Snapshot).
class PlanRun {
 public:
  PlanRun(Backend* backend, Plan plan, PlanLimits limits);
  ~PlanRun();
  PlanRun(const PlanRun&) = delete;
  PlanRun& operator=(const PlanRun&) = delete;

  const Plan& plan() const;
  bool aggregates() const;

  /// Runs the steps before the aggregate step (all steps of a row plan) on
  /// `input`; `indexes` holds one index per slot (those of steps after the
  /// aggregate may be null). A row plan returns the result rows; an aggregate
  /// plan folds them into its groups and returns an empty table. `statistics`
  /// gets one entry per step (those that did not run: ran false). A failed
  /// batch changes nothing of the run's state (limit, groups).
  absl::StatusOr<PlanTable> RunBatch(PlanTable input, std::span<const HashIndex* const> indexes,
                                     std::vector<PlanStepStatistics>* statistics);

  /// Aggregate plans: the groups so far, through the steps after the
  /// aggregate (OUT_OF_RANGE when an integer sum left its type). Can be
  /// called more than once. The aggregate step's statistics are the
  /// stream's: rows folded in so far, groups out.
  absl::StatusOr<PlanTable> Groups(std::span<const HashIndex* const> indexes,
                                   std::vector<PlanStepStatistics>* statistics);

 private:
  /// A batch whose leading steps ran on the backend's device (plan_device.hpp).
  absl::StatusOr<PlanTable> RunDeviceBatch(std::unique_ptr<DevicePlanBatch> batch,
                                           const DevicePlanInput& shape,
                                           PlanTable input,
                                           std::span<const HashIndex* const> indexes,
                                           std::vector<PlanStepStatistics>* statistics);

  struct State;
  std::unique_ptr<State> state_;
};

/// The type of the result column of `measure` over a column of `input`
/// (kUint64 for count): sum int64/uint64/the float type, min/max the input
/// type, mean kFloat64 (kFloat32 for float32).
ColumnType PlanMeasureType(AggregateOp op, ColumnType input);

/// Whether a column of `type` can be grouped by / compared with literals.
bool IsGroupableType(ColumnType type);
bool IsIntegerType(ColumnType type);
/// Integer or float (a measure's sum/min/max/mean input, a number literal's column).
bool IsNumericType(ColumnType type);

}  // namespace gpujoin::engine
