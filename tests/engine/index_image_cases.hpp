// Shared by the index image tests (tests/engine/index_image_test.cpp on the CPU
// backends, tests/gpu/index_image_differential_test.cpp CUDA vs CPU): random
// builds of every index kind (key word or a (string, int64) key schema,
// duplicate policy, payload of every column type with nulls, overflow) and the
// answers of lookups on them, every output poisoned first, so that two indexes
// can be compared answer by answer.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::engine::testing {

/// One random build.
struct ImageCase {
  KeyType key_type = KeyType::kUint32;
  DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow;
  uint32_t capacity = 1024;
  uint32_t max_probe_count = 0;
  uint64_t rows = 400;
  /// Distinct keys drawn from: small = many duplicates.
  uint64_t key_range = 300;
  bool payload = true;
  uint64_t seed = 1;
};

inline std::string CaseName(const ImageCase& c) {
  return std::string(KeyTypeName(c.key_type)) + "_" +
         std::string(DuplicatePolicyName(c.duplicates)) + "_cap" + std::to_string(c.capacity) +
         "_rows" + std::to_string(c.rows) +
         (c.max_probe_count ? "_bound" + std::to_string(c.max_probe_count) : "") +
         (c.payload ? "_payload" : "");
}

/// The source rows of a case (the payload columns borrow these vectors).
struct ImageSource {
  std::vector<uint32_t> keys32;
  std::vector<uint64_t> keys64;
  std::vector<uint32_t> values;
  // KeyType::kColumns: a (string, int64) key, the string nullable (a null key
  // is an invalid row) and sometimes empty.
  std::string key_bytes;
  std::vector<int32_t> key_offsets;
  std::vector<uint8_t> key_valid;
  std::vector<int64_t> key_i64;
  // Payload: int64 nullable, string nullable, bool, float64, uint32.
  std::vector<int64_t> i64;
  std::vector<uint8_t> i64_valid;
  std::string str_bytes;
  std::vector<uint64_t> str_offsets;
  std::vector<uint8_t> str_valid;
  std::vector<uint8_t> bools;
  std::vector<double> f64;
  std::vector<uint32_t> u32;
  std::vector<ColumnView> payload;
};

inline uint64_t KeyOf(const ImageCase& c, uint64_t draw) {
  // uint64 keys differ above bit 31 too, and avoid the reserved word.
  return c.key_type == KeyType::kUint64 ? (draw * 0x9e3779b97f4a7c15ull) | 1 : draw * 2654435761u + 7;
}

inline ImageSource MakeSource(const ImageCase& c) {
  std::mt19937_64 rng(c.seed);
  ImageSource s;
  if (c.key_type == KeyType::kColumns) {
    s.key_offsets.push_back(0);
    s.key_valid.assign(BitmapBytes(c.rows), 0);
  }
  for (uint64_t r = 0; r < c.rows; ++r) {
    uint64_t key = KeyOf(c, rng() % c.key_range);
    if (rng() % 97 == 0) key = ~uint64_t{0};  // reserved: an invalid row
    if (c.key_type == KeyType::kColumns) {
      const uint64_t draw = key % 65536;
      if (draw % 5 != 0) s.key_bytes += "k" + std::to_string(draw);  // else the empty string
      s.key_offsets.push_back(int32_t(s.key_bytes.size()));
      if (key != ~uint64_t{0}) s.key_valid[r / 8] |= uint8_t(1u << (r % 8));
      s.key_i64.push_back(int64_t(draw % 3) - 1);
    } else if (c.key_type == KeyType::kUint64) {
      s.keys64.push_back(key);
    } else {
      s.keys32.push_back(uint32_t(key));
    }
    s.values.push_back(uint32_t(rng() % 0xfffffff0u));
  }
  if (!c.payload) return s;
  const uint64_t n = c.rows;
  s.i64.resize(n);
  s.i64_valid.assign(BitmapBytes(n), 0);
  s.str_offsets.push_back(0);
  s.str_valid.assign(BitmapBytes(n), 0);
  s.bools.assign(BitmapBytes(n), 0);
  s.f64.resize(n);
  s.u32.resize(n);
  for (uint64_t r = 0; r < n; ++r) {
    s.i64[r] = int64_t(rng());
    if (rng() % 5 != 0) s.i64_valid[r / 8] |= uint8_t(1u << (r % 8));
    const size_t len = rng() % 3 == 0 ? 0 : rng() % 12;
    for (size_t i = 0; i < len; ++i) s.str_bytes.push_back(char('a' + rng() % 26));
    s.str_offsets.push_back(s.str_bytes.size());
    if (rng() % 4 != 0) s.str_valid[r / 8] |= uint8_t(1u << (r % 8));
    if (rng() % 2) s.bools[r / 8] |= uint8_t(1u << (r % 8));
    s.f64[r] = double(rng() % 100000) / 7.0;
    s.u32[r] = uint32_t(rng());
  }
  auto bytes = [](const auto& v) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()),
                                      v.size() * sizeof(v[0]));
  };
  s.payload.push_back(ColumnView{ColumnType::kInt64, n, bytes(s.i64), {}, s.i64_valid});
  s.payload.push_back(
      ColumnView{ColumnType::kString, n, bytes(s.str_bytes), s.str_offsets, s.str_valid});
  s.payload.push_back(ColumnView{ColumnType::kBool, n, bytes(s.bools), {}, {}});
  s.payload.push_back(ColumnView{ColumnType::kFloat64, n, bytes(s.f64), {}, {}});
  s.payload.push_back(ColumnView{ColumnType::kUint32, n, bytes(s.u32), {}, {}});
  return s;
}

