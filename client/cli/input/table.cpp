#include "input/table.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "input/table_reader.hpp"

namespace gpujoin::cli {
namespace {

// Shows a cell in an error message: quoted, and cut when long.
std::string Quoted(std::string_view s) {
  if (s.size() > 40) return absl::StrCat("'", std::string(s.substr(0, 37)), "...'");
  return absl::StrCat("'", std::string(s), "'");
}

absl::Status CheckHeader(const std::vector<std::string>& header, const std::string& source) {
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":1: header column ", i + 1, " has an empty name"));
    }
    auto [it, inserted] = seen.emplace(header[i], i);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":1: header column ", i + 1, " ", Quoted(header[i]),
                       " repeats the name of column ", it->second + 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InputFormat> ParseInputFormat(std::string_view name) {
  if (name == "auto") return InputFormat::kAuto;
  if (name == "csv") return InputFormat::kCsv;
  if (name == "tsv") return InputFormat::kTsv;
  if (name == "jsonl" || name == "ndjson") return InputFormat::kJsonLines;
  if (name == "u32") return InputFormat::kU32;
  if (name == "u64") return InputFormat::kU64;
  if (name == "i64") return InputFormat::kI64;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown input format ", Quoted(name), " (expected auto, csv, tsv, jsonl, u32, u64 or i64)"));
}

absl::StatusOr<size_t> Table::Column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  return absl::InvalidArgumentError(absl::StrCat(source, ": no column ", Quoted(name),
                                                 " (columns: ", absl::StrJoin(header, ", "), ")"));
}

std::string Table::Where(size_t r) const {
  if (binary_rows) return absl::StrCat(source, ":row ", rows[r].line);
  return absl::StrCat(source, ":", rows[r].line);
}

namespace detail {

DelimitedRecords ParseDelimitedRecords(std::string_view text, char delimiter,
                                       const std::string& source, uint64_t first_line) {
  DelimitedRecords out;
  const size_t n = text.size();
  size_t i = 0;
  uint64_t line = first_line;
  size_t width = kInlineCells;
  // Rows are built in place (a move of inline cells copies them); a record
  // that fails is not one of the rows.
  out.rows.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  auto fail = [&](absl::Status st) {
    out.rows.pop_back();
    out.error = std::move(st);
    return std::move(out);
  };

  while (i < n) {
    // One record starts here. Skip blank lines (LF or CRLF only).
    if (text[i] == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') {
      ++line;
      i += 2;
      continue;
    }
    Row& record = out.rows.emplace_back();
    record.line = line;
    RowCells& fields = record.cells;
    if (width > kInlineCells)
      fields.reserve(width);  // records mostly have the previous one's width
    for (;;) {
      // One field starts at i.
      const size_t field_number = fields.size() + 1;
      if (i < n && text[i] == '"') {
        const uint64_t quote_line = line;
        std::string value;
        ++i;
        for (;;) {
          // The run up to the next quote is copied at once.
          const size_t q = text.find('"', i);
          if (q == std::string_view::npos) {
            return fail(absl::InvalidArgumentError(
                absl::StrCat(source, ":", quote_line, ": field ", field_number,
                             ": unterminated quoted field (no closing '\"')")));
          }
          const std::string_view run = text.substr(i, q - i);
          line += static_cast<uint64_t>(std::count(run.begin(), run.end(), '\n'));
          value.append(run);
          i = q;
          if (i + 1 < n && text[i + 1] == '"') {
            value.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (i < n && text[i] != delimiter && text[i] != '\n' &&
            !(text[i] == '\r' && (i + 1 >= n || text[i + 1] == '\n'))) {
          return fail(absl::InvalidArgumentError(
              absl::StrCat(source, ":", line, ": field ", field_number,
                           ": unexpected character after the closing quote")));
        }
        fields.emplace_back(std::move(value));
      } else {
        const size_t start = i;
        while (i < n && text[i] != delimiter && text[i] != '\n' && text[i] != '\r') {
          if (text[i] == '"') {
            return fail(
                absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": field ", field_number,
                                                        ": a quote inside an unquoted field (quote "
                                                        "the whole field and double the quote)")));
          }
          ++i;
        }
        if (i < n && text[i] == '\r' && !(i + 1 >= n || text[i + 1] == '\n')) {
          return fail(absl::InvalidArgumentError(
              absl::StrCat(source, ":", line, ": field ", field_number, ": bare carriage return")));
        }
        if (i == start) {
          fields.emplace_back(std::nullopt);
        } else {
          fields.emplace_back(std::string(text.substr(start, i - start)));
        }
      }
      if (i < n && text[i] == delimiter) {
        ++i;
        continue;
      }
      // End of record: CRLF, LF or end of input.
      if (i < n && text[i] == '\r') ++i;
      if (i < n && text[i] == '\n') {
        ++i;
        ++line;
      }
      break;
    }
    width = fields.size();
  }
  return out;
}

absl::Status DelimitedAssembler::Add(DelimitedRecords records, std::vector<Row>* out) {
  size_t r = 0;
  if (!have_header_ && !records.rows.empty()) {
    for (auto& f : records.rows[0].cells) header_.push_back(f.value_or(""));
    absl::Status st = CheckHeader(header_, source_);
    if (!st.ok()) return st;
    have_header_ = true;
    r = 1;
  }
  // The rows before the first of another width are appended (the whole vector
  // when it is all of them), then that row's error, else the syntax error.
  const size_t n = records.rows.size();
  size_t bad = r;
  while (bad < n && records.rows[bad].cells.size() == header_.size()) ++bad;
  if (out->empty() && r == 0 && bad == n) {
    *out = std::move(records.rows);
  } else {
    if (out->empty()) out->reserve(bad - r);
    for (; r < bad; ++r) out->push_back(std::move(records.rows[r]));
  }
  if (bad < n) {
    const Row& row = records.rows[bad];
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", row.line, ": ", row.cells.size(),
                                                   " fields, but the header has ", header_.size()));
  }
  return records.error;
}

