// The model and the input layout of fuzz_mutate (docs/operations.md,
// "Fuzzing"): a mutable index as a dictionary from each live key to its rows
// (value and payload cell) with the batch semantics of
// engine/include/gpujoin/engine/mutation.hpp written apart from the engine,
// payload cells to and from wire Columns, the keys a batch draws from, and the
// byte layout of the target's input (fuzz/make_corpus/mutate.cpp writes seeds
// in it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpujoin/engine/mutation.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "key_model.hpp"

namespace gpujoin::fuzz {

/// One payload value: its bytes (fixed width: little-endian; BOOL: "\0" or
/// "\1"; STRING and BINARY: the value bytes), or nullopt for null.
using Cell = std::optional<std::string>;

/// Bytes per value of a fixed-width payload type; 0 for BOOL, STRING and BINARY.
size_t CellWidth(v1::ColumnType type);

/// A payload Column named `name` of `type` holding `cells` in the canonical
/// layout: little-endian values (a null's zeroed), BOOL as a bitmap, STRING and
/// BINARY with int32 offsets from 0, and a validity bitmap only when a cell is
/// null.
v1::Column CellColumn(const std::string& name, v1::ColumnType type, const std::vector<Cell>& cells);

/// The cells of result column `column` (Lookup's and Join's `columns`) of
/// `rows` rows of `type`. Aborts naming `what` when its layout breaks the wire
/// rules: its name, type and length, data of the type's size, rows + 1 int32
/// offsets from 0, non-decreasing, ending at the data's size, validity of
/// ceil(rows / 8) bytes present exactly when null_count > 0, with that many
/// nulls and no bit set past the rows.
std::vector<Cell> ReadCells(const v1::Column& column, const std::string& name, v1::ColumnType type,
                            uint64_t rows, const std::string& what);

/// A delete key as a batch sends it: per key column its value bytes, or
/// nullopt for a null (a key word: one column, never null). Delete keys are
/// distinct by these: a null equals a null.
using DeleteKey = std::vector<std::optional<std::string>>;

/// The delete keys of key columns that ModelKeyColumns accepts for `schema`.
std::vector<DeleteKey> DeleteKeysOf(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                    const KeySchemaModel& schema);

/// The delete key of a key word or of key columns without nulls.
DeleteKey DeleteKeyOf(const KeyTuple& key);

/// One stored row of a key.
struct ModelRow {
  uint32_t value = 0;
  Cell payload;  ///< unused when the index has no payload
};

/// A mutable index as a dictionary: every live key (a KeyTuple; a key word is
/// one element, its little-endian bytes) and its rows in group order.
class MutationModel {
 public:
  MutationModel(bool keep_all, bool words) : keep_all_(keep_all), words_(words) {}

  /// Whether an index can hold `key`: not null, and for a key word not the
  /// reserved word (all ones).
  bool Holdable(const std::optional<KeyTuple>& key) const;

  /// A build row (source order): lowest_row keeps a key's first row, keep_all
  /// appends; a row no index can hold is skipped (an invalid build row).
  void AddBuildRow(const std::optional<KeyTuple>& key, ModelRow row);

  /// Applies one batch by the documented semantics: deletes first (every row of
  /// each distinct delete key; each distinct delete key that is absent counts
  /// once as not found, the reserved word and keys with a null included), then
  /// upserts (lowest_row: insert or assign, the last occurrence of a key wins;
  /// keep_all: appended in batch order), counting each distinct upserted key
  /// once as inserted or updated. Every upsert key must be holdable. Returns
  /// the counts.
  engine::MutationCounts Apply(const std::vector<DeleteKey>& deletes, const KeyRowList& upserts,
                               const std::vector<ModelRow>& rows);

  const std::map<KeyTuple, std::vector<ModelRow>>& keys() const { return keys_; }
  bool keep_all() const { return keep_all_; }
  /// Rows of every group.
  uint64_t live_rows() const;
  /// Rows of the largest group (0 when empty).
  uint64_t largest_group() const;

