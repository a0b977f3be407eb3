#include "wire/key_columns_wire.hpp"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire/column_check.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {
namespace {

// "STRING" for COLUMN_TYPE_STRING.
std::string ShortTypeName(engine::ColumnType type) {
  std::string name = WireColumnTypeName(ToWireColumnType(type));
  constexpr std::string_view kPrefix = "COLUMN_TYPE_";
  if (name.starts_with(kPrefix)) name.erase(0, kPrefix.size());
  return name;
}

}  // namespace

absl::StatusOr<KeySchema> DecodeKeySchema(
    engine::KeyType key_type,
    const google::protobuf::RepeatedPtrField<v1::KeyColumnSpec>& columns) {
  KeySchema schema;
  if (key_type != engine::KeyType::kColumns) {
    if (columns.empty()) return schema;
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.key_columns: ", columns.size(), " key columns declared but spec.key_type is ",
        std::string(engine::KeyTypeName(key_type)),
        "; set spec.key_type KEY_TYPE_COLUMNS for a key schema"));
  }
  if (columns.empty() || static_cast<size_t>(columns.size()) > engine::kMaxKeyColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.key_columns: ", columns.size(), " key columns; spec.key_type KEY_TYPE_COLUMNS needs ",
        "1 to ", engine::kMaxKeyColumns));
  }
  std::map<std::string, int, std::less<>> seen;
  for (int i = 0; i < columns.size(); ++i) {
    const v1::KeyColumnSpec& c = columns.Get(i);
    const std::string field = absl::StrCat("spec.key_columns[", i, "]");
    GPUJOIN_RETURN_IF_ERROR(ValidateColumnName(c.name(), field + ".name"));
    auto [it, inserted] = seen.emplace(c.name(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: key column \"", c.name(),
                                                     "\" is declared twice (also spec.key_columns[",
                                                     it->second, "])"));
    }
    auto type = FromWireColumnType(c.type(), field + ".type");
    if (!type.ok() || !engine::IsKeyColumnType(*type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".type: ", WireColumnTypeName(c.type()),
          " cannot be a key column (COLUMN_TYPE_INT32, _INT64, _UINT32, _UINT64, _STRING or "
          "_BINARY)"));
    }
    schema.names.push_back(c.name());
    schema.types.push_back(*type);
  }
  return schema;
}

std::string KeySchemaText(KeySchemaView schema) {
  std::vector<std::string> parts;
  for (size_t c = 0; c < schema.names.size() && c < schema.types.size(); ++c) {
    parts.push_back(absl::StrCat(schema.names[c], " ", ShortTypeName(schema.types[c])));
  }
  return absl::StrJoin(parts, ", ");
}

size_t DecodedKeyColumns::owned_bytes() const {
  size_t bytes = 0;
  for (const DecodedColumn<int32_t>& o : offsets_) bytes += o.owned_bytes();
  return bytes;
}

absl::StatusOr<DecodedKeyColumns> DecodeKeyColumnList(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns, KeySchemaView schema,
    std::string_view prefix, std::string_view index, Presence presence) {
  DecodedKeyColumns out;
  const std::string field = absl::StrCat(std::string(prefix), "key_columns");
  if (columns.empty() && presence == Presence::kOptional) return out;
  const size_t want = schema.types.size();
  if (static_cast<size_t>(columns.size()) != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", columns.size(), " columns, but index \"", std::string(index),
        "\" has a key of ", want, " (", KeySchemaText(schema),
        "); send one Column per key column, in that order"));
  }
  out.present_ = true;
  out.offsets_.reserve(want);
  for (size_t i = 0; i < want; ++i) {
    const v1::Column& c = columns.Get(static_cast<int>(i));
    const std::string& name = schema.names[i];
    const engine::ColumnType type = schema.types[i];
    const std::string where = absl::StrCat(field, "[", i, "]");
    if (!c.name().empty() && c.name() != name) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".name: \"", c.name(), "\", but key column ", i, " of index \"",
          std::string(index), "\" is \"", name, "\" (leave the name empty or send the key columns ",
          "in the order ", KeySchemaText(schema), ")"));
    }
    if (c.type() != ToWireColumnType(type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".type: ", WireColumnTypeName(c.type()), ", but key column ", i, " (\"", name,
          "\") of index \"", std::string(index), "\" is ",
          WireColumnTypeName(ToWireColumnType(type))));
    }
    if (i > 0 && c.length() != columns.Get(0).length()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".length: ", c.length(),
                                                     " rows, but ", field, "[0] has ",
                                                     columns.Get(0).length(),
                                                     " (every key column has one row per key)"));
    }
    GPUJOIN_ASSIGN_OR_RETURN(
        CheckedColumn checked,
        CheckColumnBuffers(c, type, absl::StrCat(where, " (column \"", name, "\")"), "the keys"));
    engine::HashColumn h;
    h.type = type;
    h.length = checked.rows;
    if (engine::IsVariableWidth(type)) {
      h.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data().data()),
                                        c.data().size());
      h.offsets = checked.offsets.span();
      out.offsets_.push_back(std::move(checked.offsets));
    } else {
      h.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(checked.data.data()),
                                        checked.data.size());
    }
    h.validity = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(checked.validity.data()),
                                          checked.validity.size());
    out.keys_.columns.push_back(h);
  }
  return out;
}

