// Input tables of the gpujoin CLI: CSV/TSV with a header (RFC 4180 quoting),
// JSON Lines, and raw little-endian key files (.u32, .u64, .i64), read into one
// in-memory row store that remembers where every row came from so that errors
// can name the file, line and column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

/// One input row and the 1-based line it starts on (for binary files: the
/// 1-based row number).
struct Row {
  uint64_t line = 0;
  std::vector<Cell> cells;  ///< one per header column
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

/// Reads `path` ("-" = standard input) in `format`.
absl::StatusOr<Table> ReadTable(const std::string& path, InputFormat format = InputFormat::kAuto);

}  // namespace gpujoin::cli
