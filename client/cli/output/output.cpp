#include "output/output.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpujoin::cli {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool NeedsQuotes(const std::string& s, char delimiter) {
  if (s.empty()) return true;  // distinguishes "" from null
  if (s.front() == ' ' || s.back() == ' ') return true;
  for (char c : s) {
    if (c == delimiter || c == '"' || c == '\n' || c == '\r') return true;
  }
  return false;
}

void WriteField(std::ostream& out, const Cell& c, char delimiter) {
  if (!c) return;
  if (!NeedsQuotes(*c, delimiter)) {
    out << *c;
    return;
  }
  out << '"';
  for (char ch : *c) {
    if (ch == '"') out << '"';
    out << ch;
  }
  out << '"';
}

nlohmann::ordered_json RowToJson(const ResultTable& t, const std::vector<Cell>& row) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (size_t c = 0; c < t.columns.size(); ++c) o[t.columns[c]] = CellToJson(row[c], t.kinds[c]);
  return o;
}

// Display width of UTF-8 text: counts code points, not bytes.
size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char ch : s) {
    if ((ch & 0xC0) != 0x80) ++w;
  }
  return w;
}

}  // namespace

nlohmann::ordered_json CellToJson(const Cell& c, ColumnKind kind) {
  if (!c) return nullptr;
  switch (kind) {
    case ColumnKind::kBool:
      if (*c == "true") return true;
      if (*c == "false") return false;
      return *c;
    case ColumnKind::kNumber:
    case ColumnKind::kFloat: {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(*c, nullptr, /*allow_exceptions=*/false);
      if (j.is_number()) return j;
      // NaN, inf and other non-JSON numbers.
      if (kind == ColumnKind::kFloat) return *c;
      return nullptr;
    }
    case ColumnKind::kJson: {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(*c, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) return j;
      return *c;
    }
    case ColumnKind::kString:
      break;
  }
  return *c;
}

std::string ResultTable::AddColumn(std::string name, ColumnKind kind) {
  std::string candidate = name;
  for (int k = 2; std::find(columns.begin(), columns.end(), candidate) != columns.end(); ++k) {
    candidate = name + "_" + std::to_string(k);
  }
  columns.push_back(candidate);
  kinds.push_back(kind);
  return candidate;
}

void ResultTable::SetGenerator(size_t count, Generator generator) {
  rows.clear();
  generated_rows_ = count;
  generator_ = std::move(generator);
}

size_t ResultTable::RowCount() const { return generator_ ? generated_rows_ : rows.size(); }

void ResultTable::ForEachRow(const std::function<void(const std::vector<Cell>&)>& fn) const {
  if (!generator_) {
    for (const auto& row : rows) fn(row);
    return;
  }
  std::vector<Cell> row;
  for (size_t r = 0; r < generated_rows_; ++r) {
    row.clear();
    generator_(r, &row);
    fn(row);
  }
}

void WriteDelimited(std::ostream& out, const ResultTable& t, char delimiter) {
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (c) out << delimiter;
    WriteField(out, t.columns[c], delimiter);
  }
  out << '\n';
  t.ForEachRow([&](const std::vector<Cell>& row) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) out << delimiter;
      WriteField(out, row[c], delimiter);
    }
    out << '\n';
  });
}

void WriteJsonLines(std::ostream& out, const ResultTable& t) {
  t.ForEachRow([&](const std::vector<Cell>& row) { out << RowToJson(t, row).dump() << '\n'; });
}

nlohmann::ordered_json RowsToJson(const ResultTable& t) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  t.ForEachRow([&](const std::vector<Cell>& row) { a.push_back(RowToJson(t, row)); });
  return a;
}

void WriteAligned(std::ostream& out, const ResultTable& t) {
  std::vector<size_t> width(t.columns.size());
  for (size_t c = 0; c < t.columns.size(); ++c) width[c] = DisplayWidth(t.columns[c]);
  t.ForEachRow([&](const std::vector<Cell>& row) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c]) width[c] = std::max(width[c], DisplayWidth(*row[c]));
    }
  });
  auto cell = [&](const std::string& s, size_t c) {
    const size_t pad = width[c] - DisplayWidth(s);
    if (t.kinds[c] == ColumnKind::kNumber || t.kinds[c] == ColumnKind::kFloat) {
      out << std::string(pad, ' ') << s;
    } else {
      out << s << std::string(pad, ' ');
    }
  };
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (c) out << "  ";
    cell(t.columns[c], c);
  }
  out << '\n';
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (c) out << "  ";
    out << std::string(width[c], '-');
  }
  out << '\n';
  t.ForEachRow([&](const std::vector<Cell>& row) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) out << "  ";
      cell(row[c].value_or(""), c);
    }
    out << '\n';
  });
}

bool WriteResultFile(const std::string& path, const ResultTable& t, std::string* error) {
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (path != "-") {
    file.open(path, std::ios::binary | std::ios::trunc);
    if (!file) {
      *error = path + ": cannot open for writing";
      return false;
    }
    out = &file;
  }
  if (EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson")) {
    WriteJsonLines(*out, t);
  } else if (EndsWith(path, ".tsv")) {
    WriteDelimited(*out, t, '\t');
  } else {
    WriteDelimited(*out, t, ',');
  }
  out->flush();
  if (!*out) {
    *error = (path == "-" ? std::string("<stdout>") : path) + ": write failed";
    return false;
  }
  return true;
}

namespace {

template <typename Float>
std::string ShortestFloat(Float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, p);
}

}  // namespace

std::string FormatFloat(float v) { return ShortestFloat(v); }
std::string FormatDouble(double v) { return ShortestFloat(v); }

std::string FormatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%.0f %s", bytes, kUnits[u]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", bytes, kUnits[u]);
  }
  return buf;
}

}  // namespace gpujoin::cli
