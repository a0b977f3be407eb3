// Input tables of the gpujoin CLI: CSV/TSV with a header (RFC 4180 quoting),
// JSON Lines, and raw little-endian key files (.u32, .u64, .i64), held as rows
// that remember where they came from so that errors can name the file, line
// and column. A Table is a whole file (ReadTable) or one batch of it
// (TableReader, table_reader.hpp); the record parsers below work on any piece
// of a file that starts and ends on record boundaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpujoin::cli {

/// One cell: std::nullopt is a null (an unquoted empty CSV field, a JSON null
/// or a missing JSON key); "" is a valid empty string (a quoted "" in CSV).
using Cell = std::optional<std::string>;

/// Input formats. kAuto picks by extension (.csv, .tsv/.tab, .jsonl/.ndjson,
/// .u32, .u64, .i64) and, for stdin or unknown extensions, by sniffing the first
/// line. kU32/kU64/kI64 are raw little-endian uint32, uint64 and int64 values.
enum class InputFormat { kAuto, kCsv, kTsv, kJsonLines, kU32, kU64, kI64 };

/// Parses "auto", "csv", "tsv", "jsonl", "u32", "u64", "i64"; INVALID_ARGUMENT otherwise.
absl::StatusOr<InputFormat> ParseInputFormat(std::string_view name);

/// What the cells of an input column hold, for JSON output: text (CSV cells,
/// JSON strings), or the JSON spelling of numbers, booleans or arrays/objects
/// (a JSON Lines column whose every non-null value in the table has that kind).
enum class CellKind : uint8_t { kText, kNumber, kBool, kJson };

/// The cells of one row. Up to kInlineCells of them live in the row itself, so
/// that the rows of a narrow table sit in one allocation (its vector of rows)
/// rather than one each: a batch is then allocated, read and freed in order.
inline constexpr size_t kInlineCells = 4;
using RowCells = absl::InlinedVector<Cell, kInlineCells>;

/// One input row and the 1-based line it starts on (for binary files: the
/// 1-based row number).
struct Row {
  uint64_t line = 0;
  RowCells cells;  ///< one per header column
};

/// A whole input file.
struct Table {
  std::string source;  ///< the file name as given ("-" reads as "<stdin>")
  InputFormat format = InputFormat::kCsv;
  std::vector<std::string> header;  ///< column names, unique
  std::vector<Row> rows;
  /// True for binary input (.u32, .u64, .i64): the word "row" is used instead
  /// of "line" in errors.
  bool binary_rows = false;
  /// One per header column; empty = every column is text.
  std::vector<CellKind> cell_kinds;

  /// Index of column `name`, or INVALID_ARGUMENT naming the file and listing
  /// the columns it has.
  absl::StatusOr<size_t> Column(std::string_view name) const;

  /// "FILE:LINE" (or "FILE:row N" for binary input) of row `r`, for error messages.
  std::string Where(size_t r) const;
};

/// Parses CSV (delimiter ',') or TSV ('\t') text with a header line.
/// Errors (INVALID_ARGUMENT, one line): empty input, duplicate or empty header
/// names, unterminated quotes, a quote inside an unquoted field, text after a
/// closing quote, and rows whose field count differs from the header's. Blank
/// lines are skipped; a UTF-8 byte order mark and CRLF line ends are accepted.
absl::StatusOr<Table> ParseDelimited(std::string_view text, char delimiter, std::string source);

/// Parses JSON Lines: one object per non-blank line. The header is the union of
/// the keys in first-seen order; a missing key or JSON null is a null cell;
/// strings keep their text, other scalars their JSON spelling, arrays and
/// objects their compact JSON text.
absl::StatusOr<Table> ParseJsonLines(std::string_view text, std::string source);

/// Reads a raw little-endian file of T (uint32_t, uint64_t or int64_t: the
/// formats kU32, kU64, kI64) as one column named "key", each value in decimal
/// (int64 values signed, so that they print back as they were written).
template <typename T>
absl::StatusOr<Table> ParseBinaryColumn(std::string_view bytes, std::string source);