 private:
  bool keep_all_;
  bool words_;
  std::map<KeyTuple, std::vector<ModelRow>> keys_;
};

/// The input of fuzz_mutate: a sequence of frames (SplitFrames). The first
/// sets the index up, each further one is a batch of one Mutate stream.
namespace mutate_input {

/// Setup frame, byte 0: the key kind in bits 0-2 (taken % 5), then flags.
enum KeyKind : uint8_t { kUint32 = 0, kUint64 = 1, kSchemaS = 2, kSchemaC = 3, kSchemaCm = 4 };
inline constexpr uint8_t kKeepAll = 1 << 3;
inline constexpr uint8_t kExplicitValues = 1 << 4;
inline constexpr uint8_t kPayload = 1 << 5;
/// Bits 6-7: the payload column's type (PayloadTypeOf).
inline constexpr uint8_t kPayloadInt64 = 0 << 6, kPayloadString = 1 << 6, kPayloadBool = 2 << 6,
                         kPayloadBinary = 3 << 6;
/// Byte 1: capacity in bits 0-1 (CapacityOf), max_load_factor in bits 2-3
/// (LoadFactorOf), max_probe_count in bits 4-5 (ProbeBoundOf), first_value in
/// bits 6-7 (FirstValueOf).
inline uint32_t CapacityOf(uint8_t b) {
  constexpr uint32_t kChoices[] = {8, 4, 16, 64};
  return kChoices[b & 3];
}
inline double LoadFactorOf(uint8_t b) {
  constexpr double kChoices[] = {0, 0.5, 1.0, 0.25};  // 0: unset, 0.8
  return kChoices[(b >> 2) & 3];
}
inline uint32_t ProbeBoundOf(uint8_t b) {
  constexpr uint32_t kChoices[] = {0, 0, 2, 1};
  return kChoices[(b >> 4) & 3];
}
inline uint32_t FirstValueOf(uint8_t b) {
  constexpr uint32_t kChoices[] = {0, 1000, 0xfffffff0u, 0xfffffffau};
  return kChoices[(b >> 6) & 3];
}
/// Byte 2: --max-mutation-rows in bits 0-1 (MaxRowsOf).
inline uint64_t MaxRowsOf(uint8_t b) {
  constexpr uint64_t kChoices[] = {1 << 20, 8, 3, 1 << 20};
  return kChoices[b & 3];
}
/// Bytes 3..: the build rows' keys (at most kMaxBuildRows), each a key code.
inline constexpr size_t kMaxBuildRows = 24;

/// A key code: a byte below kRawKey picks entry (byte % size) of the kind's
/// KeyUniverse; kRawKey and above is followed by the key itself: 4 or 8
/// little-endian bytes for a key word; per key column 4 or 8 bytes, or a
/// length byte (% 6) and that many bytes for STRING and BINARY.
inline constexpr uint8_t kRawKey = 0xf0;

/// Batch frame, byte 0: the defect in bits 0-4 (kDefects and above: none),
/// and how fields are sent.
enum Defect : uint8_t {
  kNone = 0,
  kBadIndexName,      // index "m/x": INVALID_ARGUMENT naming index
  kUnknownIndex,      // index "nope": NOT_FOUND
  kUpsertWrongField,  // the upsert keys in the field of another key kind
  kDeleteWrongField,  // the delete keys in the field of another key kind
  kUpsertKeysBoth,    // key words: keys.packed and keys.values both set
  kUpsertKeysRagged,  // key words: packed bytes not a multiple of the width
  kUpsertKeyColumns,  // key schema: one malformed key column (parameter bits 1-3 pick)
  kDeleteKeyColumns,  // the same for delete_key_columns
  kValuesMissing,     // explicit values: none sent
  kValuesCount,       // explicit: one value too many; row IDs: values sent at all
  kValuesBoth,        // explicit: values.packed and values.values both set
  kPayloadMissing,    // no payload column
  kPayloadName,       // the payload column under another name (or one sent for none)
  kPayloadType,       // the payload column of another type
  kPayloadLength,     // one row more (parameter bit 0) or one row less
  kPayloadBuffers,    // offsets one short, data one byte short, or validity too long
  kPayloadNoUpserts,  // a delete-only batch with a payload column
  kEmpty,             // no keys at all (or, parameter bit 0, fields of zero rows)
  kPayloadSplit,      // valid: the payload column sent as two chunks
  kDefects
};
inline constexpr uint8_t kKeysAsList = 1 << 5;     // upsert keys as a values list
inline constexpr uint8_t kValuesAsList = 1 << 6;   // values as a values list
inline constexpr uint8_t kDeletesAsList = 1 << 7;  // delete keys as a values list
/// Byte 1: delete keys (bits 0-3) and upsert keys (bits 4-7).
/// Bytes 2-3: the payload cells that are null (bit i: upsert row i).
/// Byte 4: bit 0 gives upsert row 0 the value 0xffffffff (explicit values);
/// bits 1-7 are the defect's parameter.
/// Bytes 5..: the delete keys' codes, then the upsert keys'.
inline constexpr size_t kBatchHeader = 5;
/// Batches per input.
inline constexpr size_t kMaxBatches = 24;

}  // namespace mutate_input

/// The payload type the setup byte `b` selects.
v1::ColumnType PayloadTypeOf(uint8_t b);

/// The key schema of key kind `kind` (empty for key words): the query
/// fixture's "s", "c" or "cm" (QueryFixtureKeyIndexes).
KeySchemaModel SchemaOf(mutate_input::KeyKind kind);

/// The keys a key code picks from for `kind`. Key words: small and large
/// words, words that differ only in their high 32 bits (uint64), and the
/// reserved word once, last. Key schemas: the fixture index's build rows, each
/// beside a key that differs in its first column, and a null row.
KeyRowList KeyUniverse(mutate_input::KeyKind kind);

/// The payload cell of upsert row `row` of batch `batch` (0: the build),
/// distinct for every (batch, row) but for BOOL.
Cell CellOf(v1::ColumnType type, uint32_t batch, uint32_t row);

}  // namespace gpujoin::fuzz
