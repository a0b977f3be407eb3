// Host models of multi-value indexes and join kinds for the engine tests
// (docs/engine.md, "Multi-value indexes and join kinds"): the groups a kKeepAll
// index keeps (from a snapshot of its table, so they hold under overflow too),
// and small owned payload columns with their gathered outputs. The valid source
// rows of a build and the nested-loop join reference that needs no table at all
// are shared with the other suites: gpujoin/testing/join_kind_model.hpp.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/testing/join_kind_model.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {

// The layer-neutral model of source rows and join kinds (tests/support).
using ::gpujoin::testing::AppendPairs;
using ::gpujoin::testing::BatchRowsOf;
using ::gpujoin::testing::ExpectedPair;
using ::gpujoin::testing::kAllJoinKinds;
using ::gpujoin::testing::NestedLoopJoin;
using ::gpujoin::testing::PlainRowsOf;
using ::gpujoin::testing::SourceRowOf;

/// What a built index holds by the contract: for every stored key its group,
/// the winner row w(s) (the lowest valid row with the slot's key and value) and
/// every later valid row of the key, in row order. A kLowestRow index's group
/// is its first row alone.
template <KeyWord K>
struct GroupModel {
  TableSnapshotOf<K> table;
  std::unordered_map<K, std::vector<SourceRowOf<K>>> groups;

  /// The group of `key`, or null when it is not stored.
  const std::vector<SourceRowOf<K>>* Find(K key) const {
    const auto it = groups.find(key);
    return it == groups.end() ? nullptr : &it->second;
  }
  /// Rows kept in all groups.
  uint64_t kept() const {
    uint64_t n = 0;
    for (const auto& [key, rows] : groups) n += rows.size();
    return n;
  }
  /// The largest group.
  uint64_t largest() const {
    uint64_t n = 0;
    for (const auto& [key, rows] : groups) n = std::max<uint64_t>(n, rows.size());
    return n;
  }
};

template <KeyWord K>
GroupModel<K> GroupModelOf(const HashIndex& index, const std::vector<SourceRowOf<K>>& source) {
  GroupModel<K> m;
  m.table = SnapshotAs<K>(index);
  std::map<std::pair<K, uint32_t>, uint64_t> lowest;           // (key, value) -> lowest valid row
  std::unordered_map<K, std::vector<SourceRowOf<K>>> rows_of;  // key -> its rows in order
  for (const auto& r : source) {
    lowest.emplace(std::pair(r.key, r.value), r.row);
    rows_of[r.key].push_back(r);
  }
  const bool keep_all = index.spec().duplicates == DuplicatePolicy::kKeepAll;
  for (size_t s = 0; s < m.table.keys.size(); ++s) {
    const K key = m.table.keys[s];
    if (key == kEmptyKeyOf<K>) continue;
    const auto it = lowest.find({key, m.table.values[s]});
    if (it == lowest.end()) {
      ADD_FAILURE() << "slot " << s << " holds a key and value no source row has";
      continue;
    }
    std::vector<SourceRowOf<K>>& group = m.groups[key];
    for (const auto& r : rows_of[key]) {
      if (r.row < it->second) continue;
      group.push_back(r);
      if (!keep_all) break;
    }
  }
  return m;
}

/// The join of `left` by the group model (exact under overflow too).
template <KeyWord K>
std::vector<ExpectedPair> ModelJoin(JoinKind kind, const GroupModel<K>& model,
                                    const std::vector<K>& left, const std::vector<uint32_t>& ids) {
  std::vector<ExpectedPair> out;
  const std::vector<SourceRowOf<K>> none;
  for (size_t i = 0; i < left.size(); ++i) {
    const auto* group = model.Find(left[i]);
    AppendPairs(kind, ids[i], group != nullptr ? *group : none, out);
  }
  return out;
}

/// Poison written into outputs before a run, so that anything a run must not
/// write (or must zero) shows.
inline constexpr uint32_t kPoison32 = 0xdeadbeefu;
inline constexpr uint8_t kPoison8 = 0xab;
inline constexpr uint64_t kPoison64 = 0xababababababababull;

