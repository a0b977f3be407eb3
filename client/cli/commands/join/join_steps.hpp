// The steps of `gpujoin join`, which join_command.cpp runs in order: check the
// options (join_options.cpp), open the inputs (join_options.cpp), make the
// index the left side probes (join_right_side.cpp: a temporary index from the
// right file, or a resident index), then stream the left batches and write
// their pairs as rows (join_output.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "columns/columns.hpp"
#include "columns/key_columns.hpp"
#include "commands.hpp"
#include "commands/join/join_rows.hpp"
#include "input/table_reader.hpp"
#include "output/row_writer.hpp"

namespace gpujoin::cli {

/// The options of a join, checked and split.
struct JoinOptions {
  std::string name;           ///< the resident index ("" for an ad-hoc join)
  std::string right_file;     ///< --right FILE ("" with --right index:NAME)
  bool payload_join = false;  ///< --right index:NAME: the index's payload columns follow
  client::JoinKind kind = client::JoinKind::kInner;
  /// --on COL or LEFTCOL=RIGHTCOL; several columns (a composite key) joined
  /// by commas, as `left_cols` and `right_cols` hold them.
  std::string left_col, right_col;
  std::vector<std::string> left_cols, right_cols;
  KeyKind flag = KeyKind::kAuto;  ///< --key-type's kind (kColumns: `str` or per column)
  KeyTypeFlag key_type;           ///< --key-type
};

/// Checks `a` (UsageFail naming the option otherwise) and splits --right and --on.
JoinOptions ParseJoinOptions(const JoinArgs& a);

/// The opened inputs. Each side's first batch decides an inferred key type, so
/// that a bad cell there is an input error before any call.
struct JoinInputs {
  std::unique_ptr<TableReader> left;
  /// Ad hoc: the right file, streamed into the temporary index.
  std::unique_ptr<TableReader> right;
  /// A resident join with --right FILE: the right file read whole (its values
  /// are rows of the file).
  std::optional<Table> right_table;
  Table left_first, right_first;
  bool left_more = false, right_more = false;
  KeyKindTracker left_tracker, right_tracker;
  /// Each side's key as its first batch reads (PlanKey): an integer kind, or
  /// kColumns (string and composite keys, `left_plan` and `right_plan`).
  KeyKind left_kind = KeyKind::kAuto, right_kind = KeyKind::kAuto;
  KeyPlan left_plan, right_plan;
};

/// Opens the inputs (--left, and the right file `o` names) into `in` and reads
/// each side's first batch; UsageFail on a missing column or a bad first batch.
void OpenJoinInputs(const Globals& g, const JoinArgs& a, const JoinOptions& o, JoinInputs* in);

/// Drops a temporary index when the ad-hoc join ends, whatever happens.
class TempIndex {
 public:
  TempIndex(client::Client* c, std::string name) : c_(c), name_(std::move(name)) {}
  TempIndex(const TempIndex&) = delete;
  TempIndex& operator=(const TempIndex&) = delete;
  ~TempIndex() {
    if (armed_) (void)c_->DropIndex(name_);
  }
  void Arm() { armed_ = true; }
  const std::string& name() const { return name_; }

 private:
  client::Client* c_;
  std::string name_;
  bool armed_ = false;
};

/// The index the left side probes and the columns it appends to each row.
struct JoinTarget {
  std::string index;
  client::DuplicatePolicy policy = client::DuplicatePolicy::kLowestRow;
  uint64_t max_group_rows = 1;  ///< the largest group of a key (1 without keep_all)
  KeyKind key_kind = KeyKind::kAuto;
  /// key_kind kColumns: how each side reads its key columns (the right side:
  /// ad hoc only).
  std::optional<KeyPlan> left_plan, right_plan;
  std::string why;        ///< appended to a key error: why the keys have the type they have
  std::string why_later;  ///< the same past the first batch
  std::vector<std::string> select;        ///< the payload columns gathered per pair
  std::vector<ColumnKind> select_kinds;   ///< their output kinds
  std::vector<std::string> select_names;  ///< their output names
  uint64_t right_duplicates = 0;          ///< ad hoc: right rows with a repeated key
};

/// Ad hoc: uploads the right file (in.right, from its first batch on) into a
/// temporary index, which `temp` drops when it goes; UsageFail on bad input,
/// RpcFail when the build fails or overflows.
JoinTarget BuildTemporaryIndex(const Globals& g, const JoinArgs& a, const JoinOptions& o,
                               JoinInputs& in, client::Client* c, std::optional<TempIndex>* temp);

/// A resident join: the index `o.name` as DescribeIndex reports it, with the
/// columns --select (or --right index:NAME) gathers; RpcFail when it fails.
JoinTarget DescribeResidentIndex(const JoinArgs& a, const JoinOptions& o, const JoinInputs& in,
                                 client::Client* c);

/// One left batch on its way: its rows wait for the answer to its keys.
struct JoinPending {
  Table rows;
  KeyVector keys;
  uint32_t first_row = 0;  ///< the batch's first left row (its row ID)
  uint64_t capacity = 0;   ///< the pairs asked for (0: one per left row)
  bool count_only = false;
};

/// What the output rows hold after the left row's cells: the right file's row
/// without its key (ad hoc: gathered from the temporary index; resident join
/// with --right FILE: the row the pair's value names), or the pair's row
/// numbers (resident join without), then the gathered columns.
JoinRowShape JoinShapeOf(const JoinOptions& o, const JoinInputs& in);

/// The output columns of `shape`; `right_cols` gets the right file's columns
/// written (kRightFile).
ResultTable JoinOutputColumns(JoinRowShape shape, const JoinOptions& o, const JoinInputs& in,
                              const JoinTarget& t, std::vector<size_t>* right_cols);

/// Writes the pairs of each answer as rows, in pair order, up to --capacity.
/// Rows are views of the batch's cells, the right file's and the gathered
/// columns' bytes: nothing is copied until the writer's buffer.
class JoinPairWriter {
 public:
  /// `out` and `right_table` (kRightFile only) must outlive the writer; `index`
  /// names the resident index in errors.
  JoinPairWriter(RowWriter& out, JoinRowShape shape, const Table* right_table,
                 std::vector<size_t> right_cols, std::string index, uint64_t cap_total)
      : out_(out),
        shape_(shape),
        right_table_(right_table),
        right_cols_(std::move(right_cols)),
        index_(std::move(index)),
        cap_total_(cap_total) {}

  /// Writes the pairs of batch `p`; INVALID_ARGUMENT for a row that is not a
  /// row of its file, INTERNAL for pairs and columns of unequal length.
  absl::Status Write(const JoinPending& p, const client::JoinPairs& pairs);
  /// Rows written so far (read by the stream's writer thread too).
  uint64_t written() const { return written_.load(); }
  /// Whether --capacity cut the output.
  bool truncated() const { return truncated_; }

 private:
  RowWriter& out_;
  const JoinRowShape shape_;
  const Table* right_table_;
  const std::vector<size_t> right_cols_;
  const std::string index_;
  const uint64_t cap_total_;
  std::atomic<uint64_t> written_{0};
  bool truncated_ = false;
  std::vector<CellView> row_;
  std::vector<std::string> scratch_;  // numbers spelled for the row (one per gathered column)
  std::string left_number_, right_number_;
};

}  // namespace gpujoin::cli