absl::Status CheckKeyFields(engine::KeyType index_type, const KeyFieldsSent& sent,
                            std::string_view prefix, std::string_view index,
                            KeySchemaView schema) {
  const std::string p(prefix);
  if (index_type == engine::KeyType::kColumns) {
    if (!sent.keys && !sent.keys64) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        p, sent.keys ? "keys" : "keys64", ": index \"", std::string(index),
        "\" is keyed by columns (", KeySchemaText(schema), "); send its keys in ", p,
        "key_columns, one Column per key column (got ", sent.keys ? sent.keys_bytes : sent.keys64_bytes,
        " bytes of ", sent.keys ? "uint32" : "uint64", " keys)"));
  }
  if (sent.key_columns != 0) {
    const bool wide = index_type == engine::KeyType::kUint64;
    return absl::InvalidArgumentError(absl::StrCat(
        p, "key_columns: index \"", std::string(index), "\" has ",
        std::string(engine::KeyTypeName(index_type)), " keys; send them in ", p,
        wide ? "keys64" : "keys", " (got ", sent.key_columns, " key columns)"));
  }
  return CheckKeyWidth(index_type, sent.keys, sent.keys_bytes, sent.keys64, sent.keys64_bytes,
                       prefix, index);
}

}  // namespace gpujoin::server

namespace gpujoin::server {
namespace {

// The first row whose part is not `shard.index`, or -1.
int64_t FirstForeignRow(std::span<const uint32_t> parts, const engine::ShardIdentity& shard) {
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r] != shard.index) return static_cast<int64_t>(r);
  }
  return -1;
}

absl::Status ForeignKey(std::string_view field, int64_t row, const std::string& key, uint32_t part,
                        const engine::ShardIdentity& shard) {
  return absl::FailedPreconditionError(absl::StrCat(
      std::string(field), "[", row, "]: key ", key, " belongs to shard ", part, " of ", shard.count,
      ", but this gpujoind serves shard ", shard.index, "/", shard.count,
      " (--shard); a router must send every key to its shard: check the order of its shards"));
}

template <class K>
absl::Status CheckWords(std::span<const K> keys, const engine::ShardIdentity& shard,
                        std::string_view field) {
  if (!shard.sharded() || keys.empty()) return absl::OkStatus();
  std::vector<uint32_t> parts(keys.size());
  engine::PartitionsOf(keys, shard.count, parts);
  const int64_t row = FirstForeignRow(parts, shard);
  if (row < 0) return absl::OkStatus();
  return ForeignKey(field, row, absl::StrCat(keys[row]), parts[row], shard);
}

}  // namespace

absl::Status CheckShardKeys(std::span<const uint32_t> keys, const engine::ShardIdentity& shard,
                            std::string_view field) {
  return CheckWords(keys, shard, field);
}

absl::Status CheckShardKeys(std::span<const uint64_t> keys, const engine::ShardIdentity& shard,
                            std::string_view field) {
  return CheckWords(keys, shard, field);
}

absl::Status CheckShardKeys(const DecodedKeyColumns& keys, const engine::ShardIdentity& shard,
                            std::string_view field) {
  if (!shard.sharded() || keys.size() == 0) return absl::OkStatus();
  std::vector<uint32_t> parts(keys.size());
  engine::PartitionsOf(keys.view(), shard.count, parts);
  const int64_t row = FirstForeignRow(parts, shard);
  if (row < 0) return absl::OkStatus();
  return ForeignKey(field, row, "(of its key columns)", parts[row], shard);
}

}  // namespace gpujoin::server