/// Builds the case on `backend` (ASSERTs OK; in two chunks, explicit values).
inline std::unique_ptr<HashIndex> BuildCase(Backend& backend, const ImageCase& c,
                                            const ImageSource& s) {
  HashIndexSpec spec;
  spec.capacity = c.capacity;
  spec.max_probe_count = c.max_probe_count;
  spec.key_type = c.key_type;
  spec.duplicates = c.duplicates;
  if (c.key_type == KeyType::kColumns) spec.key_columns = {ColumnType::kString, ColumnType::kInt64};
  auto index = backend.CreateIndex(spec);
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return nullptr;
  CommandGraph graph;
  const size_t half = s.values.size() / 2;
  std::span<const uint32_t> values(s.values);
  ChunkedU32 value_chunks{values.subspan(0, half), values.subspan(half)};
  if (c.key_type == KeyType::kColumns) {
    KeyColumns keys;
    HashColumn str;
    str.type = ColumnType::kString;
    str.data = std::span(reinterpret_cast<const uint8_t*>(s.key_bytes.data()), s.key_bytes.size());
    str.offsets = s.key_offsets;
    str.validity = s.key_valid;
    str.length = c.rows;
    HashColumn i64;
    i64.type = ColumnType::kInt64;
    i64.data = std::span(reinterpret_cast<const uint8_t*>(s.key_i64.data()), s.key_i64.size() * 8);
    i64.length = c.rows;
    keys.columns = {str, i64};
    graph.Add(BuildIndexNodeColumns{index->get(), keys, value_chunks, 0, nullptr, s.payload});
  } else if (c.key_type == KeyType::kUint64) {
    std::span<const uint64_t> keys(s.keys64);
    graph.Add(BuildIndexNodeT<uint64_t>{index->get(),
                                        {keys.subspan(0, half), keys.subspan(half)},
                                        value_chunks,
                                        0,
                                        nullptr,
                                        s.payload});
  } else {
    std::span<const uint32_t> keys(s.keys32);
    graph.Add(BuildIndexNodeT<uint32_t>{index->get(),
                                        {keys.subspan(0, half), keys.subspan(half)},
                                        value_chunks,
                                        0,
                                        nullptr,
                                        s.payload});
  }
  const absl::Status st = backend.Run(graph);
  EXPECT_TRUE(st.ok()) << st;
  return std::move(*index);
}

/// Everything a lookup answers, gathered columns included.
struct LookupAnswers {
  std::vector<uint32_t> values, probes, match_counts;
  std::vector<uint8_t> found;
  QueryStatistics statistics;
  std::vector<std::vector<std::byte>> data;
  std::vector<std::vector<uint8_t>> validity;
  std::vector<std::vector<uint32_t>> offsets;
  std::vector<std::string> strings;
  std::vector<uint64_t> nulls;

  bool operator==(const LookupAnswers&) const = default;
};

/// Query keys for a case: every build key class (present, missing, reserved).
inline std::vector<uint64_t> QueryKeys(const ImageCase& c, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys;
  for (size_t i = 0; i < n; ++i) {
    keys.push_back(i % 31 == 0 ? ~uint64_t{0} : KeyOf(c, rng() % (c.key_range * 2)));
  }
  return keys;
}

