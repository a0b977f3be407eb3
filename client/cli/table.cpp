#include "table.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <type_traits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpujoin::cli {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    char a = s[s.size() - suffix.size() + i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != suffix[i]) return false;
  }
  return true;
}

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

absl::StatusOr<Table> ParseDelimited(std::string_view text, char delimiter, std::string source) {
  Table t;
  t.source = std::move(source);
  t.format = delimiter == '\t' ? InputFormat::kTsv : InputFormat::kCsv;
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);

  const size_t n = text.size();
  size_t i = 0;
  uint64_t line = 1;
  bool have_header = false;

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
    const uint64_t record_line = line;
    std::vector<Cell> fields;
    for (;;) {
      // One field starts at i.
      const size_t field_number = fields.size() + 1;
      if (i < n && text[i] == '"') {
        const uint64_t quote_line = line;
        std::string value;
        ++i;
        for (;;) {
          if (i >= n) {
            return absl::InvalidArgumentError(
                absl::StrCat(t.source, ":", quote_line, ": field ", field_number,
                             ": unterminated quoted field (no closing '\"')"));
          }
          const char c = text[i];
          if (c == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              value.push_back('"');
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (c == '\n') ++line;
          value.push_back(c);
          ++i;
        }
        if (i < n && text[i] != delimiter && text[i] != '\n' &&
            !(text[i] == '\r' && (i + 1 >= n || text[i + 1] == '\n'))) {
          return absl::InvalidArgumentError(
              absl::StrCat(t.source, ":", line, ": field ", field_number,
                           ": unexpected character after the closing quote"));
        }
        fields.emplace_back(std::move(value));
      } else {
        const size_t start = i;
        while (i < n && text[i] != delimiter && text[i] != '\n' && text[i] != '\r') {
          if (text[i] == '"') {
            return absl::InvalidArgumentError(absl::StrCat(
                t.source, ":", line, ": field ", field_number,
                ": a quote inside an unquoted field (quote the whole field and double the quote)"));
          }
          ++i;
        }
        if (i < n && text[i] == '\r' && !(i + 1 >= n || text[i + 1] == '\n')) {
          return absl::InvalidArgumentError(absl::StrCat(t.source, ":", line, ": field ",
                                                         field_number, ": bare carriage return"));
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
    if (!have_header) {
      for (auto& f : fields) t.header.push_back(f.value_or(""));
      absl::Status st = CheckHeader(t.header, t.source);
      if (!st.ok()) return st;
      have_header = true;
      continue;
    }
    if (fields.size() != t.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(t.source, ":", record_line, ": ",
                                                     fields.size(), " fields, but the header has ",
                                                     t.header.size()));
    }
    t.rows.push_back(Row{record_line, std::move(fields)});
  }
  if (!have_header) {
    return absl::InvalidArgumentError(absl::StrCat(t.source, ": empty input (no header line)"));
  }
  return t;
}

absl::StatusOr<Table> ParseJsonLines(std::string_view text, std::string source) {
  Table t;
  t.source = std::move(source);
  t.format = InputFormat::kJsonLines;
  std::unordered_map<std::string, size_t> columns;
  size_t pos = 0;
  uint64_t line = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.find_first_not_of(" \t") == std::string_view::npos) continue;
    nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(l.begin(), l.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat(t.source, ":", line, ": not valid JSON"));
    }
    if (!j.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.source, ":", line, ": expected a JSON object, got ", j.type_name()));
    }
    Row row;
    row.line = line;
    row.cells.assign(t.header.size(), std::nullopt);
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto [c, inserted] = columns.emplace(it.key(), t.header.size());
      if (inserted) {
        t.header.push_back(it.key());
        // Earlier rows lack the new column: null there.
        for (Row& r : t.rows) r.cells.emplace_back(std::nullopt);
        row.cells.emplace_back(std::nullopt);
      }
      const nlohmann::ordered_json& v = it.value();
      if (v.is_null()) continue;
      if (v.is_string()) {
        row.cells[c->second] = v.get<std::string>();
      } else {
        row.cells[c->second] = v.dump();
      }
    }
    t.rows.push_back(std::move(row));
  }
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
  std::string data;
  std::string source = path == "-" ? "<stdin>" : path;
  if (path == "-") {
    data.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));
    }
    data = std::move(ss).str();
  }
  if (format == InputFormat::kAuto) {
    if (EndsWith(path, ".u32")) {
      format = InputFormat::kU32;
    } else if (EndsWith(path, ".u64")) {
      format = InputFormat::kU64;
    } else if (EndsWith(path, ".i64")) {
      format = InputFormat::kI64;
    } else if (EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson")) {
      format = InputFormat::kJsonLines;
    } else if (EndsWith(path, ".tsv") || EndsWith(path, ".tab")) {
      format = InputFormat::kTsv;
    } else if (EndsWith(path, ".csv")) {
      format = InputFormat::kCsv;
    } else {
      // Sniff: a JSON object, else a tab-separated header without commas is TSV.
      const size_t first = data.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
      const size_t eol = data.find('\n');
      const std::string_view head =
          std::string_view(data).substr(0, eol == std::string::npos ? data.size() : eol);
      if (first != std::string::npos && data[first] == '{') {
        format = InputFormat::kJsonLines;
      } else if (head.find('\t') != std::string_view::npos &&
                 head.find(',') == std::string_view::npos) {
        format = InputFormat::kTsv;
      } else {
        format = InputFormat::kCsv;
      }
    }
  }
  switch (format) {
    case InputFormat::kU32:
      return ParseBinaryColumn<uint32_t>(data, std::move(source));
    case InputFormat::kU64:
      return ParseBinaryColumn<uint64_t>(data, std::move(source));
    case InputFormat::kI64:
      return ParseBinaryColumn<int64_t>(data, std::move(source));
    case InputFormat::kJsonLines:
      return ParseJsonLines(data, std::move(source));
    case InputFormat::kTsv:
      return ParseDelimited(data, '\t', std::move(source));
    case InputFormat::kCsv:
    case InputFormat::kAuto:
      break;
  }
  return ParseDelimited(data, ',', std::move(source));
}

}  // namespace gpujoin::cli