absl::Status DelimitedAssembler::Finish() const {
  if (!have_header_) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": empty input (no header line)"));
  }
  return absl::OkStatus();
}

}  // namespace detail

absl::StatusOr<Table> ParseDelimited(std::string_view text, char delimiter, std::string source) {
  Table t;
  t.source = std::move(source);
  t.format = delimiter == '\t' ? InputFormat::kTsv : InputFormat::kCsv;
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  detail::DelimitedAssembler assembler(t.source);
  absl::Status st =
      assembler.Add(detail::ParseDelimitedRecords(text, delimiter, t.source, 1), &t.rows);
  if (!st.ok()) return st;
  st = assembler.Finish();
  if (!st.ok()) return st;
  t.header = assembler.header();
  return t;
}

namespace {

// The format and file extension of a binary column of T.
template <typename T>
constexpr InputFormat kBinaryFormat = std::is_same_v<T, uint32_t>   ? InputFormat::kU32
                                      : std::is_same_v<T, uint64_t> ? InputFormat::kU64
                                                                    : InputFormat::kI64;
template <typename T>
constexpr const char* kBinaryName = std::is_same_v<T, uint32_t>   ? "u32"
                                    : std::is_same_v<T, uint64_t> ? "u64"
                                                                  : "i64";
template <typename T>
constexpr const char* kBinaryType = std::is_same_v<T, uint32_t>   ? "uint32"
                                    : std::is_same_v<T, uint64_t> ? "uint64"
                                                                  : "int64";

}  // namespace

template <typename T>
absl::StatusOr<Table> ParseBinaryColumn(std::string_view bytes, std::string source) {
  static_assert(std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t> ||
                std::is_same_v<T, int64_t>);
  Table t;
  t.source = std::move(source);
  t.format = kBinaryFormat<T>;
  t.binary_rows = true;
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        t.source, ": size ", bytes.size(), " bytes is not a multiple of ", sizeof(T), " (.",
        kBinaryName<T>, " files hold little-endian ", kBinaryType<T>, " values)"));
  }
  t.header = {"key"};
  t.rows.reserve(bytes.size() / sizeof(T));
  for (size_t r = 0; r < bytes.size() / sizeof(T); ++r) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + sizeof(T) * r;
    uint64_t bits = 0;
    for (size_t b = 0; b < sizeof(T); ++b) bits |= static_cast<uint64_t>(p[b]) << (8 * b);
    t.rows.push_back(Row{r + 1, {std::to_string(static_cast<T>(bits))}});
  }
  return t;
}

template absl::StatusOr<Table> ParseBinaryColumn<uint32_t>(std::string_view, std::string);
template absl::StatusOr<Table> ParseBinaryColumn<uint64_t>(std::string_view, std::string);
template absl::StatusOr<Table> ParseBinaryColumn<int64_t>(std::string_view, std::string);

absl::StatusOr<Table> ReadTable(const std::string& path, InputFormat format) {
  TableReader::Options options;
  options.format = format;
  options.batch_rows = SIZE_MAX;
  auto reader = TableReader::Open(path, options);
  if (!reader.ok()) return reader.status();
  Table t;
  auto more = (*reader)->Next(&t);
  if (!more.ok()) return more.status();
  if (!*more) t = (*reader)->EmptyTable();
  return t;
}

}  // namespace gpujoin::cli
