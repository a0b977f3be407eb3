// JSON Lines input (table.hpp): simdjson parses a piece's lines into records,
// and JsonAssembler maps the keys of successive pieces onto one header.
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "input/table.hpp"

namespace gpujoin::cli {
namespace detail {

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

// Maps a piece's keys to its columns in first-seen order, adding a column of
// `out` for each new key.
class JsonColumns {
 public:
  explicit JsonColumns(JsonRecords* out) : out_(out) {}
  size_t Of(std::string_view key) {
    // Few keys per file: a linear scan beats hashing them.
    for (auto& [k, c] : index_) {
      if (k == key) return c;
    }
    index_.emplace_back(std::string(key), out_->keys.size());
    out_->keys.emplace_back(key);
    out_->kinds.push_back(CellKind::kText);
    out_->mixed.push_back(false);
    out_->valued.push_back(false);
    return out_->keys.size() - 1;
  }

 private:
  JsonRecords* out_;
  std::vector<std::pair<std::string, size_t>> index_;  // key -> column, small: linear scan
};

// Reads one field's value `v` into `cell` with its kind; false when it is not
// valid JSON.
bool ReadJsonValue(simdjson::ondemand::value& v, Cell* cell, CellKind* kind) {
  simdjson::ondemand::json_type vt;
  if (v.type().get(vt) != simdjson::SUCCESS) return false;
  *kind = CellKind::kText;
  switch (vt) {
    case simdjson::ondemand::json_type::string: {
      std::string_view sv;
      if (v.get_string().get(sv) != simdjson::SUCCESS) return false;
      *cell = std::string(sv);
      return true;
    }
    case simdjson::ondemand::json_type::number: {
      const std::string_view raw = TrimJsonSpace(v.raw_json_token());
      if (!IsJsonNumber(raw)) return false;
      *cell = std::string(raw);
      *kind = CellKind::kNumber;
      return true;
    }
    case simdjson::ondemand::json_type::boolean: {
      bool b = false;
      if (v.get_bool().get(b) != simdjson::SUCCESS) return false;
      *cell = std::string(b ? "true" : "false");
      *kind = CellKind::kBool;
      return true;
    }
    case simdjson::ondemand::json_type::null: {
      bool is_null = false;
      *cell = std::nullopt;
      return v.is_null().get(is_null) == simdjson::SUCCESS && is_null;
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
      if (e != simdjson::SUCCESS || j.is_discarded()) return false;
      *cell = j.dump();
      *kind = CellKind::kJson;
      return true;
    }
  }
  return true;
}

// Whether a document of `type` that is not an object is still valid JSON (and
// so to be named by its type).
bool ValidScalarDocument(simdjson::ondemand::document& doc, simdjson::ondemand::json_type type) {
  std::string_view raw;
  if (type == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array a;
    return doc.get_array().get(a) == simdjson::SUCCESS &&
           a.raw_json().get(raw) == simdjson::SUCCESS &&
           !nlohmann::ordered_json::parse(raw, nullptr, false).is_discarded();
  }
  return doc.raw_json_token().get(raw) == simdjson::SUCCESS &&
         !nlohmann::ordered_json::parse(raw, nullptr, false).is_discarded();
}

// Reads the fields of `obj` into `row` (cells by column), recording each
// column's kind in `out`; false when a field is not valid JSON.
bool ReadJsonObject(simdjson::ondemand::object& obj, JsonColumns& columns, JsonRecords& out,
                    Row& row) {
  for (auto field_or : obj) {
    simdjson::ondemand::field field;
    std::string_view key;
    if (std::move(field_or).get(field) != simdjson::SUCCESS ||
        field.unescaped_key().get(key) != simdjson::SUCCESS) {
      return false;
    }
    const size_t c = columns.Of(key);
    if (c >= row.cells.size()) row.cells.resize(c + 1);
    simdjson::ondemand::value v = field.value();
    CellKind kind = CellKind::kText;
    if (!ReadJsonValue(v, &row.cells[c], &kind)) return false;
    if (row.cells[c]) {
      if (!out.valued[c]) {
        out.valued[c] = true;
        out.kinds[c] = kind;
      } else if (out.kinds[c] != kind) {
        out.mixed[c] = true;
      }
    }
  }
  return true;
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
  JsonColumns columns(&out);
  size_t pos = 0;
  uint64_t line = first_line - 1;
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
      return std::move(out);
    };
    simdjson::ondemand::document doc;
    if (parser.iterate(base + start, l.size(), padded.size() + simdjson::SIMDJSON_PADDING - start)
            .get(doc) != simdjson::SUCCESS) {
      return invalid();
    }
    simdjson::ondemand::json_type type;
    if (doc.type().get(type) != simdjson::SUCCESS) return invalid();
    if (type != simdjson::ondemand::json_type::object) {
      if (!ValidScalarDocument(doc, type)) return invalid();
      out.error = absl::InvalidArgumentError(
          absl::StrCat(source, ":", line, ": expected a JSON object, got ", JsonTypeName(type)));
      return out;
    }
    simdjson::ondemand::object obj;
    if (doc.get_object().get(obj) != simdjson::SUCCESS) return invalid();
    Row row;
    row.line = line;
    row.cells.assign(out.keys.size(), std::nullopt);
    bool ok = ReadJsonObject(obj, columns, out, row);
    // Nothing may follow the object on its line.
    const char* rest = nullptr;
    if (ok && doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) ok = false;
    if (!ok) return invalid();
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

}  // namespace gpujoin::cli
