#include "table.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "table_reader.hpp"

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

namespace {

// A JSON number as RFC 8259 spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  auto digits = [&] {
    const size_t start = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < n && s[i] == '-') ++i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == n;
}

std::string_view TrimJsonSpace(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

const char* JsonTypeName(simdjson::ondemand::json_type t) {
  switch (t) {
    case simdjson::ondemand::json_type::array:
      return "array";
    case simdjson::ondemand::json_type::object:
      return "object";
    case simdjson::ondemand::json_type::number:
      return "number";
    case simdjson::ondemand::json_type::string:
      return "string";
    case simdjson::ondemand::json_type::boolean:
      return "boolean";
    case simdjson::ondemand::json_type::null:
      return "null";
  }
  return "value";
}

}  // namespace

JsonRecords ParseJsonRecords(std::string_view text, const std::string& source,
                             uint64_t first_line) {
  JsonRecords out;
  // simdjson reads up to SIMDJSON_PADDING bytes past a document: the lines are
  // parsed in a padded copy of the piece.
  simdjson::padded_string padded(text);
  const char* base = padded.data();
  const size_t n = text.size();
  simdjson::ondemand::parser parser;
  std::vector<std::pair<std::string, size_t>> index;  // key -> column, small: linear scan
  size_t pos = 0;
  uint64_t line = first_line - 1;
  auto column_of = [&](std::string_view key) -> size_t {
    // Few keys per file: a linear scan beats hashing them.
    for (auto& [k, c] : index) {
      if (k == key) return c;
    }
    index.emplace_back(std::string(key), out.keys.size());
    out.keys.emplace_back(key);
    out.kinds.push_back(CellKind::kText);
    out.mixed.push_back(false);
    out.valued.push_back(false);
    return out.keys.size() - 1;
  };
  while (pos < n) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? n : nl;
    std::string_view l = text.substr(pos, end - pos);
    const size_t start = pos;
    pos = end + 1;
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto invalid = [&] {
      out.error = absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": not valid JSON"));
    };
    simdjson::ondemand::document doc;
    if (parser.iterate(base + start, l.size(), padded.size() + simdjson::SIMDJSON_PADDING - start)
            .get(doc) != simdjson::SUCCESS) {
      invalid();
      return out;
    }
    simdjson::ondemand::json_type type;
    if (doc.type().get(type) != simdjson::SUCCESS) {
      invalid();
      return out;
    }
    if (type != simdjson::ondemand::json_type::object) {
      // A scalar document must still be valid JSON to be named by its type.
      bool valid = true;
      if (type == simdjson::ondemand::json_type::array) {
        simdjson::ondemand::array a;
        std::string_view raw;
        valid = doc.get_array().get(a) == simdjson::SUCCESS &&
                a.raw_json().get(raw) == simdjson::SUCCESS &&
                !nlohmann::ordered_json::parse(raw, nullptr, false).is_discarded();
      } else {
        std::string_view raw;
        valid = doc.raw_json_token().get(raw) == simdjson::SUCCESS &&
                !nlohmann::ordered_json::parse(raw, nullptr, false).is_discarded();
      }
      if (!valid) {
        invalid();
        return out;
      }
      out.error = absl::InvalidArgumentError(
          absl::StrCat(source, ":", line, ": expected a JSON object, got ", JsonTypeName(type)));
      return out;
    }
    simdjson::ondemand::object obj;
    if (doc.get_object().get(obj) != simdjson::SUCCESS) {
      invalid();
      return out;
    }
    Row row;
    row.line = line;
    row.cells.assign(out.keys.size(), std::nullopt);
    bool ok = true;
    for (auto field_or : obj) {
      simdjson::ondemand::field field;
      std::string_view key;
      if (std::move(field_or).get(field) != simdjson::SUCCESS ||
          field.unescaped_key().get(key) != simdjson::SUCCESS) {
        ok = false;
        break;
      }
      const size_t c = column_of(key);
      if (c >= row.cells.size()) row.cells.resize(c + 1);
      simdjson::ondemand::value v = field.value();
      simdjson::ondemand::json_type vt;
      if (v.type().get(vt) != simdjson::SUCCESS) {
        ok = false;
        break;
      }
      CellKind kind = CellKind::kText;
      switch (vt) {
        case simdjson::ondemand::json_type::string: {
          std::string_view sv;
          if (v.get_string().get(sv) != simdjson::SUCCESS) {
            ok = false;
            break;
          }
          row.cells[c] = std::string(sv);
          break;
        }
        case simdjson::ondemand::json_type::number: {
          const std::string_view raw = TrimJsonSpace(v.raw_json_token());
          if (!IsJsonNumber(raw)) {
            ok = false;
            break;
          }
          row.cells[c] = std::string(raw);
          kind = CellKind::kNumber;
          break;
        }
        case simdjson::ondemand::json_type::boolean: {
          bool b = false;
          if (v.get_bool().get(b) != simdjson::SUCCESS) {
            ok = false;
            break;
          }
          row.cells[c] = std::string(b ? "true" : "false");
          kind = CellKind::kBool;
          break;
        }
        case simdjson::ondemand::json_type::null: {
          bool is_null = false;
          if (v.is_null().get(is_null) != simdjson::SUCCESS || !is_null) ok = false;
          row.cells[c] = std::nullopt;
          break;
        }
        case simdjson::ondemand::json_type::array:
        case simdjson::ondemand::json_type::object: {
          // Nested values (rare) keep their compact JSON text, validated by nlohmann.
          std::string_view raw;
          simdjson::error_code e;
          if (vt == simdjson::ondemand::json_type::array) {
            simdjson::ondemand::array a;
            e = v.get_array().get(a);
            if (e == simdjson::SUCCESS) e = a.raw_json().get(raw);
          } else {
            simdjson::ondemand::object o;
            e = v.get_object().get(o);
            if (e == simdjson::SUCCESS) e = o.raw_json().get(raw);
          }
          nlohmann::ordered_json j;
          if (e == simdjson::SUCCESS) j = nlohmann::ordered_json::parse(raw, nullptr, false);
          if (e != simdjson::SUCCESS || j.is_discarded()) {
            ok = false;
            break;
          }
          row.cells[c] = j.dump();
          kind = CellKind::kJson;
          break;
        }
      }
      if (!ok) break;
      if (row.cells[c]) {
        if (!out.valued[c]) {
          out.valued[c] = true;
          out.kinds[c] = kind;
        } else if (out.kinds[c] != kind) {
          out.mixed[c] = true;
        }
      }
    }
    // Nothing may follow the object on its line.
    const char* rest = nullptr;
    if (ok && doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) ok = false;
    if (!ok) {
      invalid();
      return out;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

absl::Status JsonAssembler::Add(JsonRecords records, Table* table) {
  // This piece's columns in the header (SIZE_MAX: left out).
  std::vector<size_t> map(records.keys.size());
  bool identity = true;
  for (size_t k = 0; k < records.keys.size(); ++k) {
    const std::string& key = records.keys[k];
    auto it = std::lower_bound(index_.begin(), index_.end(), key,
                               [](const auto& e, const std::string& x) { return e.first < x; });
    if (it != index_.end() && it->first == key) {
      map[k] = it->second;
    } else if (!frozen_) {
      map[k] = header_.size();
      index_.insert(it, {key, header_.size()});
      header_.push_back(key);
      state_.push_back(kUnseen);
      for (Row& r : table->rows) r.cells.emplace_back(std::nullopt);
    } else {
      map[k] = SIZE_MAX;
      if (std::find(dropped_.begin(), dropped_.end(), key) == dropped_.end()) {
        dropped_.push_back(key);
        uint64_t line = 0;
        for (const Row& r : records.rows) {
          if (k < r.cells.size()) {
            line = r.line;
            break;
          }
        }
        notes_.push_back(absl::StrCat(
            source_, ":", line, ": key '", key,
            "' first appears after the first batch, whose keys fix the columns; it is left out "
            "(a larger --batch-rows reads more rows first)"));
      }
    }
    if (map[k] != k) identity = false;
    if (map[k] == SIZE_MAX || !records.valued[k]) continue;
    // The batch's kind of the column: the one kind its values have, else text.
    int& state = state_[map[k]];
    const int kind = records.mixed[k] ? kMixed : static_cast<int>(records.kinds[k]);
    if (state == kUnseen) {
      state = kind;
    } else if (state != kind) {
      state = kMixed;
    }
  }
  const size_t width = header_.size();
  table->rows.reserve(table->rows.size() + records.rows.size());
  for (Row& r : records.rows) {
    if (identity) {
      r.cells.resize(width);
      table->rows.push_back(std::move(r));
      continue;
    }
    Row mapped;
    mapped.line = r.line;
    mapped.cells.assign(width, std::nullopt);
    for (size_t k = 0; k < r.cells.size(); ++k) {
      if (map[k] != SIZE_MAX) mapped.cells[map[k]] = std::move(r.cells[k]);
    }
    table->rows.push_back(std::move(mapped));
  }
  return records.error;
}

void JsonAssembler::BeginBatch() { std::fill(state_.begin(), state_.end(), kUnseen); }

void JsonAssembler::FinishBatch(Table* table) const {
  table->header = header_;
  table->cell_kinds.resize(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) {
    table->cell_kinds[c] = state_[c] >= 0 ? static_cast<CellKind>(state_[c]) : CellKind::kText;
  }
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

absl::StatusOr<Table> ParseJsonLines(std::string_view text, std::string source) {
  Table t;
  t.source = std::move(source);
  t.format = InputFormat::kJsonLines;
  detail::JsonAssembler assembler(t.source);
  absl::Status st = assembler.Add(detail::ParseJsonRecords(text, t.source, 1), &t);
  if (!st.ok()) return st;
  assembler.FinishBatch(&t);
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
