#include "mutate_batches.hpp"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz::mutate_input {

std::string Reader::Take(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(Next()));
  return out;
}

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

namespace {

template <typename T>
T WordOf(const std::string& bytes) {
  T v = 0;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

}  // namespace

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

namespace {

// The message of a payload column of `rows` rows in a batch of `upserts`.
std::string RowsError(uint64_t rows, uint64_t upserts) {
  return absl::StrCat("payload: column \"", kColumn, "\" (payload[0] of index \"", kIndex,
                      "\") has ", rows, " rows, but the batch has ", upserts, " upsert keys");
}

// Another payload type than `t`.
v1::ColumnType OtherType(v1::ColumnType t) {
  return t == v1::COLUMN_TYPE_STRING ? v1::COLUMN_TYPE_BINARY : v1::COLUMN_TYPE_STRING;
}

// One malformation of well-formed key columns, chosen by `which`; the model
// (ModelKeyColumns) says what the server must make of it, so some are valid
// (nulls in the last column: null keys).
void BreakKeyColumns(uint8_t which, google::protobuf::RepeatedPtrField<v1::Column>* columns) {
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

}  // namespace

Batch MakeBatch(const Setup& s, uint32_t b, Reader& in, uint64_t next_row_id,
                const MutationModel& model) {
  Batch batch;
  v1::MutateRequest& r = batch.request;
  const uint8_t op = in.Next(), counts = in.Next();
  const uint16_t nulls = static_cast<uint16_t>(in.Next() | in.Next() << 8);
  const uint8_t flags = in.Next();
  const uint8_t param = flags >> 1;
  const Defect defect = static_cast<Defect>((op & 31) < kDefects ? (op & 31) : kNone);
  for (int i = 0; i < (counts & 15); ++i) batch.deletes.push_back(ReadKey(in, s));
  for (int i = 0; i < (counts >> 4); ++i) batch.upserts.push_back(ReadKey(in, s));
  if (defect == kEmpty) {
    batch.deletes.clear();
    batch.upserts.clear();
  }
  if (defect == kPayloadNoUpserts) {
    batch.upserts.clear();
    if (batch.deletes.empty()) batch.deletes.push_back(s.universe[0]);
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
    const bool wrong_field =
        defect == (del ? kDeleteWrongField : kUpsertWrongField) ||
        (!del && !s.words() && (defect == kUpsertKeysBoth || defect == kUpsertKeysRagged)) ||
        (s.words() && defect == (del ? kDeleteKeyColumns : kUpsertKeyColumns));
    if (wrong_field) {
      // The keys in a field of another key kind, present even without rows.
      std::string field;
      const bool columns_field = s.words() && ((param & 1) != 0 || defect == kUpsertKeyColumns ||
                                               defect == kDeleteKeyColumns);
      if (columns_field) {
        v1::Column& c = *columns->Add();
        c.set_type(v1::COLUMN_TYPE_STRING);
        c.set_length(0);
        c.set_offsets(std::string(4, '\0'));
        field = "key_columns";
      } else {
        const bool send_wide = s.words() ? s.kind == kUint32 : (param & 1) != 0;
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
    if (s.words()) {
      const bool is_wide = s.kind == kUint64;
      if (!keys.empty() || (defect == kEmpty && (param & 1) != 0)) {
        put_words(keys, is_wide, as_list || keys.empty());
      }
      const std::string field = prefix + (is_wide ? "keys64" : "keys");
      if (!del && defect == kUpsertKeysBoth) {
        if (keys.empty()) keys.push_back(s.universe[1]);
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
      AppendKeyColumns(s.schema, keys, /*named=*/(b & 1) == 0, columns);
    }
    if (defect == (del ? kDeleteKeyColumns : kUpsertKeyColumns)) {
      if (columns->empty()) AppendKeyColumns(s.schema, {s.universe[0]}, true, columns);
      BreakKeyColumns(param >> 1, columns);
    }
    const KeyColumnsOutcome decoded = ModelKeyColumns(*columns, s.schema, prefix, false);
    if (!decoded.error.empty()) {
      fail(key_error, invalid, decoded.error);
      keys.clear();
    } else {
      keys = decoded.rows;
      if (del) batch.delete_keys = DeleteKeysOf(*columns, s.schema);
    }
  }
  if (s.words()) {
    for (const auto& k : batch.deletes) batch.delete_keys.push_back(DeleteKeyOf(*k));
  }
  const uint64_t upserts = batch.upserts.size();
  const uint64_t rows = upserts + batch.deletes.size();

  // Values.
  std::optional<Expected> values_error;
  std::vector<uint32_t> values;
  for (uint64_t i = 0; i < upserts; ++i) {
    if (s.explicit_values) {
      values.push_back(i == 0 && (flags & 1) != 0 ? 0xffffffffu : (b << 16) + uint32_t(i) + 1);
    } else {
      values.push_back(static_cast<uint32_t>(next_row_id + i));
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
  if (s.explicit_values) {
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
    } else if (upserts > 0 && next_row_id + upserts - 1 > 0xfffffffeu) {
      fail(values_error, absl::StatusCode::kResourceExhausted, "0xfffffffe");
    }
  }

  // Payload.
  std::optional<Expected> payload_error;
  std::vector<Cell> cells;
  for (uint64_t i = 0; i < upserts; ++i) {
    const bool null = i < 16 && ((nulls >> i) & 1) != 0;
    cells.push_back(null ? std::nullopt : CellOf(s.payload_type, b, uint32_t(i)));
  }
  const std::string where = absl::StrCat("payload[0] (column \"", kColumn, "\")");
  if (defect == kPayloadNoUpserts || (upserts == 0 && defect == kPayloadName)) {
    *r.add_payload() = CellColumn(kColumn, s.payload_type, {});
    fail(payload_error, invalid, "payload: 1 columns but the batch has no upsert keys");
  } else if (!s.payload) {
    if (defect == kPayloadName) {
      *r.add_payload() = CellColumn(kColumn, v1::COLUMN_TYPE_INT64, cells);
      fail(payload_error, invalid, "payload[0].name: column \"p\" is not declared");
    }
  } else if (upserts == 0) {
    if (defect == kPayloadType || (defect == kPayloadLength && (param & 1) != 0)) {
      *r.add_payload() =
          CellColumn(kColumn, OtherType(s.payload_type), {CellOf(s.payload_type, b, 0)});
      fail(payload_error, invalid, "payload: 1 columns but the batch has no upsert keys");
    }
  } else {
    v1::Column column = CellColumn(kColumn, s.payload_type, cells);
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
        column.set_type(OtherType(s.payload_type));
        *r.add_payload() = column;
        fail(payload_error, invalid, where + ".type");
        break;
      case kPayloadLength: {
        std::vector<Cell> other = cells;
        if ((param & 1) != 0) {
          other.push_back(CellOf(s.payload_type, b, 99));
          fail(payload_error, invalid,
               absl::StrCat(where, ".length: ", other.size(), " rows after 0 would exceed ",
                            upserts, " rows, one per upsert key of the batch"));
        } else {
          other.pop_back();
          fail(payload_error, invalid, RowsError(other.size(), upserts));
        }
        *r.add_payload() = CellColumn(kColumn, s.payload_type, other);
        break;
      }
      case kPayloadBuffers:
        if ((param & 1) != 0) {
          column.set_validity(std::string((upserts + 7) / 8 + 1, '\xff'));
        } else if (!column.offsets().empty()) {
          column.mutable_offsets()->resize(column.offsets().size() - 4);
        } else if (s.payload_type == v1::COLUMN_TYPE_BOOL) {
          column.mutable_data()->push_back('\0');
        } else {
          column.mutable_data()->pop_back();
        }
        *r.add_payload() = column;
        fail(payload_error, invalid, where);
        break;
      case kPayloadSplit: {
        const size_t half = cells.size() / 2;
        *r.add_payload() = CellColumn(kColumn, s.payload_type,
                                      std::vector<Cell>(cells.begin(), cells.begin() + half));
        *r.add_payload() = CellColumn(kColumn, s.payload_type,
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
    if (!model.Holdable(batch.upserts[i])) {
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
  } else if (rows > s.max_rows) {
    batch.expected = {absl::StatusCode::kResourceExhausted,
                      absl::StrCat("--max-mutation-rows=", s.max_rows)};
  } else if (values_error) {
    batch.expected = *values_error;
  } else if (payload_error) {
    batch.expected = *payload_error;
  } else if (invalid_key) {
    batch.expected = *invalid_key;
  }
  return batch;
}

}  // namespace gpujoin::fuzz::mutate_input
