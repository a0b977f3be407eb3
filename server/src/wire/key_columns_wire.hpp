// The keys of a key-schema index on the wire (docs/api.md, "Key schemas"): the
// schema an IndexSpec declares (spec.key_columns), the `key_columns` of
// BuildChunk, LookupRequest and LeftBatch decoded against it into the engine's
// KeyColumns (borrowing the message's bytes, like column_codec), and the one
// check of which key field a message may use for an index's key type (`keys`,
// `keys64` or `key_columns`). Builds stage decoded key columns in key_staging.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/key_columns.hpp"
#include "gpujoin/engine/partition.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "wire/column_codec.hpp"

namespace gpujoin::server {

/// An index's key schema as requests are checked against it: the names and
/// types of its key columns, in order (empty for a key word).
struct KeySchemaView {
  std::span<const std::string> names;
  std::span<const engine::ColumnType> types;
};

/// A key schema declared by IndexSpec.key_columns.
struct KeySchema {
  std::vector<std::string> names;
  std::vector<engine::ColumnType> types;
  KeySchemaView view() const { return {names, types}; }
};

/// Decodes spec.key_columns for `key_type` (spec.key_type): required for
/// kColumns (1 to engine::kMaxKeyColumns columns, names as payload column
/// names and unique, types int32, int64, uint32, uint64, string or binary),
/// empty otherwise. INVALID_ARGUMENT naming `spec.key_columns[i].name` /
/// `.type` or `spec.key_columns` and the count.
absl::StatusOr<KeySchema> DecodeKeySchema(
    engine::KeyType key_type,
    const google::protobuf::RepeatedPtrField<v1::KeyColumnSpec>& columns);

/// "sku STRING, id INT64": a schema in messages.
std::string KeySchemaText(KeySchemaView schema);

/// The key columns of one message, decoded and checked against an index's key
/// schema: views of its Column messages (int32 offsets copied only when their
/// bytes are not aligned), so they must not outlive the message. Moving keeps
/// the views valid.
class DecodedKeyColumns {
 public:
  /// False when the message sent no key columns (an optional key input).
  bool present() const { return present_; }
  /// Rows of the keys (0 when not present).
  uint64_t size() const { return keys_.rows(); }
  /// Bytes of the copies this owns (unaligned offsets).
  size_t owned_bytes() const;
  /// The engine's view: one flat HashColumn per key column, in schema order.
  const engine::KeyColumns& view() const { return keys_; }

 private:
  friend absl::StatusOr<DecodedKeyColumns> DecodeKeyColumnList(
      const google::protobuf::RepeatedPtrField<v1::Column>&, KeySchemaView, std::string_view,
      std::string_view, Presence);
  engine::KeyColumns keys_;
  std::vector<DecodedColumn<int32_t>> offsets_;
  bool present_ = false;
};

/// Decodes `columns` (a message's key_columns; `prefix` names the message in
/// errors, e.g. "chunks[2]." or "") for index `index` keyed by `schema`: one
/// Column per key column, in order, each of its type, with an empty name or
/// the key column's, all of one length, their buffers checked as
/// CheckColumnBuffers does (strings valid UTF-8, naming the row).
/// INVALID_ARGUMENT naming the field (`chunks[2].key_columns[1]`) and the sizes;
/// with no columns at all, INVALID_ARGUMENT for a kRequired input, not present
/// for a kOptional one.
absl::StatusOr<DecodedKeyColumns> DecodeKeyColumnList(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns, KeySchemaView schema,
    std::string_view prefix, std::string_view index, Presence presence);

/// What a message sent in its key fields.
struct KeyFieldsSent {
  bool keys = false;
  uint64_t keys_bytes = 0;
  bool keys64 = false;
  uint64_t keys64_bytes = 0;
  int key_columns = 0;
};

/// The key fields a message may use for an index of `index_type`: `keys` for
/// uint32, `keys64` for uint64, `key_columns` for a key schema. INVALID_ARGUMENT
/// naming the field sent, the index and its key type and the field to use
/// (CheckKeyWidth's messages for the two widths).
absl::Status CheckKeyFields(engine::KeyType index_type, const KeyFieldsSent& sent,
                            std::string_view prefix, std::string_view index,
                            KeySchemaView schema);

/// The decoded keys of an index of key kind Key: a column of words, or key columns.
template <typename Key>
using DecodedKeys = std::conditional_t<std::is_same_v<Key, engine::ColumnKey>, DecodedKeyColumns,
                                       DecodedColumn<Key>>;

/// The keys of index key kind Key (uint32_t, uint64_t or engine::ColumnKey) of
/// a message (BuildChunk, LookupRequest, LeftBatch) whose key words `words`
/// were decoded by DecodeKeyColumns: CheckKeyFields, then the words' column
/// (TakeKeys) or the key columns decoded against `schema`.
template <typename Key, typename Message>
absl::StatusOr<DecodedKeys<Key>> TakeIndexKeys(KeyColumns& words, const Message& message,
                                               std::string_view prefix, std::string_view index,
                                               KeySchemaView schema, Presence presence) {
  KeyFieldsSent sent;
  sent.keys = words.keys.present();
  sent.keys_bytes = uint64_t{4} * words.keys.size();
  sent.keys64 = words.keys64.present();
  sent.keys64_bytes = uint64_t{8} * words.keys64.size();
  sent.key_columns = message.key_columns_size();
  const absl::Status fields =
      CheckKeyFields(engine::KeyTypeOfKey<Key>(), sent, prefix, index, schema);
  if (!fields.ok()) return fields;
  if constexpr (std::is_same_v<Key, engine::ColumnKey>) {
    return DecodeKeyColumnList(message.key_columns(), schema, prefix, index, presence);
  } else {
    return TakeKeys<Key>(words, prefix, index, presence);
  }
}

/// OK unless this gpujoind serves one shard of several (`shard`, from --shard
/// I/N) and a row of `keys` belongs to another (engine::PartitionsOf):
/// FAILED_PRECONDITION naming `field` (e.g. "chunks[2].keys"), the first such
/// row, its key, its shard and this one. A router that sends every key to its
/// shard never meets it; one given its shards in another order does.
absl::Status CheckShardKeys(std::span<const uint32_t> keys, const engine::ShardIdentity& shard,
                            std::string_view field);
absl::Status CheckShardKeys(std::span<const uint64_t> keys, const engine::ShardIdentity& shard,
                            std::string_view field);
absl::Status CheckShardKeys(const DecodedKeyColumns& keys, const engine::ShardIdentity& shard,
                            std::string_view field);
template <typename Key>
absl::Status CheckShardKeys(const DecodedColumn<Key>& keys, const engine::ShardIdentity& shard,
                            std::string_view field) {
  return CheckShardKeys(keys.span(), shard, field);
}

/// The engine input of decoded keys (one chunk of words, or the key columns).
inline const engine::KeyColumns& KeyInputOf(const DecodedKeyColumns& keys) { return keys.view(); }
template <typename Key>
engine::Chunked<Key> KeyInputOf(const DecodedColumn<Key>& keys) {
  return {keys.span()};
}

/// Calls `f(std::type_identity<Key>{})` with the key kind of an index of `type`
/// (uint32_t, uint64_t or engine::ColumnKey) and returns its result: the one
/// dispatch from an index's key type to the code templated on its key.
template <typename F>
decltype(auto) WithIndexKey(engine::KeyType type, F&& f) {
  if (type == engine::KeyType::kColumns) return f(std::type_identity<engine::ColumnKey>{});
  return WithKeyWord(type, std::forward<F>(f));
}

}  // namespace gpujoin::server
