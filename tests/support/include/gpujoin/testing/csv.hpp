// An RFC 4180 reader for test expectations, independent of the CLI's readers
// (so that a bug there cannot hide itself): quoted fields with commas, "" and
// line breaks; an unquoted empty field is a null. Header only.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpujoin/testing/files.hpp"

namespace gpujoin::testing {

/// One CSV record: nullopt is an unquoted empty field.
using CsvRow = std::vector<std::optional<std::string>>;

/// The records of `text` (the header is record 0); blank lines are skipped, CR dropped.
inline std::vector<CsvRow> ReadCsvText(const std::string& text) {
  std::vector<CsvRow> rows;
  CsvRow row;
  std::string field;
  bool quoted = false, in_quotes = false, any = false;
  auto end_field = [&] {
    if (quoted || !field.empty()) {
      row.emplace_back(field);
    } else {
      row.emplace_back(std::nullopt);
    }
    field.clear();
    quoted = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        field.push_back(c);
      }
      continue;
    }
    if (c == '"') {
      in_quotes = quoted = any = true;
    } else if (c == ',') {
      end_field();
      any = true;
    } else if (c == '\n') {
      if (any || !field.empty()) {
        end_field();
        rows.push_back(std::move(row));
      }
      row.clear();
      any = false;
    } else if (c != '\r') {
      field.push_back(c);
      any = true;
    }
  }
  if (any || !field.empty()) {
    end_field();
    rows.push_back(std::move(row));
  }
  return rows;
}

/// The records of the file at `path`.
inline std::vector<CsvRow> ReadCsv(const std::filesystem::path& path) {
  return ReadCsvText(Slurp(path));
}

}  // namespace gpujoin::testing
