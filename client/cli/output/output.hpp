// Result tables of the gpujoin CLI and their renderings: CSV/TSV (the default),
// JSON (--json), JSON Lines (--out x.jsonl) and an aligned text table for
// small results on a terminal.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "input/table.hpp"

namespace gpujoin::cli {

/// How a result column renders in JSON: kString cells stay strings, kNumber
/// cells become JSON numbers (when they parse as one; NaN/inf become null),
/// kFloat cells too except that "NaN", "inf" and "-inf" stay strings (so that a
/// NaN value and a null differ), kBool cells ("true"/"false") become booleans.
/// Null cells are JSON null. kJson cells hold JSON text (a JSON Lines input's
/// numbers, booleans, arrays and objects) and are written as that JSON value,
/// or as a string when the text is not JSON.
enum class ColumnKind { kString, kNumber, kBool, kFloat, kJson };

/// A cell as the JSON value its column kind gives it.
nlohmann::ordered_json CellToJson(const Cell& c, ColumnKind kind);

/// A result: a header and rows of cells. Rows are either stored in `rows`, or
/// produced on demand by a generator (SetGenerator) so that large results are
/// written without a second copy of the input in memory.
struct ResultTable {
  /// Fills `out` (cleared by the caller) with the cells of row `r`.
  using Generator = std::function<void(size_t r, std::vector<Cell>* out)>;

  std::vector<std::string> columns;
  std::vector<ColumnKind> kinds;        ///< one per column
  std::vector<std::vector<Cell>> rows;  ///< each as long as `columns`; unused with a generator

  /// Appends a column name that does not clash with the existing ones:
  /// `name`, else `name_2`, `name_3`, ...; returns the name used.
  std::string AddColumn(std::string name, ColumnKind kind);

  /// Makes the table produce `count` rows through `generator` instead of `rows`.
  void SetGenerator(size_t count, Generator generator);

  /// Number of rows (stored or generated).
  size_t RowCount() const;

  /// Calls `fn` with every row in order (a generated row is valid only during the call).
  void ForEachRow(const std::function<void(const std::vector<Cell>&)>& fn) const;

 private:
  size_t generated_rows_ = 0;
  Generator generator_;
};

/// Writes RFC 4180 CSV (or TSV with '\t'): fields holding the delimiter, a
/// quote, CR or LF, leading/trailing spaces, or an empty string are quoted;
/// null cells are written as nothing.
void WriteDelimited(std::ostream& out, const ResultTable& t, char delimiter = ',');

/// Writes one JSON object per row.
void WriteJsonLines(std::ostream& out, const ResultTable& t);

/// The rows as a JSON array of objects keyed by column name.
nlohmann::ordered_json RowsToJson(const ResultTable& t);

/// Writes an aligned, human-readable table (numbers right-aligned, nulls
/// blank), for small results on a terminal.
void WriteAligned(std::ostream& out, const ResultTable& t);

/// Writes `t` to `path` in the format its extension asks for (.jsonl/.ndjson:
/// JSON Lines, .tsv: TSV, anything else: CSV); "-" is standard output.
/// Returns false with `error` set when the file cannot be written.
bool WriteResultFile(const std::string& path, const ResultTable& t, std::string* error);

/// Shortest text that reads back as the same float (e.g. "0.1", "NaN", "inf").
std::string FormatFloat(float v);
/// The same for a double.
std::string FormatDouble(double v);

/// Byte counts for people: "512 B", "1.5 KiB", "3.2 GiB".
std::string FormatBytes(double bytes);

}  // namespace gpujoin::cli
