// Fuzz target: a Mutate stream (server/src/ops/mutate.cpp) on the CPU backend,
// each batch run as the stream reactor runs it (MutateTraits: Process, the
// in-band error of a bad batch, Seal), against a dictionary model
// (mutate_model.hpp) of one index per input: uint32, uint64 or a key schema
// (the query fixture's "s", "c" or "cm"); lowest_row or keep_all; row IDs or
// explicit values; with or without a payload column (int64, string, bool or
// binary); a fuzzed capacity, max_load_factor, probe bound, first value and
// --max-mutation-rows.
//
// Input: frames (SplitFrames): the index's setup and build rows, then up to 24
// batches, each drawing its delete and upsert keys from a universe of keys that
// collide and differ by a byte (the reserved word and a null key among them) or
// taking them raw, with at most one defect (mutate_model.hpp, mutate_input: a
// wrong key field, both packed and listed keys, ragged packed keys, malformed
// key columns, missing / extra / both-way values, values for a row-ID index, a
// missing / renamed / retyped / longer / shorter / malformed payload column,
// payload without upserts, an empty batch, a bad or unknown index name).
// Checked after the build and after every batch:
//  - the answer is the one the documented checks give, in their order: a bad
//    batch is answered in-band (error code and a message naming the field; the
//    response carries the batch ID and nothing else), an upsert key no index
//    can hold names its row, more rows than --max-mutation-rows and row IDs
//    past 0xfffffffe are RESOURCE_EXHAUSTED;
//  - a refused batch changes nothing: the index's description (sequence,
//    capacity, statistics, bytes, next row ID) is byte for byte the same, the
//    budget holds the same bytes, and the content is the model's;
//  - an applied batch reports the model's counts (upsert rows, inserted,
//    updated, deleted and not found keys, deleted rows), the next mutation
//    sequence, the build version, statistics of the model's keys and rows
//    (no overflow), the capacity GrownCapacity gives (at least that with a
//    probe bound), `rehashed` exactly when it grew, and the description agrees
//    (rehashes, next row ID, probe bound); the budget holds exactly the
//    table's bytes and the staging budget nothing;
//  - the content: a lookup of every key of the universe and every key the input
//    named gives, per key, found, the value of its first row, its group's size
//    and its first row's payload, and the mutation sequence; an inner join of
//    the same keys gives every row of each key's group in group order, with its
//    payload.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "mutate_model.hpp"
#include "rpc/rpc_traits.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

using namespace mutate_input;

constexpr char kIndex[] = "m";
constexpr char kColumn[] = "p";
constexpr uint64_t kBudgetBytes = uint64_t{64} << 20;

