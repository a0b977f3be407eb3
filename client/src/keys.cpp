// The out-of-line parts of Keys: the byte count of key columns and the
// client-side checks of keys before they are sent (CheckKeys, CheckKeysFor).
#include "gpujoin/client/keys.hpp"

#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::client {
namespace {

// "key_columns[1] ('sku')", or "key_columns[1]" for a view without a name.
std::string ColumnWhat(std::string_view what, size_t i, std::string_view name) {
  std::string s = absl::StrCat(std::string(what), " key_columns[", i, "]");
  if (!name.empty()) absl::StrAppend(&s, " ('", std::string(name), "')");
  return s;
}

}  // namespace

size_t Keys::size_bytes() const {
  if (type_ != KeyType::kColumns) return size_ * key_bytes();
  size_t bytes = 0;
  for (size_t i = 0; i < column_count_; ++i) {
    const ColumnView v = column(i);
    if (IsVariableWidth(v.type)) {
      if (v.length > 0) {
        bytes += static_cast<size_t>(v.offsets[v.offset + v.length] - v.offsets[v.offset]);
      }
    } else {
      bytes += v.length * ColumnWidth(v.type);
    }
  }
  return bytes;
}

absl::Status CheckKeys(const Keys& keys, std::string_view what) {
  if (keys.type() != KeyType::kColumns) return absl::OkStatus();
  const size_t n = keys.column_count();
  if (n == 0 || n > kMaxKeyColumns) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": ", n, " key columns; a key has 1 to ",
                                                   kMaxKeyColumns));
  }
  const uint64_t rows = keys.column(0).length;
  for (size_t i = 0; i < n; ++i) {
    const ColumnView v = keys.column(i);
    const std::string col = ColumnWhat(what, i, v.name);
    if (!IsKeyColumnType(v.type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          col, ": ", std::string(ColumnTypeName(v.type)),
          " cannot be a key column (int32, int64, uint32, uint64, string or binary)"));
    }
    if (v.length != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(col, " has ", v.length, " rows but ", ColumnWhat(what, 0, keys.column(0).name),
                       " has ", rows, " (every key column has one row per key)"));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnView(v, col));
  }
  return absl::OkStatus();
}

absl::Status CheckKeysFor(const Keys& keys, KeyType key_type,
                          std::span<const KeyColumnSpec> schema, std::string_view what) {
  if (keys.type() != KeyType::kColumns) {
    if (keys.empty() || keys.type() == key_type) return absl::OkStatus();
    if (key_type == KeyType::kColumns) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(what), " has ", std::string(KeyTypeName(keys.type())), " keys but the index has a key schema of ",
          schema.size(), " key columns; send one ColumnView per key column"));
    }
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " has ", std::string(KeyTypeName(keys.type())),
                                                   " keys but the index is declared with ",
                                                   std::string(KeyTypeName(key_type)),
                                                   " keys (IndexSpec::key_type)"));
  }
  if (key_type != KeyType::kColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), " has ", keys.column_count(), " key columns but the index has ",
                     std::string(KeyTypeName(key_type)), " keys (IndexSpec::key_type)"));
  }
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(keys, what));
  if (keys.column_count() != schema.size()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " has ", keys.column_count(),
                                                   " key columns but the index has a key of ",
                                                   schema.size(), " (IndexSpec::key_columns)"));
  }
  for (size_t i = 0; i < schema.size(); ++i) {
    const ColumnView v = keys.column(i);
    const std::string col = ColumnWhat(what, i, v.name);
    if (v.type != schema[i].type) {
      return absl::InvalidArgumentError(absl::StrCat(col, ": ", std::string(ColumnTypeName(v.type)),
                                                     " rows, but key column ", i, " ('",
                                                     schema[i].name, "') is declared ",
                                                     std::string(ColumnTypeName(schema[i].type))));
    }
    if (!v.name.empty() && v.name != schema[i].name) {
      return absl::InvalidArgumentError(absl::StrCat(col, ": key column ", i, " is '",
                                                     schema[i].name, "' (IndexSpec::key_columns)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::client