/// An owned payload column: int64 values (fixed width) or strings, with nulls.
struct OwnedColumn {
  ColumnType type = ColumnType::kInt64;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> validity;

  ColumnView View() const { return ColumnView{type, rows, data, offsets, validity}; }
  /// Row r's value as bytes, or none when null.
  std::optional<std::string> At(uint64_t r) const {
    if (!validity.empty() && !BitAt(validity, r)) return std::nullopt;
    const auto* bytes = reinterpret_cast<const char*>(data.data());
    if (type == ColumnType::kString) {
      return std::string(bytes + offsets[r], offsets[r + 1] - offsets[r]);
    }
    return std::string(bytes + r * 8, 8);
  }
};

/// int64 values row * 1000 + 7 (negative for odd rows), null where r % 5 == 3.
inline OwnedColumn Int64Column(uint64_t rows) {
  OwnedColumn c;
  c.rows = rows;
  c.data.resize(rows * 8);
  c.validity.assign(BitmapBytes(rows), 0);
  for (uint64_t r = 0; r < rows; ++r) {
    const int64_t v = (r % 2 ? -1 : 1) * int64_t(r * 1000 + 7);
    std::memcpy(c.data.data() + r * 8, &v, 8);
    if (r % 5 != 3) c.validity[r / 8] |= uint8_t(1u << (r % 8));
  }
  return c;
}

/// Strings "s<row>" repeated row % 4 times (empty for multiples of 4), null where r % 7 == 5.
inline OwnedColumn StringColumn(uint64_t rows) {
  OwnedColumn c;
  c.type = ColumnType::kString;
  c.rows = rows;
  c.validity.assign(BitmapBytes(rows), 0);
  c.offsets.push_back(0);
  for (uint64_t r = 0; r < rows; ++r) {
    std::string s;
    for (uint64_t i = 0; i < r % 4; ++i) s += "s" + std::to_string(r);
    for (char ch : s) c.data.push_back(std::byte(ch));
    c.offsets.push_back(c.data.size());
    if (r % 7 != 5) c.validity[r / 8] |= uint8_t(1u << (r % 8));
  }
  return c;
}

/// One gathered output of `positions` positions, owned and poisoned.
struct GatheredColumn {
  ColumnType type = ColumnType::kInt64;
  std::vector<std::byte> data;
  std::vector<uint8_t> validity;
  std::vector<uint32_t> offsets;
  std::string bytes = "poison";
  uint64_t null_count = kPoison64;

  GatheredColumn(ColumnType t, uint64_t positions) : type(t) {
    validity.assign(BitmapBytes(positions), kPoison8);
    if (t == ColumnType::kString) {
      offsets.assign(positions + 1, kPoison32);
    } else {
      data.assign(positions * 8, std::byte{kPoison8});
    }
  }
  GatherOutput Output(uint32_t column) {
    GatherOutput out;
    out.column = column;
    out.data = data;
    out.validity = validity;
    out.offsets = offsets;
    if (type == ColumnType::kString) out.string_bytes = &bytes;
    out.null_count = &null_count;
    return out;
  }
};

