// gpujoin join, the output: the columns of the joined rows and the writing of
// each answer's pairs as rows (join_steps.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns/payload.hpp"
#include "commands/join/join_steps.hpp"

namespace gpujoin::cli {

JoinRowShape JoinShapeOf(const JoinOptions& o, const JoinInputs& in) {
  return o.payload_join   ? JoinRowShape::kLeftOnly
         : in.right_table ? JoinRowShape::kRightFile
         : o.name.empty() ? JoinRowShape::kLeftOnly
                          : JoinRowShape::kRowNumbers;
}

ResultTable JoinOutputColumns(JoinRowShape shape, const JoinOptions& o, const JoinInputs& in,
                              const JoinTarget& t, std::vector<size_t>* right_cols) {
  ResultTable columns;
  if (shape == JoinRowShape::kRowNumbers) {
    columns.AddColumn("left_row", ColumnKind::kNumber);
    columns.AddColumn("right_row", ColumnKind::kNumber);
  } else {
    columns = StartFrom(in.left_first.header.empty() ? in.left->EmptyTable() : in.left_first);
    if (shape == JoinRowShape::kRightFile) {
      const Table& right = *in.right_table;
      for (size_t col = 0; col < right.header.size(); ++col) {
        if (std::find(o.right_cols.begin(), o.right_cols.end(), right.header[col]) !=
            o.right_cols.end()) {
          continue;
        }
        right_cols->push_back(col);
        columns.AddColumn(right.header[col], ColumnKind::kString);
      }
    }
  }
  for (size_t i = 0; i < t.select.size(); ++i) {
    columns.AddColumn(t.select_names[i], t.select_kinds[i]);
  }
  return columns;
}

absl::Status JoinPairWriter::Write(const JoinPending& p, const client::JoinPairs& pairs) {
  const size_t n = pairs.left_rows.size();
  if (pairs.right_rows.size() != n) return absl::InternalError("pairs of unequal length");
  for (const auto& col : pairs.columns) {
    if (col.length != n) return absl::InternalError("a gathered column of the wrong length");
  }
  if (shape_ != JoinRowShape::kRowNumbers) out_.SetLeadingKinds(InputKinds(p.rows));
  scratch_.resize(pairs.columns.size());
  const size_t right_width = right_cols_.size();
  const auto view = [](const Cell& c) { return c ? CellView(*c) : std::nullopt; };
  for (size_t k = 0; k < n; ++k) {
    if (cap_total_ && written_.load() >= cap_total_) {
      truncated_ = true;
      break;
    }
    const uint32_t lr = pairs.left_rows[k];
    const uint32_t rr = pairs.right_rows[k];
    const bool matched = rr != client::kNoMatch;
    row_.clear();
    if (shape_ == JoinRowShape::kRowNumbers) {
      left_number_ = std::to_string(lr);
      row_.emplace_back(left_number_);
      if (matched) {
        right_number_ = std::to_string(rr);
        row_.emplace_back(right_number_);
      } else {
        row_.emplace_back(std::nullopt);
      }
    } else {
      if (lr < p.first_row || lr - p.first_row >= p.rows.rows.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("join: left row ", lr, " is not a row of this batch of ", p.rows.source));
      }
      for (const Cell& cell : p.rows.rows[lr - p.first_row].cells) row_.push_back(view(cell));
      if (shape_ == JoinRowShape::kRightFile) {
        if (matched && rr >= right_table_->rows.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "join: index ", index_, " returned value ", rr, ", which is not a row of ",
              right_table_->source, " (", right_table_->rows.size(), " rows)"));
        }
        if (matched) {
          const auto& rc = right_table_->rows[rr].cells;
          for (size_t col : right_cols_) row_.push_back(view(rc[col]));
        } else {
          row_.insert(row_.end(), right_width, std::nullopt);
        }
      }
    }
    for (size_t ci = 0; ci < pairs.columns.size(); ++ci) {
      row_.push_back(CellViewOf(pairs.columns[ci], k, &scratch_[ci]));
    }
    out_.Write(row_);
    written_.fetch_add(1);
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::cli