/// ParseBinaryColumn<uint32_t>: a .u32 file.
inline absl::StatusOr<Table> ParseU32(std::string_view bytes, std::string source) {
  return ParseBinaryColumn<uint32_t>(bytes, std::move(source));
}

/// Reads `path` ("-" = standard input; gzip/zstd transparently) in `format`,
/// the whole file at once (TableReader with one batch).
absl::StatusOr<Table> ReadTable(const std::string& path, InputFormat format = InputFormat::kAuto);

namespace detail {

/// Records parsed from a piece of CSV/TSV text: every record's fields (any
/// number of them; the header check is the caller's) and the first syntax
/// error, which follows the records (OK when there is none).
struct DelimitedRecords {
  std::vector<Row> rows;
  absl::Status error;
};

/// Parses the records of `text`, which starts on a record boundary on line
/// `first_line` of `source` and ends on one (or at the end of the input).
DelimitedRecords ParseDelimitedRecords(std::string_view text, char delimiter,
                                       const std::string& source, uint64_t first_line);

/// Turns records into a table's rows in file order: the first record is the
/// header (checked: empty or repeated names), every other one must have its
/// width. Fed the records of consecutive pieces, it gives the errors
/// ParseDelimited gives on the whole text, in the same order.
class DelimitedAssembler {
 public:
  explicit DelimitedAssembler(std::string source) : source_(std::move(source)) {}
  /// Appends the rows of `records` to `out` (the header record excepted); the
  /// first header, width or syntax error.
  absl::Status Add(DelimitedRecords records, std::vector<Row>* out);
  /// INVALID_ARGUMENT "FILE: empty input (no header line)" when no record came.
  absl::Status Finish() const;
  bool have_header() const { return have_header_; }
  const std::vector<std::string>& header() const { return header_; }

 private:
  std::string source_;
  std::vector<std::string> header_;
  bool have_header_ = false;
};

/// Records parsed from a piece of JSON Lines text (one object per line): the
/// keys in first-seen order, rows whose cells follow `keys` (a row made before
/// a key was seen is shorter), each key's CellKind over the piece (with
/// `mixed` set where its values differ in kind), and the first error.
struct JsonRecords {
  std::vector<std::string> keys;
  std::vector<CellKind> kinds;
  std::vector<bool> mixed;
  std::vector<bool> valued;  ///< per key: a non-null value was seen
  std::vector<Row> rows;
  absl::Status error;
};

/// Parses the lines of `text` (starting on line `first_line`) with simdjson.
JsonRecords ParseJsonRecords(std::string_view text, const std::string& source, uint64_t first_line);

/// Maps the keys of JSON pieces onto one header. Until Freeze() new keys become
/// columns (rows before them get nulls); afterwards a new key is left out and
/// noted once (`notes`).
class JsonAssembler {
 public:
  explicit JsonAssembler(std::string source) : source_(std::move(source)) {}
  /// Appends the rows of `records` to `table`, padding every row to the
  /// header's width; the records' error.
  absl::Status Add(JsonRecords records, Table* table);
  /// Starts a batch: cell kinds are counted per batch.
  void BeginBatch();
  /// Sets `table`'s header and cell_kinds (the batch's kinds).
  void FinishBatch(Table* table) const;
  /// Fixes the columns (the header of the first batch a reader hands out).
  void Freeze() { frozen_ = true; }
  const std::vector<std::string>& header() const { return header_; }
  std::vector<std::string> TakeNotes() { return std::move(notes_); }

 private:
  std::string source_;
  std::vector<std::string> header_;
  static constexpr int kUnseen = -1, kMixed = -2;
  std::vector<std::pair<std::string, size_t>> index_;  // sorted by key
  std::vector<int> state_;  // per column in this batch: kUnseen, kMixed or a CellKind
  std::vector<std::string> dropped_;
  std::vector<std::string> notes_;
  bool frozen_ = false;
};

}  // namespace detail

}  // namespace gpujoin::cli