/// Checks the first expected.size() positions of `g` (values, zero bytes and
/// empty strings where null, the null count), the bits past them in the last
/// written bitmap byte zero, and every later position untouched.
inline void ExpectGatheredColumn(const GatheredColumn& g,
                                 const std::vector<std::optional<std::string>>& expected) {
  const size_t n = expected.size();
  uint64_t nulls = 0;
  for (size_t r = 0; r < n; ++r) {
    const bool valid = expected[r].has_value();
    nulls += !valid;
    ASSERT_EQ(BitAt(g.validity, r), valid) << "validity of position " << r;
    if (g.type == ColumnType::kString) {
      ASSERT_LE(g.offsets[r], g.offsets[r + 1]) << r;
      ASSERT_LE(g.offsets[r + 1], g.bytes.size()) << r;
      ASSERT_EQ(g.bytes.substr(g.offsets[r], g.offsets[r + 1] - g.offsets[r]),
                valid ? *expected[r] : std::string())
          << "position " << r;
    } else {
      ASSERT_EQ(std::string(reinterpret_cast<const char*>(g.data.data()) + r * 8, 8),
                valid ? *expected[r] : std::string(8, '\0'))
          << "position " << r;
    }
  }
  for (size_t b = n; b < BitmapBytes(n) * 8; ++b) {
    EXPECT_FALSE(BitAt(g.validity, b)) << "validity bit " << b << " past the written positions";
  }
  for (size_t i = BitmapBytes(n); i < g.validity.size(); ++i) {
    ASSERT_EQ(g.validity[i], kPoison8) << "validity byte " << i << " past the written positions";
  }
  if (g.type == ColumnType::kString) {
    EXPECT_EQ(g.offsets[0], 0u);
    EXPECT_EQ(g.offsets[n], g.bytes.size());
    for (size_t i = n + 1; i < g.offsets.size(); ++i) ASSERT_EQ(g.offsets[i], kPoison32) << i;
  } else {
    for (size_t i = n * 8; i < g.data.size(); ++i) {
      ASSERT_EQ(g.data[i], std::byte{kPoison8}) << "data byte " << i << " past the written rows";
    }
  }
  EXPECT_EQ(g.null_count, nulls);
}

/// Nothing of `g` was written (a count-only join batch).
inline void ExpectUntouchedColumn(const GatheredColumn& g) {
  for (uint8_t b : g.validity) EXPECT_EQ(b, kPoison8);
  for (std::byte b : g.data) EXPECT_EQ(b, std::byte{kPoison8});
  for (uint32_t o : g.offsets) EXPECT_EQ(o, kPoison32);
  EXPECT_EQ(g.bytes, "poison");
  EXPECT_EQ(g.null_count, kPoison64);
}

/// The payload cells `pairs` carry in `column` (null for a pair without a row).
inline std::vector<std::optional<std::string>> PayloadOf(const std::vector<ExpectedPair>& pairs,
                                                         const OwnedColumn& column) {
  std::vector<std::optional<std::string>> out;
  for (const ExpectedPair& p : pairs) {
    out.push_back(p.row ? column.At(*p.row) : std::nullopt);
  }
  return out;
}

/// The group shapes the suites build: every key once, groups of 2-8 rows, one
/// key holding half the rows (skewed), every row one key.
enum class GroupShape { kSingles, kSmallGroups, kSkewed, kOneKey };
inline constexpr GroupShape kAllGroupShapes[] = {GroupShape::kSingles, GroupShape::kSmallGroups,
                                                 GroupShape::kSkewed, GroupShape::kOneKey};
inline const char* GroupShapeName(GroupShape shape) {
  switch (shape) {
    case GroupShape::kSingles:
      return "singles";
    case GroupShape::kSmallGroups:
      return "groups of 2-8";
    case GroupShape::kSkewed:
      return "skewed";
    case GroupShape::kOneKey:
      return "one key";
  }
  return "?";
}

/// The hot key of kSkewed and the only key of kOneKey (a domain number).
inline constexpr uint32_t kHotKey = 5;

