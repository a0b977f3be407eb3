// Writes a command's result rows as they arrive, so that a result is never
// held whole: to --out FILE (CSV, TSV or JSON Lines by its extension), or to
// stdout as CSV, as an aligned table on a terminal (results of at most 200
// rows, which are held until the end to size the columns), or with --json as
// one JSON document whose "rows" stream out and whose summary follows them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_context.hpp"
#include "input/table.hpp"
#include "output/output.hpp"

namespace gpujoin::cli {

/// The ColumnKind that renders an input column of `kind` (text stays a string;
/// a JSON Lines number, boolean or nested value stays JSON).
ColumnKind KindOfCells(CellKind kind);

/// A cell written without a copy: std::nullopt is a null, as for Cell.
using CellView = std::optional<std::string_view>;

/// A streaming writer of one result. Not thread-safe.
class RowWriter {
 public:
  /// Opens `out` ("" = stdout; "-" = stdout as CSV, JSON Lines or TSV by
  /// nothing) for the globals' --json. UsageFail when the file cannot be opened.
  RowWriter(const Globals& g, const std::string& out);
  /// Removes a partly written --out file unless Finish() ran.
  ~RowWriter();

  /// The columns; must come before the first row.
  void Begin(std::vector<std::string> columns, std::vector<ColumnKind> kinds);
  void Begin(const ResultTable& t) { Begin(t.columns, t.kinds); }
  /// Changes the kinds of the first kinds.size() columns (an input batch's).
  void SetLeadingKinds(const std::vector<ColumnKind>& kinds);

  /// Writes one row (as long as the columns).
  void Write(const std::vector<Cell>& row);
  /// Writes one row of views (as long as the columns); the views need only
  /// live through the call. CSV and TSV rows go straight to the buffer.
  void Write(const std::vector<CellView>& row);
  /// Writes every row of `t`.
  void WriteAll(const ResultTable& t);

  /// Ends the result: with --json the summary (plus "columns" and "rows", or
  /// "out" and "rows_written") goes to stdout. UsageFail when a write failed.
  void Finish(Json summary);

  uint64_t rows() const { return rows_; }

 private:
  enum class Mode { kCsv, kTsv, kJsonLines, kJsonDocument, kAligned };
  void Flush();
  template <class Cells>
  void AppendDelimited(const Cells& row, char delimiter);
  void AppendJsonObject(const std::vector<Cell>& row);
  void SpillAligned();  // a terminal result beyond 200 rows continues as CSV

  Mode mode_ = Mode::kCsv;
  bool json_summary_ = false;  // --json with --out: the summary only on stdout
  std::string path_;
  FILE* file_ = nullptr;
  bool owns_file_ = false;
  bool finished_ = false;
  std::string buf_;
  std::vector<std::string> columns_;
  std::vector<ColumnKind> kinds_;
  std::vector<std::vector<Cell>> held_;  // kAligned
  uint64_t rows_ = 0;
};

}  // namespace gpujoin::cli
