#include "commands/join/join_rows.hpp"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli_context.hpp"
#include "columns/payload.hpp"

namespace gpujoin::cli {

absl::StatusOr<client::JoinKind> ParseJoinHow(std::string_view how) {
  for (client::JoinKind k : {client::JoinKind::kInner, client::JoinKind::kLeftOuter,
                             client::JoinKind::kLeftSemi, client::JoinKind::kLeftAnti}) {
    if (JoinHowName(k) == how) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--how '", std::string(how), "': expected inner, left, semi or anti"));
}

std::string_view JoinHowName(client::JoinKind kind) {
  switch (kind) {
    case client::JoinKind::kInner:
      return "inner";
    case client::JoinKind::kLeftOuter:
      return "left";
    case client::JoinKind::kLeftSemi:
      return "semi";
    case client::JoinKind::kLeftAnti:
      return "anti";
  }
  return "?";
}

absl::StatusOr<client::DuplicatePolicy> RightDuplicatePolicy(std::string_view flag) {
  if (flag.empty()) return client::DuplicatePolicy::kKeepAll;
  auto p = client::ParseDuplicatePolicy(flag);
  if (!p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--right-duplicates '", std::string(flag),
                                                   "': expected lowest_row or keep_all"));
  }
  return *p;
}

absl::StatusOr<ResultTable> JoinRowsTable(const Table& left, const Table* right, JoinRowShape shape,
                                          std::string_view index, std::vector<uint32_t> left_rows,
                                          std::vector<uint32_t> right_rows,
                                          std::vector<client::Column> gathered) {
  const size_t pairs = left_rows.size();
  if (right_rows.size() != pairs) {
    return absl::InvalidArgumentError(
        absl::StrCat("join: ", pairs, " left rows but ", right_rows.size(), " right rows"));
  }
  for (const auto& col : gathered) {
    if (col.length != pairs) {
      return absl::InvalidArgumentError(absl::StrCat("join: gathered column '", col.name, "' has ",
                                                     col.length, " rows for ", pairs, " pairs"));
    }
  }
  for (size_t k = 0; k < pairs; ++k) {
    if (shape != JoinRowShape::kRowNumbers && left_rows[k] >= left.rows.size()) {
      return absl::InvalidArgumentError(absl::StrCat("join: left row ", left_rows[k],
                                                     " is not a row of ", left.source, " (",
                                                     left.rows.size(), " rows)"));
    }
  }
  if (shape == JoinRowShape::kRightFile) {
    if (right == nullptr) return absl::InvalidArgumentError("join: no right file to take rows of");
    // Check before writing anything: a resident index's values must be rows of --right.
    for (size_t k = 0; k < pairs; ++k) {
      if (right_rows[k] != client::kNoMatch && right_rows[k] >= right->rows.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "join: index ", std::string(index), " returned value ", right_rows[k],
            ", which is not a row of ", right->source, " (", right->rows.size(), " rows)"));
      }
    }
  }

  ResultTable out;
  if (shape == JoinRowShape::kRowNumbers) {
    out.AddColumn("left_row", ColumnKind::kNumber);
    out.AddColumn("right_row", ColumnKind::kNumber);
  } else {
    out = StartFrom(left);
    if (shape == JoinRowShape::kRightFile) {
      for (const auto& h : right->header) out.AddColumn(h, ColumnKind::kString);
    }
  }
  for (const auto& col : gathered) out.AddColumn(col.name, KindOf(col.type));
  const size_t right_width = shape == JoinRowShape::kRightFile ? right->header.size() : 0;
  // The generator owns the pairs and columns (a ResultTable may be moved).
  struct Pairs {
    std::vector<uint32_t> left_rows, right_rows;
    std::vector<client::Column> gathered;
  };
  auto owned = std::make_shared<const Pairs>(
      Pairs{std::move(left_rows), std::move(right_rows), std::move(gathered)});
  out.SetGenerator(
      pairs, [&left, right, shape, right_width, owned](size_t k, std::vector<Cell>* row) {
        const auto& [left_rows, right_rows, gathered] = *owned;
        const bool matched = right_rows[k] != client::kNoMatch;
        if (shape == JoinRowShape::kRowNumbers) {
          row->emplace_back(std::to_string(left_rows[k]));
          row->emplace_back(matched ? Cell(std::to_string(right_rows[k])) : std::nullopt);
        } else {
          const RowCells& lc = left.rows[left_rows[k]].cells;
          row->assign(lc.begin(), lc.end());
          if (shape == JoinRowShape::kRightFile) {
            if (matched) {
              const auto& rc = right->rows[right_rows[k]].cells;
              row->insert(row->end(), rc.begin(), rc.end());
            } else {
              row->insert(row->end(), right_width, std::nullopt);
            }
          }
        }
        for (const auto& col : gathered) row->push_back(CellOf(col, k));
      });
  return out;
}

}  // namespace gpujoin::cli