// The input's bytes, read in order; zeros once they run out.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  uint8_t Next() { return pos_ < bytes_.size() ? static_cast<uint8_t>(bytes_[pos_++]) : 0; }
  std::string Take(size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(Next()));
    return out;
  }
  bool done() const { return pos_ >= bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// The index an input sets up.
struct Setup {
  KeyKind kind = kUint32;
  bool keep_all = false;
  bool explicit_values = false;
  bool payload = false;
  v1::ColumnType payload_type = v1::COLUMN_TYPE_INT64;
  uint32_t capacity = 8;
  double max_load_factor = 0;  // unset: 0.8
  uint32_t probe_bound = 0;    // 0: the capacity
  uint32_t first_value = 0;
  uint64_t max_rows = 0;  // --max-mutation-rows
  KeySchemaModel schema;
  KeyRowList universe;

  bool words() const { return kind == kUint32 || kind == kUint64; }
  size_t width() const { return kind == kUint64 ? 8 : 4; }
  double load_factor() const { return max_load_factor == 0 ? 0.8 : max_load_factor; }
};

Setup ReadSetup(Reader& in) {
  Setup s;
  const uint8_t b0 = in.Next(), b1 = in.Next(), b2 = in.Next();
  s.kind = static_cast<KeyKind>((b0 & 7) % 5);
  s.keep_all = (b0 & kKeepAll) != 0;
  s.explicit_values = (b0 & kExplicitValues) != 0;
  s.payload = (b0 & kPayload) != 0;
  s.payload_type = PayloadTypeOf(b0);
  s.capacity = CapacityOf(b1);
  s.max_load_factor = LoadFactorOf(b1);
  s.probe_bound = ProbeBoundOf(b1);
  s.first_value = FirstValueOf(b1);
  s.max_rows = MaxRowsOf(b2);
  s.schema = SchemaOf(s.kind);
  s.universe = KeyUniverse(s.kind);
  return s;
}

// One key code (mutate_input::kRawKey).
std::optional<KeyTuple> ReadKey(Reader& in, const Setup& s) {
  const uint8_t code = in.Next();
  if (code < kRawKey) return s.universe[code % s.universe.size()];
  if (s.words()) return KeyTuple{in.Take(s.width())};
  KeyTuple key;
  for (v1::ColumnType type : s.schema.types) {
    const size_t width = CellWidth(type);
    key.push_back(in.Take(width != 0 ? width : in.Next() % 6));
  }
  return key;
}

template <typename T>
T WordOf(const std::string& bytes) {
  T v = 0;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

// `keys` (key words) as a uint32 or uint64 column, packed or as a values list
// (which is present even without rows).
v1::U32Column Words32(const KeyRowList& keys, bool as_list) {
  std::vector<uint32_t> words;
  for (const auto& k : keys) words.push_back(WordOf<uint32_t>(k->front()));
  v1::U32Column c;
  if (as_list) {
    c.mutable_values()->mutable_v()->Add(words.begin(), words.end());
  } else {
    *c.mutable_packed() = server::PackColumn<uint32_t>(words);
  }
  return c;
}
v1::U64Column Words64(const KeyRowList& keys, bool as_list) {
  std::vector<uint64_t> words;
  for (const auto& k : keys) words.push_back(WordOf<uint64_t>(k->front()));
  v1::U64Column c;
  if (as_list) {
    c.mutable_values()->mutable_v()->Add(words.begin(), words.end());
  } else {
    *c.mutable_packed() = server::PackColumn<uint64_t>(words);
  }
  return c;
}

// The keys of a probe (LookupRequest, LeftBatch) in the index's key field.
template <typename Message>
void PutProbeKeys(const Setup& s, const KeyRowList& keys, Message* m) {
  if (s.kind == kUint32) {
    *m->mutable_keys() = Words32(keys, false);
  } else if (s.kind == kUint64) {
    *m->mutable_keys64() = Words64(keys, false);
  } else {
    AppendKeyColumns(s.schema, keys, /*named=*/true, m->mutable_key_columns());
  }
}

// `keys` for a failure message: each key's columns escaped, or null.
std::string KeysText(const KeyRowList& keys) {
  std::string out = "[";
  for (const auto& key : keys) {
    if (out.size() > 1) out += ", ";
    if (!key) {
      out += "null";
      continue;
    }
    for (size_t c = 0; c < key->size(); ++c) {
      absl::StrAppend(&out, c == 0 ? "\"" : "\"|\"", absl::CEscape((*key)[c]));
    }
    out += "\"";
  }
  return out + "]";
}

// What a batch must get: OK, or an error code and text its message contains.
struct Expected {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string text;
};

// One generated batch: the request, the keys as the model reads them, the
// upsert rows' values and payload, and the expected answer.
struct Batch {
  v1::MutateRequest request;
  KeyRowList deletes;
  std::vector<DeleteKey> delete_keys;  // deletes as the model counts them
  KeyRowList upserts;
  std::vector<ModelRow> rows;
  Expected expected;
};

class Fixture {
 public:
  explicit Fixture(uint64_t max_rows) : harness_(kBudgetBytes, Config(max_rows)) {}

  void Run(const std::vector<std::string_view>& frames) {
    harness_.Reset();
    Reader setup_in(frames.empty() ? std::string_view() : frames[0]);
    s_ = ReadSetup(setup_in);
    model_ = MutationModel(s_.keep_all, s_.words());
    named_.clear();
    if (!BuildIndex(setup_in)) return;
    CheckIndex("after the build");
    for (size_t b = 1; b < frames.size(); ++b) {
      Reader in(frames[b]);
      RunBatch(static_cast<uint32_t>(b), in);
    }
  }

 private:
  static server::ServerConfig Config(uint64_t max_rows) {
    server::ServerConfig config;
    config.max_mutation_rows = max_rows;
    return config;
  }

  // Builds index kIndex from the setup's build rows; false when the shape is
  // not one this target checks (generated values past 0xfffffffe, overflow).
  bool BuildIndex(Reader& in) {
    KeyRowList keys;
    while (!in.done() && keys.size() < kMaxBuildRows) keys.push_back(ReadKey(in, s_));
    for (const auto& k : keys) named_.insert(k);
    const uint32_t rows = static_cast<uint32_t>(keys.size());
    if (!s_.explicit_values && rows > 0 && uint64_t{s_.first_value} + rows - 1 > 0xfffffffeu) {
      return false;  // refused by the build (fuzz_build_session's concern)
    }
    std::vector<uint32_t> values;
    std::vector<Cell> cells;
    for (uint32_t r = 0; r < rows; ++r) {
      values.push_back(s_.explicit_values ? 10000 + 7 * r : s_.first_value + r);
      cells.push_back(r % 4 == 3 ? std::nullopt : CellOf(s_.payload_type, 0, r));
      model_.AddBuildRow(keys[r], ModelRow{values[r], cells[r]});
    }
    next_row_id_ = s_.explicit_values ? 0 : uint64_t{s_.first_value} + rows;

    server::BuildSession session(&harness_.ops());
    v1::BuildIndexRequest spec;
    v1::IndexSpec& sp = *spec.mutable_spec();
    sp.set_name(kIndex);
    sp.set_capacity(s_.capacity);
    sp.set_max_probe_count(s_.probe_bound);
    sp.set_explicit_values(s_.explicit_values);
    if (!s_.explicit_values) sp.set_first_value(s_.first_value);
    if (s_.max_load_factor != 0) sp.set_max_load_factor(s_.max_load_factor);
    if (s_.keep_all) sp.set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
    sp.set_key_type(s_.kind == kUint32   ? v1::KEY_TYPE_UINT32
                    : s_.kind == kUint64 ? v1::KEY_TYPE_UINT64
                                         : v1::KEY_TYPE_COLUMNS);
    for (size_t c = 0; c < s_.schema.size(); ++c) {
      v1::KeyColumnSpec& k = *sp.add_key_columns();
      k.set_name(s_.schema.names[c]);
      k.set_type(s_.schema.types[c]);
    }
    if (s_.payload) {
      v1::PayloadColumnSpec& p = *sp.add_payload();
      p.set_name(kColumn);
      p.set_type(s_.payload_type);
    }
    absl::Status status = session.Add(std::move(spec));
    FUZZ_CHECK(status.ok(), Describe(status));
    v1::BuildIndexRequest chunk;
    v1::BuildChunk& c = *chunk.mutable_chunk();
    // Zero rows as an empty packed column, as a client sends them.
    if (s_.kind == kUint32) {
      *c.mutable_keys() = Words32(keys, false);
    } else if (s_.kind == kUint64) {
      *c.mutable_keys64() = Words64(keys, false);
    } else {
      AppendKeyColumns(s_.schema, keys, /*named=*/true, c.mutable_key_columns());
      // Raw string keys that are not UTF-8 fail the build (fuzz_build_session's concern).
      if (!ModelKeyColumns(c.key_columns(), s_.schema, "", true).error.empty()) return false;
    }
    if (s_.explicit_values) {
      *c.mutable_values()->mutable_packed() = server::PackColumn<uint32_t>(values);
    }
    if (s_.payload) *c.add_payload() = CellColumn(kColumn, s_.payload_type, cells);
    status = session.Add(std::move(chunk));
    FUZZ_CHECK(status.ok(), Describe(status));
    std::atomic<bool> cancelled{false};
    auto built = session.Finish(cancelled);
    FUZZ_CHECK(built.ok(), Describe(built.status()));
    // A build whose rows found no slot within the probe bound lacks keys the
    // model has: not a start this target checks mutations from.
    if ((*built)->index->build_statistics().overflow_rows != 0) return false;
    version_ = (*built)->version;
    sequence_ = 0;
    rehashes_ = 0;
    capacity_ = s_.capacity;
    return true;
  }

  // Generates batch `b` from its frame (mutate_input).
  Batch MakeBatch(uint32_t b, Reader& in) {
    Batch batch;
    v1::MutateRequest& r = batch.request;
    const uint8_t op = in.Next(), counts = in.Next();
    const uint16_t nulls = static_cast<uint16_t>(in.Next() | in.Next() << 8);
    const uint8_t flags = in.Next();
    const uint8_t param = flags >> 1;
    const Defect defect = static_cast<Defect>((op & 31) < kDefects ? (op & 31) : kNone);
    for (int i = 0; i < (counts & 15); ++i) batch.deletes.push_back(ReadKey(in, s_));
    for (int i = 0; i < (counts >> 4); ++i) batch.upserts.push_back(ReadKey(in, s_));
    if (defect == kEmpty) {
      batch.deletes.clear();
      batch.upserts.clear();
    }
    if (defect == kPayloadNoUpserts) {
      batch.upserts.clear();
      if (batch.deletes.empty()) batch.deletes.push_back(s_.universe[0]);
    }
    r.set_index(defect == kBadIndexName ? "m/x" : defect == kUnknownIndex ? "nope" : kIndex);
    r.set_batch_id(1000 + b);

    // Keys. The defects of key fields are found before any other but the name's.
    std::optional<Expected> key_error;
    auto fail = [](std::optional<Expected>& slot, absl::StatusCode code, std::string text) {
      if (!slot) slot = Expected{code, std::move(text)};
    };
    const auto invalid = absl::StatusCode::kInvalidArgument;
    for (const bool del : {false, true}) {
      KeyRowList& keys = del ? batch.deletes : batch.upserts;
      const std::string prefix = del ? "delete_" : "";
      const bool as_list = (op & (del ? kDeletesAsList : kKeysAsList)) != 0;
      auto put_words = [&](const KeyRowList& words, bool send_wide, bool list) {
        if (send_wide) {
          *(del ? r.mutable_delete_keys64() : r.mutable_keys64()) = Words64(words, list);
        } else {
          *(del ? r.mutable_delete_keys() : r.mutable_keys()) = Words32(words, list);
        }
      };
      auto* columns = del ? r.mutable_delete_key_columns() : r.mutable_key_columns();
      const bool wrong_field = defect == (del ? kDeleteWrongField : kUpsertWrongField) ||
                               (!del && !s_.words() && (defect == kUpsertKeysBoth ||
                                                        defect == kUpsertKeysRagged)) ||
                               (s_.words() && defect == (del ? kDeleteKeyColumns : kUpsertKeyColumns));
      if (wrong_field) {
        // The keys in a field of another key kind, present even without rows.
        std::string field;
        const bool columns_field =
            s_.words() && ((param & 1) != 0 || defect == kUpsertKeyColumns ||
                           defect == kDeleteKeyColumns);
        if (columns_field) {
          v1::Column& c = *columns->Add();
          c.set_type(v1::COLUMN_TYPE_STRING);
          c.set_length(0);
          c.set_offsets(std::string(4, '\0'));
          field = "key_columns";
        } else {
          const bool send_wide = s_.words() ? s_.kind == kUint32 : (param & 1) != 0;
          KeyRowList words;
          for (size_t i = 0; i < keys.size(); ++i) {
            words.push_back(KeyTuple{std::string(send_wide ? 8 : 4, static_cast<char>(i))});
          }
          put_words(words, send_wide, true);
          field = send_wide ? "keys64" : "keys";
        }
        fail(key_error, invalid, absl::StrCat(prefix, field, ": index \"", kIndex, "\""));
        keys.clear();
        continue;
      }
      if (s_.words()) {
        const bool is_wide = s_.kind == kUint64;
        if (!keys.empty() || (defect == kEmpty && (param & 1) != 0)) {
          put_words(keys, is_wide, as_list || keys.empty());
        }
        const std::string field = prefix + (is_wide ? "keys64" : "keys");
        if (!del && defect == kUpsertKeysBoth) {
          if (keys.empty()) keys.push_back(s_.universe[1]);
          put_words(keys, is_wide, false);
          if (is_wide) {
            r.mutable_keys64()->mutable_values()->add_v(1);
          } else {
            r.mutable_keys()->mutable_values()->add_v(1);
          }
          fail(key_error, invalid, field + ": both");
        }
        if (!del && defect == kUpsertKeysRagged) {
          put_words(keys, is_wide, false);
          (is_wide ? r.mutable_keys64()->mutable_packed() : r.mutable_keys()->mutable_packed())
              ->push_back('\x01');
          fail(key_error, invalid, field + ".packed: byte length");
        }
        continue;
      }
      // Key columns, read back by the model's decoder (which also names the
      // defect of a malformed column).
      if (!keys.empty() || (defect == kEmpty && (param & 1) != 0)) {
        AppendKeyColumns(s_.schema, keys, /*named=*/(b & 1) == 0, columns);
      }
      if (defect == (del ? kDeleteKeyColumns : kUpsertKeyColumns)) {
        if (columns->empty()) AppendKeyColumns(s_.schema, {s_.universe[0]}, true, columns);
        BreakKeyColumns(param >> 1, columns);
      }
      const KeyColumnsOutcome decoded = ModelKeyColumns(*columns, s_.schema, prefix, false);
      if (!decoded.error.empty()) {
        fail(key_error, invalid, decoded.error);
        keys.clear();
      } else {
        keys = decoded.rows;
        if (del) batch.delete_keys = DeleteKeysOf(*columns, s_.schema);
      }
    }
    if (s_.words()) {
      for (const auto& k : batch.deletes) batch.delete_keys.push_back(DeleteKeyOf(*k));
    }
    for (const auto& k : batch.deletes) named_.insert(k);
    for (const auto& k : batch.upserts) named_.insert(k);
    const uint64_t upserts = batch.upserts.size();
    const uint64_t rows = upserts + batch.deletes.size();

    // Values.
    std::optional<Expected> values_error;
    std::vector<uint32_t> values;
    for (uint64_t i = 0; i < upserts; ++i) {
      if (s_.explicit_values) {
        values.push_back(i == 0 && (flags & 1) != 0 ? 0xffffffffu : (b << 16) + uint32_t(i) + 1);
      } else {
        values.push_back(static_cast<uint32_t>(next_row_id_ + i));
      }
    }
    const bool values_as_list = (op & kValuesAsList) != 0;
    auto put_values = [&](const std::vector<uint32_t>& v, bool as_list) {
      if (as_list) {
        r.mutable_values()->mutable_values()->mutable_v()->Add(v.begin(), v.end());
      } else {
        *r.mutable_values()->mutable_packed() = server::PackColumn<uint32_t>(v);
      }
    };
    if (s_.explicit_values) {
      if (defect == kValuesMissing) {
        if (upserts > 0) fail(values_error, invalid, "values: neither");
      } else if (defect == kValuesCount) {
        std::vector<uint32_t> more = values;
        more.push_back(7);
        put_values(more, values_as_list);
        fail(values_error, invalid,
             absl::StrCat("values: ", more.size(), " values but the batch has ", upserts));
      } else if (defect == kValuesBoth) {
        std::vector<uint32_t> packed = values.empty() ? std::vector<uint32_t>{7} : values;
        put_values(packed, false);
        r.mutable_values()->mutable_values()->add_v(8);
        fail(values_error, invalid, "values: both");
      } else if (upserts > 0) {
        put_values(values, values_as_list);
      }
    } else {
      if (defect == kValuesCount || defect == kValuesBoth) {
        put_values(values, true);  // present even without rows
        fail(values_error, invalid, "values: index \"m\" gives rows their row IDs");
      } else if (upserts > 0 && next_row_id_ + upserts - 1 > 0xfffffffeu) {
        fail(values_error, absl::StatusCode::kResourceExhausted, "0xfffffffe");
      }
    }

    // Payload.
    std::optional<Expected> payload_error;
    std::vector<Cell> cells;
    for (uint64_t i = 0; i < upserts; ++i) {
      const bool null = i < 16 && ((nulls >> i) & 1) != 0;
      cells.push_back(null ? std::nullopt : CellOf(s_.payload_type, b, uint32_t(i)));
    }
    const std::string where = absl::StrCat("payload[0] (column \"", kColumn, "\")");
    if (defect == kPayloadNoUpserts || (upserts == 0 && defect == kPayloadName)) {
      *r.add_payload() = CellColumn(kColumn, s_.payload_type, {});
      fail(payload_error, invalid, "payload: 1 columns but the batch has no upsert keys");
    } else if (!s_.payload) {
      if (defect == kPayloadName) {
        *r.add_payload() = CellColumn(kColumn, v1::COLUMN_TYPE_INT64, cells);
        fail(payload_error, invalid, "payload[0].name: column \"p\" is not declared");
      }
    } else if (upserts == 0) {
      if (defect == kPayloadType || (defect == kPayloadLength && (param & 1) != 0)) {
        *r.add_payload() = CellColumn(kColumn, OtherType(s_.payload_type),
                                      {CellOf(s_.payload_type, b, 0)});
        fail(payload_error, invalid, "payload: 1 columns but the batch has no upsert keys");
      }
    } else {
      v1::Column column = CellColumn(kColumn, s_.payload_type, cells);
      switch (defect) {
        case kPayloadMissing:
          fail(payload_error, invalid, RowsError(0, upserts));
          break;
        case kPayloadName:
          column.set_name("q");
          *r.add_payload() = column;
          fail(payload_error, invalid, "payload[0].name: column \"q\" is not declared");
          break;
        case kPayloadType:
          column.set_type(OtherType(s_.payload_type));
          *r.add_payload() = column;
          fail(payload_error, invalid, where + ".type");
          break;
        case kPayloadLength: {
          std::vector<Cell> other = cells;
          if ((param & 1) != 0) {
            other.push_back(CellOf(s_.payload_type, b, 99));
            fail(payload_error, invalid,
                 absl::StrCat(where, ".length: ", other.size(), " rows after 0 would exceed ",
                              upserts, " rows, one per upsert key of the batch"));
          } else {
            other.pop_back();
            fail(payload_error, invalid, RowsError(other.size(), upserts));
          }
          *r.add_payload() = CellColumn(kColumn, s_.payload_type, other);
          break;
        }
        case kPayloadBuffers:
          if ((param & 1) != 0) {
            column.set_validity(std::string((upserts + 7) / 8 + 1, '\xff'));
          } else if (!column.offsets().empty()) {
            column.mutable_offsets()->resize(column.offsets().size() - 4);
          } else if (s_.payload_type == v1::COLUMN_TYPE_BOOL) {
            column.mutable_data()->push_back('\0');
          } else {
            column.mutable_data()->pop_back();
          }
          *r.add_payload() = column;
          fail(payload_error, invalid, where);
          break;
        case kPayloadSplit: {
          const size_t half = cells.size() / 2;
          *r.add_payload() = CellColumn(
              kColumn, s_.payload_type, std::vector<Cell>(cells.begin(), cells.begin() + half));
          *r.add_payload() = CellColumn(kColumn, s_.payload_type,
                                        std::vector<Cell>(cells.begin() + half, cells.end()));
          break;
        }
        default:
          *r.add_payload() = column;
      }
    }
    for (uint64_t i = 0; i < upserts; ++i) batch.rows.push_back(ModelRow{values[i], cells[i]});

    // The documented order of the checks.
    std::optional<Expected> invalid_key;
    for (uint64_t i = 0; i < upserts && !invalid_key; ++i) {
      if (!model_.Holdable(batch.upserts[i])) {
        invalid_key = Expected{invalid, absl::StrCat("upsert key row ", i, " ")};
      }
    }
    if (defect == kBadIndexName) {
      batch.expected = {invalid, "index"};
    } else if (defect == kUnknownIndex) {
      batch.expected = {absl::StatusCode::kNotFound, "nope"};
    } else if (key_error) {
      batch.expected = *key_error;
    } else if (rows == 0) {
      batch.expected = {invalid, "no upsert keys"};
    } else if (rows > s_.max_rows) {
      batch.expected = {absl::StatusCode::kResourceExhausted,
                        absl::StrCat("--max-mutation-rows=", s_.max_rows)};
    } else if (values_error) {
      batch.expected = *values_error;
    } else if (payload_error) {
      batch.expected = *payload_error;
    } else if (invalid_key) {
      batch.expected = *invalid_key;
    }
    return batch;
  }

  // The message of a payload column of `rows` rows in a batch of `upserts`.
  static std::string RowsError(uint64_t rows, uint64_t upserts) {
    return absl::StrCat("payload: column \"", kColumn, "\" (payload[0] of index \"", kIndex,
                        "\") has ", rows, " rows, but the batch has ", upserts, " upsert keys");
  }

  // Another payload type than `t`.
  static v1::ColumnType OtherType(v1::ColumnType t) {
    return t == v1::COLUMN_TYPE_STRING ? v1::COLUMN_TYPE_BINARY : v1::COLUMN_TYPE_STRING;
  }

  // One malformation of well-formed key columns, chosen by `which`; the model
  // (ModelKeyColumns) says what the server must make of it, so some are valid
  // (nulls in the last column: null keys).
  void BreakKeyColumns(uint8_t which,
                       google::protobuf::RepeatedPtrField<v1::Column>* columns) const {
    v1::Column& first = *columns->Mutable(0);
    v1::Column& last = *columns->Mutable(columns->size() - 1);
    switch (which % 8) {
      case 0:
        columns->RemoveLast();
        break;
      case 1:
        *columns->Add() = columns->Get(0);
        break;
      case 2:
        first.set_name("other");
        break;
      case 3:
        first.set_type(first.type() == v1::COLUMN_TYPE_STRING ? v1::COLUMN_TYPE_BINARY
                                                              : v1::COLUMN_TYPE_STRING);
        break;
      case 4:
        first.set_validity(std::string(first.length() / 8 + 2, '\xff'));
        break;
      case 5:
        last.set_length(last.length() + 1);
        break;
      case 6:
        if (!first.offsets().empty()) {
          // The last offset past the data.
          first.mutable_offsets()->back() = '\x7f';
        } else {
          first.mutable_data()->pop_back();
        }
        break;
      default: {
        // Every other row null in the last column (a valid request).
        std::string validity(last.length() / 8 + (last.length() % 8 != 0 ? 1 : 0), '\x55');
        last.set_validity(std::move(validity));
      }
    }
  }

  void RunBatch(uint32_t b, Reader& in) {
    Batch batch = MakeBatch(b, in);
    const std::string what = absl::StrCat("batch ", b, " (", batch.request.ShortDebugString().substr(0, 400), ")");
    const v1::IndexInfo before = Info();
    const uint64_t budget_before = harness_.budget().used_bytes();

    // As the stream reactor runs a batch.
    using Traits = server::detail::MutateTraits;
    v1::MutateResponse out;
    const absl::Status status = Traits::Process(harness_.ops(), batch.request, &out, nullptr);
    if (!status.ok()) Traits::SetBatchError(&out, status);
    grpc::ByteBuffer wire;
    Traits::Seal(batch.request, &out, &wire);
    v1::MutateResponse got;
    FUZZ_CHECK(grpc::SerializationTraits<v1::MutateResponse>::Deserialize(&wire, &got).ok(),
               what + ": the response does not parse");
    FUZZ_CHECK(got.batch_id() == batch.request.batch_id(),
               absl::StrCat(what, ": batch_id ", got.batch_id()));

    Expected expected = batch.expected;
    // A probe bound below the capacity may make the table grow until the budget
    // runs out (keys whose home slots agree at every capacity): a refusal.
    if (expected.code == absl::StatusCode::kOk && s_.probe_bound != 0 && got.has_error() &&
        got.error().code() == int(absl::StatusCode::kResourceExhausted) &&
        got.error().message().find("device memory budget") != std::string::npos) {
      expected = {absl::StatusCode::kResourceExhausted, "device memory budget"};
    }
    if (expected.code != absl::StatusCode::kOk) {
      FUZZ_CHECK(got.has_error() && got.error().code() == int(expected.code) &&
                     got.error().message().find(expected.text) != std::string::npos,
                 absl::StrCat(what, ": answered ", got.ShortDebugString().substr(0, 600),
                              "; expected ", absl::StatusCodeToString(expected.code), " naming \"",
                              expected.text, "\""));
      v1::MutateResponse rest = got;
      rest.clear_error();
      rest.clear_batch_id();
      FUZZ_CHECK(rest.ByteSizeLong() == 0,
                 absl::StrCat(what, ": an in-band error beside ", rest.ShortDebugString()));
      const v1::IndexInfo after = Info();
      FUZZ_CHECK(after.SerializeAsString() == before.SerializeAsString(),
                 absl::StrCat(what, ": a refused batch changed the index: ",
                              before.ShortDebugString(), " became ", after.ShortDebugString()));
      FUZZ_CHECK(harness_.budget().used_bytes() == budget_before,
                 absl::StrCat(what, ": a refused batch left ", harness_.budget().used_bytes(),
                              " bytes of the budget used, not ", budget_before));
      CheckIndex(what);
      return;
    }
    FUZZ_CHECK(!got.has_error(), absl::StrCat(what, ": answered ", got.error().ShortDebugString()));
    const engine::MutationCounts want = model_.Apply(batch.delete_keys, batch.upserts, batch.rows);
    engine::MutationCounts counts;
    counts.upsert_rows = got.upsert_rows();
    counts.inserted_keys = got.inserted_keys();
    counts.updated_keys = got.updated_keys();
    counts.deleted_keys = got.deleted_keys();
    counts.not_found_keys = got.not_found_keys();
    counts.deleted_rows = got.deleted_rows();
    FUZZ_CHECK(counts == want,
               absl::StrCat(what, ": counts ", got.ShortDebugString().substr(0, 600),
                            "; expected upsert_rows ", want.upsert_rows, " inserted ",
                            want.inserted_keys, " updated ", want.updated_keys, " deleted ",
                            want.deleted_keys, " not_found ", want.not_found_keys,
                            " deleted_rows ", want.deleted_rows, " for deletes ",
                            KeysText(batch.deletes), " and upserts ", KeysText(batch.upserts)));
    ++sequence_;
    if (!s_.explicit_values) next_row_id_ += batch.upserts.size();
    FUZZ_CHECK(got.mutation_sequence() == sequence_ && got.index_version() == version_ &&
                   !got.durable(),
               absl::StrCat(what, ": sequence ", got.mutation_sequence(), " version ",
                            got.index_version(), "; expected ", sequence_, " and ", version_));
    // The capacity: the smallest power of two at least the last one holding the
    // keys at max_load_factor; a probe bound may make it larger.
    const uint64_t live = model_.keys().size();
    uint64_t grown = capacity_;
    while (double(live) > s_.load_factor() * double(grown)) grown *= 2;
    const uint32_t capacity = got.capacity();
    FUZZ_CHECK(capacity != 0 && (capacity & (capacity - 1)) == 0 &&
                   (s_.probe_bound == 0 ? capacity == grown : capacity >= grown),
               absl::StrCat(what, ": capacity ", capacity, " for ", live, " keys after ", capacity_,
                            " at max_load_factor ", s_.load_factor(), "; expected ", grown));
    FUZZ_CHECK(got.rehashed() == (capacity != capacity_),
               absl::StrCat(what, ": rehashed ", got.rehashed(), " from ", capacity_, " to ",
                            capacity));
    rehashes_ += capacity != capacity_ ? 1 : 0;
    capacity_ = capacity;
    CheckStatistics(got.statistics(), got.load_factor(), what);
    CheckIndex(what);
  }

  // The statistics and load factor of the model's content.
  void CheckStatistics(const v1::BuildStatistics& st, double load_factor, const std::string& what) {
    const uint64_t keys = model_.keys().size();
    const uint64_t rows = model_.live_rows();
    FUZZ_CHECK(st.unique_keys() == keys && st.duplicate_rows() == rows - keys &&
                   st.overflow_rows() == 0 && st.invalid_rows() == 0 &&
                   st.max_group_rows() == (s_.keep_all ? model_.largest_group() : 0),
               absl::StrCat(what, ": statistics ", st.ShortDebugString(), "; expected ", keys,
                            " keys of ", rows, " rows, the largest group ",
                            model_.largest_group()));
    const double want = double(keys) / double(capacity_);
    FUZZ_CHECK(load_factor >= want - 1e-12 && load_factor <= want + 1e-12,
               absl::StrCat(what, ": load_factor ", load_factor, "; expected ", want));
  }

  v1::IndexInfo Info() {
    v1::DescribeIndexRequest request;
    request.set_name(kIndex);
    v1::DescribeIndexResponse response;
    const absl::Status status = harness_.ops().DescribeIndex(request, &response);
    FUZZ_CHECK(status.ok(), Describe(status));
    return response.index();
  }

  // The description, the budgets and the content against the model.
  void CheckIndex(const std::string& what) {
    const v1::IndexInfo info = Info();
    FUZZ_CHECK(info.version() == version_ && info.mutation_sequence() == sequence_ &&
                   info.capacity() == capacity_ && info.rehashes() == rehashes_ &&
                   info.next_row_id() == next_row_id_ &&
                   info.max_probe_count() == (s_.probe_bound == 0 ? capacity_ : s_.probe_bound) &&
                   info.max_load_factor() == s_.load_factor(),
               absl::StrCat(what, ": described as ", info.ShortDebugString(),
                            "; expected sequence ", sequence_, " capacity ", capacity_,
                            " rehashes ", rehashes_, " next_row_id ", next_row_id_));
    if (sequence_ > 0) CheckStatistics(info.statistics(), info.load_factor(), what);
    const auto version = harness_.registry().Get(kIndex);
    FUZZ_CHECK(version != nullptr, what + ": the index is gone");
    FUZZ_CHECK(harness_.budget().used_bytes() == version->index->memory_bytes() &&
                   info.device_bytes() == version->index->memory_bytes() &&
                   harness_.staging().used_bytes() == 0,
               absl::StrCat(what, ": the budget holds ", harness_.budget().used_bytes(),
                            " bytes and the staging budget ", harness_.staging().used_bytes(),
                            " for a table of ", version->index->memory_bytes()));
    CheckContent(what);
  }

  // Lookups and an inner join of every key the input can name.
  void CheckContent(const std::string& what) {
    std::set<std::optional<KeyTuple>> probe_set(s_.universe.begin(), s_.universe.end());
    probe_set.insert(named_.begin(), named_.end());
    const KeyRowList probe(probe_set.begin(), probe_set.end());
    const auto* model_keys = &model_.keys();
    auto group = [&](const std::optional<KeyTuple>& key) -> const std::vector<ModelRow>* {
      if (!model_.Holdable(key)) return nullptr;
      const auto it = model_keys->find(*key);
      return it == model_keys->end() ? nullptr : &it->second;
    };

    v1::LookupRequest lookup;
    lookup.set_index(kIndex);
    lookup.set_want_match_counts(true);
    if (s_.payload) lookup.add_select(kColumn);
    PutProbeKeys(s_, probe, &lookup);
    v1::LookupResponse l;
    const absl::Status looked = harness_.ops().Lookup(lookup, &l);
    FUZZ_CHECK(looked.ok(), absl::StrCat(what, ": lookup: ", Describe(looked)));
    const size_t n = probe.size();
    FUZZ_CHECK(l.values().size() == 4 * n && l.found().size() == n &&
                   l.match_counts().size() == 4 * n && l.mutation_sequence() == sequence_ &&
                   l.index_version() == version_ && l.columns_size() == (s_.payload ? 1 : 0),
               absl::StrCat(what, ": lookup of ", n, " keys answered ",
                            l.ShortDebugString().substr(0, 300)));
    const std::vector<uint32_t> values = server::UnpackColumn<uint32_t>(l.values());
    const std::vector<uint32_t> matches = server::UnpackColumn<uint32_t>(l.match_counts());
    std::vector<Cell> cells(n);
    if (s_.payload) cells = ReadCells(l.columns(0), kColumn, s_.payload_type, n, what);
    for (size_t i = 0; i < n; ++i) {
      const std::vector<ModelRow>* g = group(probe[i]);
      const uint32_t want_value = g ? g->front().value : engine::kEmptyKey;
      const Cell want_cell = g && s_.payload ? g->front().payload : std::nullopt;
      FUZZ_CHECK(l.found()[i] == (g ? 1 : 0) && values[i] == want_value &&
                     matches[i] == (g ? g->size() : 0) && cells[i] == want_cell,
                 absl::StrCat(what, ": lookup row ", i, " found ", int(l.found()[i]), " value ",
                              values[i], " matches ", matches[i], " payload ",
                              cells[i] ? absl::CEscape(*cells[i]) : "null", "; expected found ",
                              g ? 1 : 0, " value ", want_value, " matches ", g ? g->size() : 0,
                              " payload ", want_cell ? absl::CEscape(*want_cell) : "null"));
    }

    v1::JoinRequest join;
    join.set_index(kIndex);
    if (s_.payload) join.add_select(kColumn);
    v1::LeftBatch* left = join.add_batches();
    PutProbeKeys(s_, probe, left);
    left->set_capacity(uint64_t{1} << 20);
    v1::JoinResponse j;
    const absl::Status joined = harness_.ops().Join(join, &j);
    FUZZ_CHECK(joined.ok() && j.results_size() == 1,
               absl::StrCat(what, ": join: ", Describe(joined)));
    std::vector<uint32_t> want_left, want_right;
    std::vector<Cell> want_cells;
    for (size_t i = 0; i < n; ++i) {
      const std::vector<ModelRow>* g = group(probe[i]);
      if (g == nullptr) continue;
      for (const ModelRow& row : *g) {
        want_left.push_back(static_cast<uint32_t>(i));
        want_right.push_back(row.value);
        want_cells.push_back(s_.payload ? row.payload : std::nullopt);
      }
    }
    const v1::JoinBatchResult& res = j.results(0);
    FUZZ_CHECK(res.count() == want_left.size() && !res.overflow() &&
                   server::UnpackColumn<uint32_t>(res.left_rows()) == want_left &&
                   server::UnpackColumn<uint32_t>(res.right_rows()) == want_right &&
                   j.mutation_sequence() == sequence_,
               absl::StrCat(what, ": join gave ", res.count(), " pairs; expected ",
                            want_left.size(), " (each key's group in order)"));
    if (s_.payload) {
      FUZZ_CHECK(res.columns_size() == 1, what + ": join without its payload column");
      FUZZ_CHECK(ReadCells(res.columns(0), kColumn, s_.payload_type, want_left.size(),
                           what + " (join)") == want_cells,
                 what + ": the join's payload is not each group row's");
    }
  }

  Harness harness_;
  Setup s_;
  MutationModel model_{false, true};
  std::set<std::optional<KeyTuple>> named_;  // every key the input named
  uint64_t version_ = 0;
  uint64_t sequence_ = 0;
  uint64_t rehashes_ = 0;
  uint64_t next_row_id_ = 0;
  uint32_t capacity_ = 0;
};

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin::fuzz;
  const std::vector<std::string_view> frames =
      SplitFrames(AsView(data, size), 1 + mutate_input::kMaxBatches);
  // One fixture per --max-mutation-rows (the setup frame's byte 2 picks).
  static Fixture* fixtures[4] = {};
  const uint8_t choice = frames.empty() || frames[0].size() < 3 ? 0 : uint8_t(frames[0][2]) & 3;
  if (fixtures[choice] == nullptr) fixtures[choice] = new Fixture(mutate_input::MaxRowsOf(choice));
  fixtures[choice]->Run(frames);
  return 0;
}