/// Looks `keys` up on `index` gathering every payload column, outputs poisoned.
inline LookupAnswers Lookup(Backend& backend, const HashIndex& index,
                            const std::vector<uint64_t>& keys) {
  const size_t n = keys.size();
  LookupAnswers a;
  a.values.assign(n, 0xa5a5a5a5u);
  a.probes.assign(n, 0xa5a5a5a5u);
  a.match_counts.assign(n, 0xa5a5a5a5u);
  a.found.assign(n, 0xa5);
  const auto& payload = index.payload();
  a.data.resize(payload.size());
  a.validity.resize(payload.size());
  a.offsets.resize(payload.size());
  a.strings.resize(payload.size(), "poison");
  a.nulls.assign(payload.size(), 0xa5a5);
  std::vector<GatherOutput> gather;
  for (size_t c = 0; c < payload.size(); ++c) {
    GatherOutput g;
    g.column = uint32_t(c);
    a.validity[c].assign(BitmapBytes(n), 0xa5);
    g.validity = a.validity[c];
    if (IsVariableWidth(payload[c].type)) {
      a.offsets[c].assign(n + 1, 0xa5a5a5a5u);
      g.offsets = a.offsets[c];
      g.string_bytes = &a.strings[c];
    } else {
      const size_t bytes =
          payload[c].type == ColumnType::kBool ? BitmapBytes(n) : n * ColumnWidth(payload[c].type);
      a.data[c].assign(bytes, std::byte{0xa5});
      g.data = a.data[c];
    }
    g.null_count = &a.nulls[c];
    gather.push_back(g);
  }
  CommandGraph graph;
  std::vector<uint32_t> k32;
  std::vector<uint64_t> k64;
  if (index.key_type() == KeyType::kUint64) {
    k64 = keys;
    LookupNodeT<uint64_t> node;
    node.index = &index;
    node.keys = {std::span<const uint64_t>(k64)};
    node.values = a.values;
    node.found = a.found;
    node.probes = a.probes;
    node.match_counts = a.match_counts;
    node.statistics = &a.statistics;
    node.gather = gather;
    graph.Add(node);
  } else {
    for (uint64_t k : keys) k32.push_back(uint32_t(k));
    LookupNodeT<uint32_t> node;
    node.index = &index;
    node.keys = {std::span<const uint32_t>(k32)};
    node.values = a.values;
    node.found = a.found;
    node.probes = a.probes;
    node.match_counts = a.match_counts;
    node.statistics = &a.statistics;
    node.gather = gather;
    graph.Add(node);
  }
  const absl::Status st = backend.Run(graph);
  EXPECT_TRUE(st.ok()) << st;
  return a;
}

/// Every shape that matters: both key words and policies, with and without
/// payload, many duplicates, a tiny table (the CUDA pad), an empty build, overflow.
inline std::vector<ImageCase> AllImageCases() {
  std::vector<ImageCase> cases;
  uint64_t seed = 11;
  for (KeyType kt : {KeyType::kUint32, KeyType::kUint64}) {
    for (DuplicatePolicy dp : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
      for (bool payload : {false, true}) {
        cases.push_back({kt, dp, 1024, 0, 600, 300, payload, seed++});
      }
      cases.push_back({kt, dp, 2, 0, 5, 2, true, seed++});          // tiny table, duplicates
      cases.push_back({kt, dp, 64, 0, 0, 1, true, seed++});         // empty build
      cases.push_back({kt, dp, 256, 0, 2000, 3000, true, seed++});  // no slot for many keys
    }
  }
  return cases;
}

/// Cases of a (string, int64) key schema (KeyType::kColumns; the CPU backend
/// only): both policies, with and without payload, a tiny table, an empty
/// build, overflow.
inline std::vector<ImageCase> KeyColumnImageCases() {
  std::vector<ImageCase> cases;
  uint64_t seed = 101;
  for (DuplicatePolicy dp : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
    for (bool payload : {false, true}) {
      cases.push_back({KeyType::kColumns, dp, 1024, 0, 600, 300, payload, seed++});
    }
    cases.push_back({KeyType::kColumns, dp, 2, 0, 5, 2, true, seed++});
    cases.push_back({KeyType::kColumns, dp, 64, 0, 0, 1, true, seed++});
    cases.push_back({KeyType::kColumns, dp, 256, 0, 2000, 3000, true, seed++});
  }
  return cases;
}

}  // namespace gpujoin::engine::testing
