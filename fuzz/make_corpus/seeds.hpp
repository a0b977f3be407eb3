// fuzz_make_corpus: the seed corpus of every fuzz target, one file per
// target's seed set (make_corpus/<target>.cpp); this header holds the writer
// and the request builders several seed sets share.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_support.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz::corpus {

namespace fs = std::filesystem;

/// Writes seed files DIR/<target>/<name> and counts them.
class Writer {
 public:
  explicit Writer(fs::path root) : root_(std::move(root)) {}

  void Put(const std::string& target, const std::string& name, const std::string& bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FUZZ_CHECK(out.good(), "cannot write " + (dir / name).string());
    ++count_;
  }
  int count() const { return count_; }

 private:
  fs::path root_;
  int count_ = 0;
};

/// The little-endian packed bytes of a uint32 or float column.
inline std::string Packed(const std::vector<uint32_t>& v) { return server::PackColumn<uint32_t>(v); }

inline std::string PackedF(const std::vector<float>& v) { return server::PackColumn<float>(v); }

/// Sets `c` to `keys`, packed or (as_values) as repeated values.
inline void SetKeys64(v1::U64Column* c, const std::vector<uint64_t>& keys, bool as_values = false) {
  if (as_values) {
    for (uint64_t k : keys) c->mutable_values()->add_v(k);
  } else {
    *c->mutable_packed() = server::PackColumn<uint64_t>(keys);
  }
}

inline void SetKeys(v1::U32Column* c, const std::vector<uint32_t>& keys, bool as_values = false) {
  if (as_values) {
    auto* list = c->mutable_values();
    for (uint32_t k : keys) list->add_v(k);
  } else {
    *c->mutable_packed() = Packed(keys);
  }
}

/// A lookup request of uint32 keys, batch 17.
inline v1::LookupRequest Lookup(const std::string& index, const std::vector<uint32_t>& keys,
                         bool probes = false, uint64_t max_probes = 0) {
  v1::LookupRequest r;
  r.set_index(index);
  SetKeys(r.mutable_keys(), keys);
  r.set_want_probes(probes);
  r.set_max_probe_count(max_probes);
  r.set_batch_id(17);
  return r;
}

/// `messages` framed as the stream targets read them (AppendFrame each).
inline std::string Frames(const std::vector<std::string>& messages) {
  std::string out;
  for (const std::string& m : messages) AppendFrame(m, &out);
  return out;
}