/// `rows` domain numbers (keys before KeyedBackendTest::Key) of `shape`, rows of
/// one key spread over the sequence in random order. Numbers are below 2^20.
inline std::vector<uint32_t> ShapeDomain(GroupShape shape, size_t rows, std::mt19937& rng) {
  std::vector<uint32_t> out;
  uint32_t next = 100;  // distinct keys from here, spaced so that they collide rarely by number
  switch (shape) {
    case GroupShape::kSingles:
      while (out.size() < rows) out.push_back(next += 1 + rng() % 7);
      break;
    case GroupShape::kSmallGroups:
      while (out.size() < rows) {
        const size_t size = std::min<size_t>(2 + rng() % 7, rows - out.size());
        next += 1 + rng() % 7;
        out.insert(out.end(), size, next);
      }
      break;
    case GroupShape::kSkewed:
      out.assign(rows / 2, kHotKey);
      while (out.size() < rows) out.push_back(next + rng() % (rows / 2 + 1));
      break;
    case GroupShape::kOneKey:
      out.assign(rows, kHotKey);
      break;
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

/// Base of the multi-value suites: KeyedBackendTest with indexes of either
/// policy, builds with payload, and lookups and joins with every output
/// requested and poisoned first.
template <class Config>
class MultiValueTest : public KeyedBackendTest<Config> {
 protected:
  using K = typename Config::K;

  std::unique_ptr<HashIndex> NewIndexWith(DuplicatePolicy policy, uint32_t capacity,
                                          uint32_t max_probe_count = 0) {
    HashIndexSpec spec{capacity, max_probe_count, KeyTypeOf<K>(), policy};
    auto index = this->backend_->CreateIndex(spec);
    EXPECT_TRUE(index.ok()) << index.status();
    return index.ok() ? std::move(*index) : nullptr;
  }

  /// Keys of domain numbers; kEmptyKey stands for the reserved key of K.
  static std::vector<K> KeysOf(const std::vector<uint32_t>& xs) {
    std::vector<K> out;
    for (uint32_t x : xs)
      out.push_back(x == kEmptyKey ? kEmptyKeyOf<K> : KeyedBackendTest<Config>::Key(x));
    return out;
  }

  BuildStatistics BuildWith(HashIndex& index, const Chunked<K>& keys,
                            const std::vector<const OwnedColumn*>& payload = {},
                            std::optional<ChunkedU32> values = std::nullopt,
                            uint32_t first_value = 0) {
    BuildStatistics stats;
    BuildIndexNodeT<K> node{&index, keys, std::move(values), first_value, &stats};
    for (const OwnedColumn* c : payload) node.payload.push_back(c->View());
    CommandGraph graph;
    graph.Add(node);
    this->RunOk(graph);
    return stats;
  }

  BuildStatistics BatchBuildWith(HashIndex& index, const std::vector<BatchChunkT<K>>& chunks,
                                 const std::vector<const OwnedColumn*>& payload = {}) {
    BuildStatistics stats;
    BuildBatchIndexNodeT<K> node{&index, chunks, &stats};
    for (const OwnedColumn* c : payload) node.payload.push_back(c->View());
    CommandGraph graph;
    graph.Add(node);
    this->RunOk(graph);
    return stats;
  }

  /// A lookup's outputs, every optional one requested and poisoned.
  struct Looked {
    std::vector<uint32_t> values, probes, match_counts;
    std::vector<uint8_t> found;
    QueryStatistics statistics;
    std::vector<GatheredColumn> gathered;
  };
  /// Looks `keys` up, gathering every payload column of `index`.
  Looked LookupAll(const HashIndex& index, const Chunked<K>& keys) {
    const size_t rows = TotalRows(keys);
    Looked out;
    out.values.assign(rows, kPoison32);
    out.probes.assign(rows, kPoison32);
    out.match_counts.assign(rows, kPoison32);
    out.found.assign(rows, kPoison8);
    for (const PayloadColumnInfo& info : index.payload())
      out.gathered.emplace_back(info.type, rows);
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = keys;
    node.values = out.values;
    node.found = out.found;
    node.probes = out.probes;
    node.match_counts = out.match_counts;
    node.statistics = &out.statistics;
    for (size_t c = 0; c < out.gathered.size(); ++c) {
      node.gather.push_back(out.gathered[c].Output(uint32_t(c)));
    }
    CommandGraph graph;
    graph.Add(node);
    this->RunOk(graph);
    return out;
  }

  /// One left batch of a join and, after Join, its outputs.
  struct Batch {
    std::vector<K> keys;
    std::vector<size_t> cuts;         // chunk boundaries of the keys
    std::vector<uint32_t> left_rows;  // explicit left row IDs, or empty
    uint32_t first_left_row = 0;
    size_t capacity = 0;

    std::vector<uint32_t> out_left, out_right, probes;
    std::vector<uint8_t> found;
    JoinResult result;
    std::vector<GatheredColumn> gathered;

    /// The left row ID of row i.
    std::vector<uint32_t> Ids() const {
      std::vector<uint32_t> ids;
      for (size_t i = 0; i < keys.size(); ++i) {
        ids.push_back(left_rows.empty() ? first_left_row + uint32_t(i) : left_rows[i]);
      }
      return ids;
    }
  };
  /// Joins `batches` against `index` with `kind` in one node, every payload
  /// column gathered per pair; outputs poisoned first.
  void Join(const HashIndex& index, JoinKind kind, std::vector<Batch>& batches,
            uint32_t max_probe_count = 0) {
    JoinNodeT<K> join;
    join.index = &index;
    join.kind = kind;
    join.max_probe_count = max_probe_count;
    for (Batch& b : batches) {
      b.out_left.assign(b.capacity, kPoison32);
      b.out_right.assign(b.capacity, kPoison32);
      b.probes.assign(b.keys.size(), kPoison32);
      b.found.assign(b.keys.size(), kPoison8);
      b.result = JoinResult{kPoison64, true, {}};
      b.gathered.clear();
      for (const PayloadColumnInfo& info : index.payload()) {
        b.gathered.emplace_back(info.type, b.capacity);
      }
      JoinBatchT<K> batch{Cut(b.keys, b.cuts), b.left_rows, b.first_left_row, b.out_left,
                          b.out_right,         &b.result,   b.found,          b.probes};
      for (size_t c = 0; c < b.gathered.size(); ++c) {
        batch.gather.push_back(b.gathered[c].Output(uint32_t(c)));
      }
      join.batches.push_back(batch);
    }
    CommandGraph graph;
    graph.Add(join);
    this->RunOk(graph);
  }

  /// Checks a joined batch against the pairs it must yield: the exact count,
  /// overflow, the stable prefix of pairs and of every gathered column
  /// (`payload[c]` is the build's column c), everything past it untouched.
  void ExpectBatch(const Batch& b, const std::vector<ExpectedPair>& expected,
                   const std::vector<const OwnedColumn*>& payload, bool build_overflowed) {
    EXPECT_EQ(b.result.count, expected.size());
    EXPECT_EQ(b.result.overflow, expected.size() > b.capacity || build_overflowed);
    const size_t written = std::min(expected.size(), b.capacity);
    for (size_t o = 0; o < written; ++o) {
      ASSERT_EQ(b.out_left[o], expected[o].left) << "pair " << o;
      ASSERT_EQ(b.out_right[o], expected[o].right)
          << "pair " << o << " (left " << expected[o].left << ")";
    }
    for (size_t o = written; o < b.capacity; ++o) {
      ASSERT_EQ(b.out_left[o], kPoison32) << "pair " << o << " past the written ones";
      ASSERT_EQ(b.out_right[o], kPoison32) << "pair " << o << " past the written ones";
    }
    ASSERT_EQ(b.gathered.size(), payload.size());
    const std::vector<ExpectedPair> prefix(expected.begin(), expected.begin() + written);
    for (size_t c = 0; c < payload.size(); ++c) {
      SCOPED_TRACE(::testing::Message() << "gathered column " << c);
      if (b.capacity == 0) {
        ExpectUntouchedColumn(b.gathered[c]);
      } else {
        ExpectGatheredColumn(b.gathered[c], PayloadOf(prefix, *payload[c]));
      }
    }
  }

  /// Checks a joined batch's found mask, probes and statistics: found where the
  /// model stores the key, probes as a lookup of the same keys reports them.
  void ExpectProbes(const HashIndex& index, const Batch& b, const GroupModel<K>& model,
                    uint32_t max_probe_count = 0) {
    QueryStatistics expect;
    const uint32_t bound = max_probe_count != 0 ? max_probe_count : index.spec().probe_bound();
    for (size_t i = 0; i < b.keys.size(); ++i) {
      const ContractRow row = ContractLookup(model.table, b.keys[i], bound);
      ASSERT_EQ(b.found[i], row.found ? 1 : 0) << "left row " << i;
      ASSERT_EQ(b.probes[i], row.probes) << "left row " << i;
      ++(row.found ? expect.found : expect.missing);
      expect.total_probes += row.probes;
      expect.max_probes = std::max<uint64_t>(expect.max_probes, row.probes);
    }
    EXPECT_EQ(b.result.statistics, expect);
  }
};

}  // namespace gpujoin::engine::testing
