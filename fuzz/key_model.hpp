// A reference model of key schemas for the fuzz targets (docs/api.md, "Key
// schemas"): the documented checks of the key columns a message sends (the
// reference for server/src/wire/key_columns_wire.cpp and column_check.cpp),
// the key of each row as a tuple of byte strings, and a key-schema index as a
// map from key tuple to its build rows (the lowest first), read beside the
// index's table so that probe counts are predicted too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "google/protobuf/repeated_ptr_field.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::fuzz {

/// A key schema: the key columns' names and wire types, in order.
struct KeySchemaModel {
  std::vector<std::string> names;
  std::vector<v1::ColumnType> types;
  size_t size() const { return types.size(); }
};

/// Whether `type` can be a key column (int32, int64, uint32, uint64, string, binary).
bool IsKeyColumnType(v1::ColumnType type);

/// The schema spec.key_columns declares, or nullopt when the documented rules
/// refuse it (1 to 8 columns, names [A-Za-z0-9_.-]{1,128} and unique, key types).
std::optional<KeySchemaModel> ModelKeySchema(
    const google::protobuf::RepeatedPtrField<v1::KeyColumnSpec>& columns);

/// One row's key: per key column its value bytes (integers: their little-endian
/// bytes), compared byte for byte.
using KeyTuple = std::vector<std::string>;
/// Rows of keys: nullopt for a row with a null in any key column.
using KeyRowList = std::vector<std::optional<KeyTuple>>;

/// Whether `bytes` is UTF-8 (RFC 3629: no overlong forms, surrogates or code
/// points above U+10FFFF). Written apart from the server's check.
bool IsUtf8(std::string_view bytes);

/// What the documented checks make of a message's key_columns.
struct KeyColumnsOutcome {
  /// Empty when accepted; else text the INVALID_ARGUMENT message must contain,
  /// naming the field ("key_columns[1].offsets", "batches[0].key_columns: 1 columns").
  std::string error;
  bool present = false;  ///< columns were sent (accepted only)
  KeyRowList rows;       ///< the rows (accepted only)
};

/// Decodes `columns` (`prefix` names the message: "", "chunks[2].",
/// "batches[0].") for `schema` by docs/api.md "Key schemas": one Column per key
/// column, each checked in turn (name empty or the key column's, its type, the
/// length of column 0, then its buffers: fixed width data of length * width bytes
/// and no offsets; string and binary length + 1 int32 offsets, the first >= 0,
/// non-decreasing, the last within data, strings UTF-8 row by row; validity
/// empty or ceil(length / 8) bytes). No columns at all: not present when
/// `required` is false, else the count error.
KeyColumnsOutcome ModelKeyColumns(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                  const KeySchemaModel& schema, std::string_view prefix,
                                  bool required);

/// Appends one canonical Column per key column holding `rows` (offsets from 0,
/// a validity bitmap only where a row is null: null in every key column) to
/// `out`. Names are the schema's when `named`, else empty.
void AppendKeyColumns(const KeySchemaModel& schema, const KeyRowList& rows, bool named,
                      google::protobuf::RepeatedPtrField<v1::Column>* out);

/// The 64-bit fingerprints of `rows` (the row hash of their key columns: a
/// HashNode over AppendKeyColumns' columns, run on `backend`); 0 for a null row.
std::vector<uint64_t> Fingerprints(engine::Backend& backend, const KeySchemaModel& schema,
                                   const KeyRowList& rows);

/// What a query of one row finds in an index.
struct RowAnswer {
  uint32_t probes = 0;
  /// Empty when missing; else the values of the key's rows in source order
  /// (lowest_row: the lowest row's alone).
  std::vector<uint32_t> matches;
};

/// A built key-schema index as the model holds it: the key tuple of every build
/// row, the value of each, and the table read from the index (fingerprint and
/// build row of every slot).
class ColumnReference {
 public:
  KeySchemaModel schema;
  uint32_t capacity = 0;
  uint32_t probe_bound = 0;  ///< the index's own bound
  bool keep_all = false;
  bool build_overflowed = false;
  KeyRowList rows;               ///< every build row (invalid ones as nullopt)
  std::vector<uint32_t> values;  ///< each build row's value
  /// Each distinct valid key and its valid build rows in source order.
  std::map<KeyTuple, std::vector<uint32_t>> groups;
  std::vector<uint64_t> slot_fingerprints;
  std::vector<uint32_t> slot_rows;  ///< engine::kEmptySlotRow: empty

  /// The answer to a query for `key` (fingerprint `fp`) examining at most
  /// `max_probe_count` slots (0: the index's bound), by the documented walk:
  /// from the fingerprint's home slot, stopping at the key (found), an empty
  /// slot or a resident that comes after it in Robin Hood order; a resident of
  /// the same fingerprint but another key is passed. A null key examines none.
  RowAnswer Answer(const std::optional<KeyTuple>& key, uint64_t fp, uint64_t max_probe_count) const;
};

/// Reads key-schema index `index` (built from `rows` with `values`, invalid
/// rows nullopt: a null key column or masked out) through
/// Backend::ExportIndex and checks its table against the model: every
/// occupied slot holds a valid build row whose fingerprint it carries, within
/// the probe bound, in Robin Hood order, each key once, and, when no row
/// overflowed, every distinct valid key, in the slot of its lowest row. Aborts
/// otherwise.
ColumnReference ReadColumnReference(engine::Backend& backend, const engine::HashIndex& index,
                                    KeySchemaModel schema, KeyRowList rows,
                                    std::vector<uint32_t> values);

}  // namespace gpujoin::fuzz