/// Key columns for key-schema index `k` of the query fixture
/// (QueryFixtureKeyIndexes), by seed name: its rows, keys it lacks beside them
/// and nulls, and one of each documented error (count, name, type, length,
/// data, offsets, UTF-8, validity), so that the targets start at every check.
inline std::vector<std::pair<std::string, google::protobuf::RepeatedPtrField<v1::Column>>>
KeyColumnVariants(const FixtureKeyIndex& k) {
  using Columns = google::protobuf::RepeatedPtrField<v1::Column>;
  std::vector<std::pair<std::string, Columns>> out;
  auto make = [&](const KeyRowList& rows, bool named = true) {
    Columns c;
    AppendKeyColumns(k.schema, rows, named, &c);
    return c;
  };
  auto put = [&](const std::string& name, Columns c) { out.emplace_back(name, std::move(c)); };
  put("all_keys", make(k.rows));
  put("all_keys_unnamed", make(k.rows, false));
  // Keys beside the fixture's: each row with its first column changed, and nulls.
  KeyRowList beside;
  for (const auto& row : k.rows) {
    if (!row) continue;
    KeyTuple key = *row;
    key[0].push_back('\x01');
    if (key[0].size() > 1 && k.schema.types[0] != v1::COLUMN_TYPE_STRING &&
        k.schema.types[0] != v1::COLUMN_TYPE_BINARY) {
      key[0].pop_back();
      key[0][0] = static_cast<char>(key[0][0] + 1);
    }
    beside.push_back(std::move(key));
    beside.push_back(std::nullopt);
    beside.push_back(row);
  }
  put("missing_and_nulls", make(beside));
  put("zero_rows", make({}));
  const KeyRowList some(k.rows.begin(), k.rows.begin() + 4);
  Columns fewer = make(some);
  fewer.RemoveLast();
  put("one_column_less", std::move(fewer));
  Columns more = make(some);
  *more.Add() = more.Get(0);
  put("one_column_more", std::move(more));
  Columns renamed = make(some);
  renamed.Mutable(0)->set_name("other");
  put("another_name", std::move(renamed));
  Columns retyped = make(some);
  retyped.Mutable(0)->set_type(k.schema.types[0] == v1::COLUMN_TYPE_STRING
                                   ? v1::COLUMN_TYPE_BINARY
                                   : v1::COLUMN_TYPE_STRING);
  put("another_type", std::move(retyped));
  Columns bad_validity = make(some);
  bad_validity.Mutable(0)->set_validity(std::string(2, '\xff'));
  put("validity_of_two_bytes", std::move(bad_validity));
  Columns nulls = make(some);
  nulls.Mutable(static_cast<int>(k.schema.size()) - 1)->set_validity(std::string(1, '\x05'));
  put("validity_with_nulls", std::move(nulls));
  if (k.schema.size() > 1) {
    Columns longer = make(some);
    longer.Mutable(1)->set_length(5);
    put("length_differs", std::move(longer));
  }
  for (size_t i = 0; i < k.schema.size(); ++i) {
    const v1::ColumnType type = k.schema.types[i];
    const int c = static_cast<int>(i);
    if (type != v1::COLUMN_TYPE_STRING && type != v1::COLUMN_TYPE_BINARY) {
      Columns short_data = make(some);
      short_data.Mutable(c)->mutable_data()->pop_back();
      put("data_short_" + k.schema.names[i], std::move(short_data));
      Columns with_offsets = make(some);
      with_offsets.Mutable(c)->set_offsets(std::string(20, '\0'));
      put("offsets_on_fixed_" + k.schema.names[i], std::move(with_offsets));
      continue;
    }
    auto offsets = [&](std::initializer_list<int32_t> o, std::string data) {
      Columns cols = make(some);
      std::string bytes;
      for (int32_t v : o) bytes.append(reinterpret_cast<const char*>(&v), 4);
      cols.Mutable(c)->set_offsets(bytes);
      cols.Mutable(c)->set_data(std::move(data));
      return cols;
    };
    const std::string n = k.schema.names[i];
    put("offsets_ok_" + n, offsets({0, 1, 1, 3, 4}, "abcd"));
    put("offsets_too_few_" + n, offsets({0, 1, 2, 3}, "abcd"));
    put("offsets_negative_" + n, offsets({-1, 1, 2, 3, 4}, "abcd"));
    put("offsets_decreasing_" + n, offsets({0, 3, 2, 3, 4}, "abcd"));
    put("offsets_beyond_data_" + n, offsets({0, 1, 2, 3, 9}, "abcd"));
    put("offsets_unaligned_" + n, [&] {
      Columns cols = offsets({0, 1, 2, 3, 4}, "abcd");
      cols.Mutable(c)->mutable_offsets()->push_back('\0');
      return cols;
    }());
    // Row 1 holds the first byte of a two-byte sequence, row 2 the second.
    put("utf8_split_" + n, offsets({0, 1, 2, 3, 4},
                                   "a\xc3\xa9"
                                   "b"));
    put("utf8_overlong_" + n, offsets({0, 1, 3, 3, 4},
                                      "a\xc0\xaf"
                                      "b"));
    put("utf8_surrogate_" + n, offsets({0, 3, 3, 3, 4},
                                       "\xed\xa0\x80"
                                       "b"));
    // A length whose + 1 wraps, without offsets.
    Columns huge = make(some);
    for (v1::Column& col : huge) col.set_length(UINT64_MAX);
    huge.Mutable(c)->clear_offsets();
    put("largest_length_" + n, std::move(huge));
  }
  return out;
}

// The seed sets, one per target.
void ColumnCodec(Writer& w);
void LookupWire(Writer& w);
void LookupTarget(Writer& w);
void JoinTarget(Writer& w);
void AggregateTarget(Writer& w);
void HashTarget(Writer& w);
void BuildTarget(Writer& w);
void GraphTarget(Writer& w);
void DataFilesTarget(Writer& w);
void MutateTarget(Writer& w);
void QueryTarget(Writer& w);
void RouterRowsTarget(Writer& w);

}  // namespace gpujoin::fuzz::corpus
