// fuzz_make_corpus: the seeds of fuzz_build_session.

#include <cstdint>
#include <string>
#include <vector>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {
namespace {

std::string Spec(const std::string& name, uint64_t capacity, bool replace = false) {
  v1::BuildIndexRequest r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_capacity(capacity);
  r.mutable_spec()->set_replace(replace);
  return r.SerializeAsString();
}

std::string Chunk(const std::vector<uint32_t>& keys, const std::vector<uint32_t>& values = {},
                  uint64_t row_base = 0, const std::vector<uint32_t>& validity = {}) {
  v1::BuildIndexRequest r;
  SetKeys(r.mutable_chunk()->mutable_keys(), keys);
  if (!values.empty()) SetKeys(r.mutable_chunk()->mutable_values(), values);
  r.mutable_chunk()->set_row_base(row_base);
  if (!validity.empty()) SetKeys(r.mutable_chunk()->mutable_validity(), validity);
  return r.SerializeAsString();
}

}  // namespace

void BuildTarget(Writer& w) {
  const std::string t = "fuzz_build_session";
  w.Put(t, "two_chunks", Frames({Spec("a", 16), Chunk({1, 2, 3, 2}), Chunk({9, 0xffffffffu, 1})}));
  w.Put(t, "auto_sized", Frames({Spec("a", 0), Chunk({5, 6, 7, 8, 9, 10, 11})}));
  // A self-sized table's probe bound against its final capacity (16 for 7 rows),
  // not the 2 slots of the first chunk's row; then one above it.
  v1::BuildIndexRequest auto_bound;
  auto_bound.mutable_spec()->set_name("a");
  auto_bound.mutable_spec()->set_max_probe_count(4);
  w.Put(t, "auto_sized_probe_bound",
        Frames({auto_bound.SerializeAsString(), Chunk({5}), Chunk({6, 7, 8}), Chunk({9, 10, 11})}));
  auto_bound.mutable_spec()->set_max_probe_count(17);
  w.Put(t, "auto_sized_probe_bound_above_capacity",
        Frames({auto_bound.SerializeAsString(), Chunk({5}), Chunk({6, 7, 8}), Chunk({9, 10, 11})}));
  v1::BuildIndexRequest expected;
  expected.mutable_spec()->set_name("e");
  expected.mutable_spec()->set_expected_rows(20);
  expected.mutable_spec()->set_target_load_factor(0.9);
  expected.mutable_spec()->set_first_value(1000);
  w.Put(t, "expected_rows", Frames({expected.SerializeAsString(), Chunk({1, 2, 3})}));
  v1::BuildIndexRequest explicit_spec;
  explicit_spec.mutable_spec()->set_name("v");
  explicit_spec.mutable_spec()->set_explicit_values(true);
  w.Put(t, "explicit_values",
        Frames(
            {explicit_spec.SerializeAsString(), Chunk({4, 5, 4}, {40, 50, 41}), Chunk({6}, {60})}));
  v1::BuildIndexRequest batch_spec;
  batch_spec.mutable_spec()->set_name("b");
  batch_spec.mutable_spec()->set_batch_mode(true);
  batch_spec.mutable_spec()->set_capacity(32);
  w.Put(t, "batch_mode",
        Frames({batch_spec.SerializeAsString(), Chunk({1, 2, 3}, {}, 100, {1, 0, 1}),
                Chunk({2, 4}, {}, 7)}));
  w.Put(t, "replace_old", Frames({Spec("old", 8, true), Chunk({1, 7})}));
  w.Put(t, "old_without_replace", Frames({Spec("old", 8), Chunk({1})}));
  v1::BuildIndexRequest bound;
  bound.mutable_spec()->set_name("o");
  bound.mutable_spec()->set_capacity(4);
  bound.mutable_spec()->set_max_probe_count(1);
  w.Put(t, "overflow", Frames({bound.SerializeAsString(), Chunk({1, 2, 3, 4, 5, 6, 7, 8})}));
  v1::BuildIndexRequest high;
  high.mutable_spec()->set_name("h");
  high.mutable_spec()->set_first_value(0xfffffffcu);
  w.Put(t, "first_value_near_max", Frames({high.SerializeAsString(), Chunk({1, 2, 3, 4})}));
  w.Put(t, "chunk_before_spec", Frames({Chunk({1}), Spec("a", 8)}));
  w.Put(t, "spec_twice", Frames({Spec("a", 8), Spec("a", 8)}));
  w.Put(t, "capacity_not_power_of_two", Frames({Spec("a", 12), Chunk({1})}));
  w.Put(t, "capacity_over_budget", Frames({Spec("a", 1 << 14), Chunk({1})}));
  std::vector<uint32_t> many(800);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<uint32_t>(i * 7);
  w.Put(t, "over_staging_limit", Frames({Spec("a", 0), Chunk(many)}));
  w.Put(t, "over_staging_limit_odd", Frames({Spec("a", 0), Chunk(many)}) + "\x00");
  w.Put(t, "table_fills_budget", Frames({Spec("a", 8192), Chunk({1})}));
  w.Put(t, "values_without_explicit", Frames({Spec("a", 8), Chunk({1}, {2})}));
  v1::BuildIndexRequest keep_all;
  keep_all.mutable_spec()->set_name("k");
  keep_all.mutable_spec()->set_capacity(16);
  keep_all.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  w.Put(t, "keep_all",
        Frames({keep_all.SerializeAsString(), Chunk({1, 2, 1, 0xffffffffu}), Chunk({2, 1, 5})}));
  v1::BuildIndexRequest keep_all_auto = keep_all;
  keep_all_auto.mutable_spec()->set_capacity(0);
  keep_all_auto.mutable_spec()->set_expected_rows(40);
  w.Put(t, "keep_all_expected_rows",
        Frames({keep_all_auto.SerializeAsString(), Chunk({7, 7, 7, 7, 8})}));
  v1::BuildIndexRequest no_policy = keep_all;
  no_policy.mutable_spec()->set_duplicates(static_cast<v1::DuplicatePolicy>(3));
  w.Put(t, "duplicate_policy_that_is_none", Frames({no_policy.SerializeAsString(), Chunk({1})}));
  v1::BuildIndexRequest wide_spec;
  wide_spec.mutable_spec()->set_name("w");
  wide_spec.mutable_spec()->set_key_type(v1::KEY_TYPE_UINT64);
  v1::BuildIndexRequest wide_chunk;
  SetKeys64(wide_chunk.mutable_chunk()->mutable_keys64(),
            {1, uint64_t{1} << 32 | 1, 0xffffffffu, ~uint64_t{0}, 1});
  v1::BuildIndexRequest wide_chunk2;
  SetKeys64(wide_chunk2.mutable_chunk()->mutable_keys64(), {5, 6}, true);
  w.Put(t, "uint64_keys",
        Frames({wide_spec.SerializeAsString(), wide_chunk.SerializeAsString(),
                wide_chunk2.SerializeAsString()}));
  v1::BuildIndexRequest wide_batch = wide_spec;
  wide_batch.mutable_spec()->set_batch_mode(true);
  wide_batch.mutable_spec()->set_replace(true);
  wide_batch.mutable_spec()->set_name("old");
  v1::BuildIndexRequest wide_batch_chunk = wide_chunk;
  wide_batch_chunk.mutable_chunk()->set_row_base(40);
  SetKeys(wide_batch_chunk.mutable_chunk()->mutable_validity(), {1, 1, 0, 1, 1});
  w.Put(t, "uint64_batch_replacing_old",
        Frames({wide_batch.SerializeAsString(), wide_batch_chunk.SerializeAsString()}));
  // Payload columns: an int64, a string and a bool column in chunks
  // of their own boundaries (one payload-only), and the same with a column short.
  v1::BuildIndexRequest payload_spec;
  payload_spec.mutable_spec()->set_name("p");
  payload_spec.mutable_spec()->set_capacity(16);
  for (const auto& [name, type] :
       std::vector<std::pair<std::string, v1::ColumnType>>{{"n", v1::COLUMN_TYPE_INT64},
                                                           {"s", v1::COLUMN_TYPE_STRING},
                                                           {"b", v1::COLUMN_TYPE_BOOL}}) {
    auto* p = payload_spec.mutable_spec()->add_payload();
    p->set_name(name);
    p->set_type(type);
  }
  auto payload_column = [](const std::string& name, v1::ColumnType type, uint64_t rows) {
    v1::Column c;
    c.set_name(name);
    c.set_type(type);
    c.set_length(rows);
    if (type == v1::COLUMN_TYPE_INT64) c.set_data(std::string(rows * 8, '\x07'));
    if (type == v1::COLUMN_TYPE_BOOL) c.set_data(std::string((rows + 7) / 8, '\x05'));
    if (type == v1::COLUMN_TYPE_STRING) {
      std::string offsets;
      for (uint32_t i = 0; i <= rows; ++i) offsets.append(reinterpret_cast<const char*>(&i), 4);
      c.set_offsets(offsets);
      c.set_data(std::string(rows, 'a'));
    }
    c.set_validity(std::string((rows + 7) / 8, '\x06'));
    return c;
  };
  v1::BuildIndexRequest payload_chunk;
  SetKeys(payload_chunk.mutable_chunk()->mutable_keys(), {1, 2, 3, 2});
  *payload_chunk.mutable_chunk()->add_payload() = payload_column("n", v1::COLUMN_TYPE_INT64, 5);
  *payload_chunk.mutable_chunk()->add_payload() = payload_column("s", v1::COLUMN_TYPE_STRING, 3);
  v1::BuildIndexRequest payload_rest;
  SetKeys(payload_rest.mutable_chunk()->mutable_keys(), {9});
  *payload_rest.mutable_chunk()->add_payload() = payload_column("s", v1::COLUMN_TYPE_STRING, 2);
  v1::BuildIndexRequest payload_only;
  *payload_only.mutable_chunk()->add_payload() = payload_column("b", v1::COLUMN_TYPE_BOOL, 5);
  w.Put(t, "payload",
        Frames({payload_spec.SerializeAsString(), payload_chunk.SerializeAsString(),
                payload_rest.SerializeAsString(), payload_only.SerializeAsString()}));
  w.Put(t, "payload_column_short",
        Frames({payload_spec.SerializeAsString(), payload_chunk.SerializeAsString(),
                payload_only.SerializeAsString()}));
  w.Put(t, "uint64_spec_uint32_keys", Frames({wide_spec.SerializeAsString(), Chunk({1})}));
  w.Put(t, "uint32_spec_uint64_keys", Frames({Spec("a", 8), wide_chunk.SerializeAsString()}));
  v1::BuildIndexRequest bad_type = wide_spec;
  bad_type.mutable_spec()->set_key_type(static_cast<v1::KeyType>(7));
  w.Put(t, "key_type_7", Frames({bad_type.SerializeAsString(), wide_chunk.SerializeAsString()}));
  // Key schemas: the query fixture's key-schema indexes built in two chunks,
  // each variant of their key columns as one chunk, and batch mode, explicit
  // values, payload and a replacement of "old" with key columns.
  for (const FixtureKeyIndex& k : QueryFixtureKeyIndexes()) {
    v1::BuildIndexRequest spec;
    v1::IndexSpec& sp = *spec.mutable_spec();
    sp.set_name(k.name);
    sp.set_key_type(v1::KEY_TYPE_COLUMNS);
    for (size_t i = 0; i < k.schema.size(); ++i) {
      v1::KeyColumnSpec& c = *sp.add_key_columns();
      c.set_name(k.schema.names[i]);
      c.set_type(k.schema.types[i]);
    }
    if (k.keep_all) sp.set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
    auto chunk = [&](const KeyRowList& rows) {
      v1::BuildIndexRequest r;
      AppendKeyColumns(k.schema, rows, true, r.mutable_chunk()->mutable_key_columns());
      return r;
    };
    const size_t half = k.rows.size() / 2;
    const KeyRowList first(k.rows.begin(), k.rows.begin() + half);
    const KeyRowList second(k.rows.begin() + half, k.rows.end());
    w.Put(t, "columns_" + k.name,
          Frames({spec.SerializeAsString(), chunk(first).SerializeAsString(),
                  chunk(second).SerializeAsString()}));
    for (auto& [name, columns] : KeyColumnVariants(k)) {
      v1::BuildIndexRequest c;
      *c.mutable_chunk()->mutable_key_columns() = columns;
      w.Put(t, "columns_" + k.name + "_" + name,
            Frames({spec.SerializeAsString(), c.SerializeAsString()}));
    }
    v1::BuildIndexRequest batch = spec;
    batch.mutable_spec()->set_batch_mode(true);
    v1::BuildIndexRequest b1 = chunk(first), b2 = chunk(second);
    b1.mutable_chunk()->set_row_base(50);
    std::vector<uint32_t> mask(second.size(), 1);
    mask[0] = 0;
    SetKeys(b2.mutable_chunk()->mutable_validity(), mask);
    w.Put(t, "columns_batch_" + k.name,
          Frames({batch.SerializeAsString(), b1.SerializeAsString(), b2.SerializeAsString()}));
    v1::BuildIndexRequest explicit_values = spec;
    explicit_values.mutable_spec()->set_explicit_values(true);
    explicit_values.mutable_spec()->set_name("old");
    explicit_values.mutable_spec()->set_replace(true);
    v1::BuildIndexRequest valued = chunk(first);
    std::vector<uint32_t> values;
    for (size_t r = 0; r < first.size(); ++r) values.push_back(static_cast<uint32_t>(7 * r + 1));
    SetKeys(valued.mutable_chunk()->mutable_values(), values);
    w.Put(t, "columns_explicit_replacing_old_" + k.name,
          Frames({explicit_values.SerializeAsString(), valued.SerializeAsString()}));
    // A batch build of no rows: its key columns are stored all the same.
    w.Put(t, "columns_batch_no_chunks_" + k.name, Frames({batch.SerializeAsString()}));
    // A null in the last key column alone: the other columns carry no validity.
    v1::BuildIndexRequest one_null = chunk(first);
    for (int c = 0; c + 1 < one_null.chunk().key_columns_size(); ++c) {
      one_null.mutable_chunk()->mutable_key_columns(c)->clear_validity();
    }
    w.Put(t, "columns_null_in_one_column_" + k.name,
          Frames({spec.SerializeAsString(), one_null.SerializeAsString()}));
  }
  {
    const FixtureKeyIndex k = QueryFixtureKeyIndexes()[0];
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name("p");
    spec.mutable_spec()->set_key_type(v1::KEY_TYPE_COLUMNS);
    v1::KeyColumnSpec* key = spec.mutable_spec()->add_key_columns();
    key->set_name("sku");
    key->set_type(v1::COLUMN_TYPE_STRING);
    v1::PayloadColumnSpec* p = spec.mutable_spec()->add_payload();
    p->set_name("n");
    p->set_type(v1::COLUMN_TYPE_UINT32);
    v1::BuildIndexRequest c;
    AppendKeyColumns(k.schema, {KeyTuple{"a"}, KeyTuple{"b"}, KeyTuple{"a"}}, false,
                     c.mutable_chunk()->mutable_key_columns());
    v1::Column* n = c.mutable_chunk()->add_payload();
    n->set_name("n");
    n->set_type(v1::COLUMN_TYPE_UINT32);
    n->set_length(3);
    n->set_data(Packed({1, 2, 3}));
    w.Put(t, "columns_payload", Frames({spec.SerializeAsString(), c.SerializeAsString()}));
    // Spec errors: no key column, nine, a name twice, a type that is no key's,
    // key columns for a uint32 key type.
    v1::BuildIndexRequest none = spec;
    none.mutable_spec()->clear_key_columns();
    w.Put(t, "columns_spec_none", Frames({none.SerializeAsString(), c.SerializeAsString()}));
    v1::BuildIndexRequest nine = spec;
    for (int i = 0; i < 8; ++i) {
      v1::KeyColumnSpec* more = nine.mutable_spec()->add_key_columns();
      more->set_name("k" + std::to_string(i));
      more->set_type(v1::COLUMN_TYPE_INT32);
    }
    w.Put(t, "columns_spec_nine", Frames({nine.SerializeAsString()}));
    v1::BuildIndexRequest twice = spec;
    *twice.mutable_spec()->add_key_columns() = *key;
    w.Put(t, "columns_spec_name_twice", Frames({twice.SerializeAsString()}));
    v1::BuildIndexRequest float_key = spec;
    float_key.mutable_spec()->mutable_key_columns(0)->set_type(v1::COLUMN_TYPE_FLOAT64);
    w.Put(t, "columns_spec_float", Frames({float_key.SerializeAsString()}));
    v1::BuildIndexRequest word = spec;
    word.mutable_spec()->set_key_type(v1::KEY_TYPE_UINT32);
    w.Put(t, "columns_spec_for_uint32", Frames({word.SerializeAsString(), Chunk({1})}));
    w.Put(t, "columns_uint32_keys", Frames({spec.SerializeAsString(), Chunk({1, 2})}));
  }
}

}  // namespace gpujoin::fuzz::corpus
