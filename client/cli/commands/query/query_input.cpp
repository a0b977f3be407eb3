#include "commands/query/query_input.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::cli {
namespace {

using client::ColumnType;

bool IsInteger(ColumnType t) {
  return t == ColumnType::kInt32 || t == ColumnType::kInt64 || t == ColumnType::kUint32 ||
         t == ColumnType::kUint64;
}

// The type of column `col` when nothing asks for one: the build's inference
// (int64, float64, bool, string), except that integers above int64 that are
// all non-negative make uint64 rather than float64 (IDs keep every digit).
ColumnType InferType(const Table& t, size_t col) {
  const ColumnType inferred = InferPayloadType(t, col);
  if (inferred == ColumnType::kFloat64 &&
      PayloadColumn(t, col, SchemaEntry{t.header[col], ColumnType::kUint64}, false).ok()) {
    return ColumnType::kUint64;
  }
  return inferred;
}

}  // namespace

absl::StatusOr<InputTypes> TypeInput(const Table& first, std::string_view schema_text,
                                     const std::vector<KeyNeed>& needs) {
  auto schema = ParseSchema(schema_text);
  if (!schema.ok()) return schema.status();
  for (const SchemaEntry& e : *schema) {
    if (std::find(first.header.begin(), first.header.end(), e.name) == first.header.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schema: ", first.source, " has no column '", e.name,
                       "' (columns: ", absl::StrJoin(first.header, ", "), ")"));
    }
  }
  InputTypes out;
  for (size_t c = 0; c < first.header.size(); ++c) {
    const std::string& name = first.header[c];
    const auto given = std::find_if(schema->begin(), schema->end(),
                                    [&](const SchemaEntry& e) { return e.name == name; });
    if (given != schema->end()) {
      out.columns.push_back(*given);
      out.source.push_back("--schema");
      continue;
    }
    // What the lookups reading it need: one exact type, or any integer.
    const KeyNeed* exact = nullptr;
    const KeyNeed* integer = nullptr;
    for (const KeyNeed& n : needs) {
      if (n.column != name) continue;
      const KeyNeed*& slot = n.type ? exact : integer;
      if (slot == nullptr) slot = &n;
      if (n.type && *exact->type != *n.type) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column '", name, "' is read as ", std::string(SchemaTypeName(*exact->type)), " (",
            exact->why, ") and as ", std::string(SchemaTypeName(*n.type)), " (", n.why,
            "); give a column each"));
      }
    }
    if (exact != nullptr && integer != nullptr && !IsInteger(*exact->type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", name, "' is read as ", std::string(SchemaTypeName(*exact->type)), " (",
          exact->why, ") and as an integer (", integer->why, "); give a column each"));
    }
    if (exact != nullptr) {
      out.columns.push_back(SchemaEntry{name, *exact->type});
      out.source.push_back(exact->why);
      continue;
    }
    if (integer != nullptr) {
      // int64 unless the keys need uint64; a cell that is neither is named.
      ColumnType type = ColumnType::kInt64;
      auto as_i64 = PayloadColumn(first, c, SchemaEntry{name, ColumnType::kInt64}, false);
      if (!as_i64.ok()) {
        if (PayloadColumn(first, c, SchemaEntry{name, ColumnType::kUint64}, false).ok()) {
          type = ColumnType::kUint64;
        } else {
          return absl::InvalidArgumentError(absl::StrCat(
              as_i64.status().message(), ": an integer key is needed (", integer->why, ")"));
        }
      }
      out.columns.push_back(SchemaEntry{name, type});
      out.source.push_back(integer->why);
      continue;
    }
    out.columns.push_back(SchemaEntry{name, InferType(first, c)});
    out.source.push_back("");
  }
  return out;
}

absl::StatusOr<std::vector<client::Column>> TypedColumns(const Table& batch,
                                                         const InputTypes& types) {
  if (batch.header.size() != types.columns.size()) {
    return absl::InternalError(absl::StrCat(batch.source, ": a batch of ", batch.header.size(),
                                            " columns where the first had ", types.columns.size()));
  }
  std::vector<client::Column> out;
  out.reserve(types.columns.size());
  for (size_t c = 0; c < types.columns.size(); ++c) {
    const std::string& source = types.source[c];
    auto col = PayloadColumn(batch, c, types.columns[c], source == "--schema");
    if (!col.ok()) {
      const SchemaEntry& e = types.columns[c];
      if (source.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            col.status().message(), " (the first batch made the column ",
            std::string(SchemaTypeName(e.type)), "; give its type: --schema ", e.name, ":TYPE)"));
      }
      if (source != "--schema") {
        return absl::InvalidArgumentError(absl::StrCat(col.status().message(), " (", source, ")"));
      }
      return col.status();
    }
    out.push_back(*std::move(col));
  }
  return out;
}

}  // namespace gpujoin::cli
