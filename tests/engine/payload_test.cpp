// Payload columns (docs/engine.md, "Payload"): typed columns stored beside an
// index in slot order and gathered by lookups and joins. Typed over key word x
// backend, so the CUDA backend runs the same cases where a device exists.
//
// Expectations come from a host model that needs only a snapshot of the table
// and the build's source rows: slot s keeps the payload of the lowest valid
// source row whose key and value are the slot's (the value-match rule), and a
// gathered row takes the payload of the slot its key is stored in, or null.
// Every output is poisoned (0xAB) first, so rows a gather must not write, and
// bits it must zero, are checked too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint8_t kPoison = 0xab;
constexpr uint32_t kPoison32 = 0xabababab;
constexpr uint64_t kPoison64 = 0xababababababababull;
const std::string kPoisonString = "poison";

// One value of a column as the model sees it: valid or null, and its bytes
// (fixed width: the little-endian value; bool: one byte 0 or 1; variable width: the bytes).
struct Cell {
  bool valid = false;
  std::string bytes;
  friend bool operator==(const Cell&, const Cell&) = default;
};

std::ostream& operator<<(std::ostream& os, const Cell& c) {
  if (!c.valid) return os << "null";
  os << "[";
  for (unsigned char ch : c.bytes) os << std::hex << int(ch) << " ";
  return os << std::dec << "]";
}

const Cell kNull{};

// An owned payload column of a build.
struct TestColumn {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> validity;

  ColumnView View() const { return ColumnView{type, rows, data, offsets, validity}; }

  Cell At(uint64_t r) const {
    if (!validity.empty() && !BitAt(validity, r)) return kNull;
    const auto* bytes = reinterpret_cast<const char*>(data.data());
    if (type == ColumnType::kBool) {
      return Cell{
          true,
          std::string(
              1, char(BitAt(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
                            r)))};
    }
    if (IsVariableWidth(type)) {
      return Cell{true, std::string(bytes + offsets[r], offsets[r + 1] - offsets[r])};
    }
    const size_t w = ColumnWidth(type);
    return Cell{true, std::string(bytes + r * w, w)};
  }
};

std::vector<uint8_t> Bitmap(const std::vector<bool>& bits) {
  std::vector<uint8_t> out(BitmapBytes(bits.size()), 0);
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) out[i / 8] |= uint8_t(1u << (i % 8));
  }
  return out;
}

// A fixed-width column of `type` from host values; `valid` empty = no bitmap.
template <class T>
TestColumn Fixed(ColumnType type, const std::vector<T>& values,
                 const std::vector<bool>& valid = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  TestColumn c;
  c.type = type;
  c.rows = values.size();
  c.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(c.data.data(), values.data(), c.data.size());
  if (!valid.empty()) c.validity = Bitmap(valid);
  return c;
}

TestColumn Bools(const std::vector<bool>& values, const std::vector<bool>& valid = {}) {
  TestColumn c;
  c.type = ColumnType::kBool;
  c.rows = values.size();
  for (uint8_t b : Bitmap(values)) c.data.push_back(std::byte{b});
  if (!valid.empty()) c.validity = Bitmap(valid);
  return c;
}

// A variable-width column; the first value starts at byte `first` (offsets need not start at 0).
TestColumn Strings(const std::vector<std::string>& values, const std::vector<bool>& valid = {},
                   ColumnType type = ColumnType::kString, size_t first = 0) {
  TestColumn c;
  c.type = type;
  c.rows = values.size();
  c.data.assign(first, std::byte{'#'});
  c.offsets.push_back(first);
  for (const std::string& v : values) {
    for (char ch : v) c.data.push_back(std::byte(ch));
    c.offsets.push_back(c.data.size());
  }
  c.data.push_back(std::byte{'#'});  // bytes past the last offset are not part of any value
  if (!valid.empty()) c.validity = Bitmap(valid);
  return c;
}

template <class T>
std::string BytesOf(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

// One gathered output, owned and poisoned; `rows` positions of column `type`.
struct Gathered {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint8_t> validity;
  std::vector<uint32_t> offsets;
  std::string bytes = kPoisonString;
  uint64_t null_count = kPoison64;

  Gathered(ColumnType t, uint64_t n) : type(t), rows(n) {
    validity.assign(BitmapBytes(n), kPoison);
    if (IsVariableWidth(t)) {
      offsets.assign(n + 1, kPoison32);
    } else {
      data.assign(t == ColumnType::kBool ? BitmapBytes(n) : n * ColumnWidth(t), std::byte{kPoison});
    }
  }

  GatherOutput Output(uint32_t column, bool count_nulls = true) {
    GatherOutput out;
    out.column = column;
    out.data = data;
    out.validity = validity;
    out.offsets = offsets;
    if (IsVariableWidth(type)) out.string_bytes = &bytes;
    if (count_nulls) out.null_count = &null_count;
    return out;
  }
};

// Checks `g` against `expected` for its first expected.size() positions (the
// written rows): values, zeros where null, bits past the written rows zero in
// their last byte, everything after untouched, and the null count.
void ExpectGathered(const Gathered& g, const std::vector<Cell>& expected, bool counted = true) {
  const size_t n = expected.size();
  ASSERT_LE(n, g.rows);
  uint64_t nulls = 0;
  uint64_t byte_total = 0;
  for (size_t r = 0; r < n; ++r) {
    const Cell& e = expected[r];
    nulls += !e.valid;
    EXPECT_EQ(BitAt(g.validity, r), e.valid) << "validity of row " << r;
    if (IsVariableWidth(g.type)) {
      ASSERT_LE(g.offsets[r], g.offsets[r + 1]) << "row " << r;
      ASSERT_LE(g.offsets[r + 1], g.bytes.size()) << "row " << r;
      const std::string got = g.bytes.substr(g.offsets[r], g.offsets[r + 1] - g.offsets[r]);
      EXPECT_EQ(got, e.valid ? e.bytes : std::string()) << "row " << r;
      byte_total += got.size();
    } else if (g.type == ColumnType::kBool) {
      const bool bit =
          BitAt(std::span(reinterpret_cast<const uint8_t*>(g.data.data()), g.data.size()), r);
      EXPECT_EQ(bit, e.valid && e.bytes == std::string(1, '\1')) << "bool row " << r;
    } else {
      const size_t w = ColumnWidth(g.type);
      const std::string got(reinterpret_cast<const char*>(g.data.data()) + r * w, w);
      EXPECT_EQ(got, e.valid ? e.bytes : std::string(w, '\0')) << "row " << r;
    }
  }
  // Bits past the written rows in the last written byte are 0; later bytes untouched.
  const auto bitmap_tail = [&](std::span<const uint8_t> bits, const char* what) {
    for (size_t b = n; b < BitmapBytes(n) * 8; ++b) {
      EXPECT_FALSE(BitAt(bits, b)) << what << " bit " << b << " past the written rows";
    }
    for (size_t i = BitmapBytes(n); i < bits.size(); ++i) {
      EXPECT_EQ(bits[i], kPoison) << what << " byte " << i << " past the written rows";
    }
  };
  bitmap_tail(g.validity, "validity");
  if (IsVariableWidth(g.type)) {
    EXPECT_EQ(g.offsets[0], 0u);
    EXPECT_EQ(g.bytes.size(), byte_total);
    for (size_t i = n + 1; i < g.offsets.size(); ++i) EXPECT_EQ(g.offsets[i], kPoison32) << i;
  } else if (g.type == ColumnType::kBool) {
    bitmap_tail(std::span(reinterpret_cast<const uint8_t*>(g.data.data()), g.data.size()),
                "bool data");
  } else {
    for (size_t i = n * ColumnWidth(g.type); i < g.data.size(); ++i) {
      ASSERT_EQ(g.data[i], std::byte{kPoison}) << "data byte " << i << " past the written rows";
    }
  }
  if (counted) EXPECT_EQ(g.null_count, nulls);
}

// Nothing of `g` was written.
void ExpectUntouched(const Gathered& g) {
  for (uint8_t b : g.validity) EXPECT_EQ(b, kPoison);
  for (std::byte b : g.data) EXPECT_EQ(b, std::byte{kPoison});
  for (uint32_t o : g.offsets) EXPECT_EQ(o, kPoison32);
  EXPECT_EQ(g.bytes, kPoisonString);
  EXPECT_EQ(g.null_count, kPoison64);
}

// The valid source rows of a build as (global row, key, value).
template <KeyWord K>
struct SourceRow {
  uint64_t row;
  K key;
  uint32_t value;
};

template <KeyWord K>
std::vector<SourceRow<K>> PlainSource(const std::vector<K>& keys,
                                      const std::optional<std::vector<uint32_t>>& values,
                                      uint32_t first_value) {
  std::vector<SourceRow<K>> out;
  for (size_t r = 0; r < keys.size(); ++r) {
    if (keys[r] == kEmptyKeyOf<K>) continue;
    out.push_back({r, keys[r], values ? (*values)[r] : first_value + static_cast<uint32_t>(r)});
  }
  return out;
}

// The model of a built index: every stored key's winner row, from a snapshot
// of the table and the build's valid source rows.
template <KeyWord K>
struct Model {
  TableSnapshotOf<K> table;
  std::unordered_map<K, uint64_t> winner;  // stored key -> its slot's winner row

  // What a gather of `column` answers for `key`.
  Cell Expect(const TestColumn& column, K key) const {
    const auto it = winner.find(key);
    return it == winner.end() ? kNull : column.At(it->second);
  }
  std::vector<Cell> Expect(const TestColumn& column, const std::vector<K>& keys) const {
    std::vector<Cell> out;
    for (K k : keys) out.push_back(Expect(column, k));
    return out;
  }
};

template <KeyWord K>
Model<K> ModelOf(const HashIndex& index, const std::vector<SourceRow<K>>& source) {
  Model<K> m;
  m.table = SnapshotAs<K>(index);
  std::map<std::pair<K, uint32_t>, uint64_t> lowest;  // (key, value) -> its lowest valid row
  for (const SourceRow<K>& row : source) lowest.emplace(std::pair(row.key, row.value), row.row);
  for (size_t s = 0; s < m.table.keys.size(); ++s) {
    const K key = m.table.keys[s];
    if (key == kEmptyKeyOf<K>) continue;
    const auto it = lowest.find({key, m.table.values[s]});
    if (it == lowest.end()) {
      ADD_FAILURE() << "slot " << s << " holds a key and value no source row has";
      continue;
    }
    m.winner[key] = it->second;
  }
  return m;
}

std::vector<ColumnView> Views(const std::vector<TestColumn>& columns) {
  std::vector<ColumnView> out;
  for (const TestColumn& c : columns) out.push_back(c.View());
  return out;
}

// What the index reports of its payload: per column its type, the stored keys
// whose winner value is null and the bytes (at least PayloadStorageBytes of the
// backend's slots with the winners' string bytes, through Backend::PayloadBytes,
// and in all exactly what PayloadBytes gives for the whole build: the CUDA
// backend charges its records' padding to one column), and memory_bytes() =
// table + payload.
template <KeyWord K>
void ExpectPayloadInfo(const Backend& backend, const HashIndex& index,
                       const std::vector<TestColumn>& payload, const Model<K>& model) {
  ASSERT_EQ(index.payload().size(), payload.size());
  uint64_t payload_bytes = 0;
  std::vector<PayloadShape> shapes;
  for (size_t c = 0; c < payload.size(); ++c) {
    SCOPED_TRACE(absl::StrCat("payload column ", c));
    PayloadShape shape = PayloadShapeOf(payload[c].View());
    shape.string_bytes = 0;
    uint64_t nulls = 0;
    for (const auto& [key, row] : model.winner) {
      const Cell cell = payload[c].At(row);
      nulls += !cell.valid;
      if (IsVariableWidth(shape.type)) shape.string_bytes += cell.bytes.size();
    }
    const PayloadColumnInfo& info = index.payload()[c];
    EXPECT_EQ(info.type, payload[c].type);
    EXPECT_EQ(info.null_count, nulls);
    const PayloadShape one[] = {shape};
    EXPECT_GE(info.bytes, backend.PayloadBytes(index.spec(), one, index.built_rows()));
    shapes.push_back(shape);
    payload_bytes += info.bytes;
  }
  EXPECT_EQ(payload_bytes, backend.PayloadBytes(index.spec(), shapes, index.built_rows()));
  EXPECT_EQ(index.memory_bytes(), backend.IndexBytes(index.spec()) + payload_bytes);
}

template <class Config>
class PayloadTest : public KeyedBackendTest<Config> {
 protected:
  using K = typename Config::K;
  using LookupOut = typename KeyedBackendTest<Config>::LookupOut;

  BuildStatistics BuildWith(HashIndex& index, const Chunked<K>& keys,
                            const std::vector<TestColumn>& payload,
                            std::optional<ChunkedU32> values = std::nullopt,
                            uint32_t first_value = 0) {
    BuildStatistics stats;
    CommandGraph graph;
    BuildIndexNodeT<K> node{&index, keys, std::move(values), first_value, &stats};
    node.payload = Views(payload);
    graph.Add(node);
    this->RunOk(graph);
    return stats;
  }

  BuildStatistics BatchBuildWith(HashIndex& index, const std::vector<BatchChunkT<K>>& chunks,
                                 const std::vector<TestColumn>& payload) {
    BuildStatistics stats;
    CommandGraph graph;
    BuildBatchIndexNodeT<K> node{&index, chunks, &stats};
    node.payload = Views(payload);
    graph.Add(node);
    this->RunOk(graph);
    return stats;
  }

  // One Gathered per payload column of `index` (all of them, in order) for `rows` positions.
  static std::vector<Gathered> OutputsFor(const HashIndex& index, uint64_t rows) {
    std::vector<Gathered> out;
    for (const PayloadColumnInfo& info : index.payload()) out.emplace_back(info.type, rows);
    return out;
  }

  // A lookup of `keys` gathering payload column columns[i] (default: column i)
  // into gathered[i].
  absl::Status LookupGather(const HashIndex& index, const Chunked<K>& keys,
                            std::vector<Gathered>& gathered, LookupOut* out = nullptr,
                            std::vector<uint32_t> columns = {}) {
    const size_t rows = TotalRows(keys);
    LookupOut own;
    LookupOut& o = out != nullptr ? *out : own;
    o.values.assign(rows, kPoison32);
    o.found.assign(rows, kPoison);
    CommandGraph graph;
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = keys;
    node.values = o.values;
    node.found = o.found;
    node.statistics = &o.statistics;
    for (size_t i = 0; i < gathered.size(); ++i) {
      node.gather.push_back(gathered[i].Output(columns.empty() ? uint32_t(i) : columns[i]));
    }
    graph.Add(node);
    return this->backend_->Run(graph);
  }

  // One join batch's outputs: pairs of `capacity` and every payload column gathered.
  struct JoinOut {
    std::vector<uint32_t> left, right;
    JoinResult result;
    std::vector<Gathered> gathered;
  };
  JoinOut MakeJoinOut(const HashIndex& index, size_t capacity) {
    JoinOut out;
    out.left.assign(capacity, kPoison32);
    out.right.assign(capacity, kPoison32);
    out.gathered = OutputsFor(index, capacity);
    return out;
  }
  // Joins batches (keys, explicit left rows or none) gathering every payload column.
  absl::Status JoinGather(const HashIndex& index, const std::vector<Chunked<K>>& keys,
                          const std::vector<std::vector<uint32_t>>& left_rows,
                          std::vector<JoinOut>& outs) {
    CommandGraph graph;
    JoinNodeT<K> join;
    join.index = &index;
    for (size_t b = 0; b < keys.size(); ++b) {
      JoinBatchT<K> batch;
      batch.keys = keys[b];
      batch.left_rows = left_rows[b];
      batch.first_left_row = 1000 * uint32_t(b);
      batch.out_left_rows = outs[b].left;
      batch.out_right_rows = outs[b].right;
      batch.result = &outs[b].result;
      for (size_t c = 0; c < outs[b].gathered.size(); ++c) {
        batch.gather.push_back(outs[b].gathered[c].Output(uint32_t(c)));
      }
      join.batches.push_back(batch);
    }
    graph.Add(join);
    return this->backend_->Run(graph);
  }
};
TYPED_TEST_SUITE(PayloadTest, KeyedBackends, KeyedBackendNames);

// Every column type, with the values that a conversion would lose: negative
// int32, uint64 above 2^63, NaN payload bits, -0 and infinities, empty and long
// strings, a binary value with zero bytes, string offsets that do not start at 0.
std::vector<TestColumn> EveryType(size_t rows) {
  std::vector<uint32_t> u32;
  std::vector<int32_t> i32;
  std::vector<uint64_t> u64;
  std::vector<int64_t> i64;
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<std::string> bin, str;
  std::vector<bool> bools, valid, valid2;
  const float nan_f = std::bit_cast<float>(0x7fc12345u);
  const double nan_d = std::bit_cast<double>(0xfff8000000abcdefull);
  for (size_t r = 0; r < rows; ++r) {
    u32.push_back(0xfffffff0u + uint32_t(r));
    i32.push_back(-int32_t(r) - 1000000);
    u64.push_back((uint64_t{1} << 63) + 0x123456789ull * r);
    i64.push_back(std::numeric_limits<int64_t>::min() + int64_t(r));
    const float fs[] = {nan_f, -0.0f, std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), 1.5f * float(r)};
    f32.push_back(fs[r % 5]);
    const double ds[] = {-0.0, nan_d, -std::numeric_limits<double>::infinity(), 1e300 * double(r),
                         std::numeric_limits<double>::denorm_min()};
    f64.push_back(ds[r % 5]);
    bin.push_back(std::string(r % 3, '\0') + char(r));
    str.push_back(r % 4 == 0   ? std::string()
                  : r % 4 == 1 ? std::string(3000 + r, char('a' + r % 26))
                               : "v" + std::to_string(r) + "\xc3\xa9");
    bools.push_back(r % 3 != 1);
    valid.push_back(r % 5 != 2);
    valid2.push_back(r % 7 != 3);
  }
  return {Fixed(ColumnType::kUint32, u32),
          Fixed(ColumnType::kInt32, i32, valid),
          Fixed(ColumnType::kUint64, u64),
          Fixed(ColumnType::kInt64, i64, valid2),
          Fixed(ColumnType::kFloat32, f32),
          Fixed(ColumnType::kFloat64, f64, valid),
          Strings(bin, valid2, ColumnType::kBinary, 5),
          Bools(bools, valid),
          Strings(str, {}, ColumnType::kString, 0)};
}

TYPED_TEST(PayloadTest, EveryTypeRoundTripsBitForBit) {
  using K = typename TestFixture::K;
  constexpr size_t kRows = 40;
  auto index = this->NewIndex(64);
  std::vector<K> keys;
  for (size_t r = 0; r < kRows; ++r) keys.push_back(this->Key(uint32_t(1000 + r)));
  const std::vector<TestColumn> payload = EveryType(kRows);
  const BuildStatistics stats = this->BuildWith(*index, Cut(keys, {7, 7, 30}), payload);
  EXPECT_EQ(stats.unique_keys, kRows);

  // Query: every key in reverse, missing keys and the reserved key between them.
  std::vector<K> query;
  for (size_t r = kRows; r-- > 0;) {
    query.push_back(keys[r]);
    if (r % 9 == 0) query.push_back(this->Key(77));
    if (r % 13 == 0) query.push_back(TestFixture::kEmpty);
  }
  std::vector<Gathered> gathered = this->OutputsFor(*index, query.size());
  ASSERT_EQ(gathered.size(), payload.size());
  ASSERT_TRUE(this->LookupGather(*index, One(query), gathered).ok());
  const Model<K> model = ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0));
  for (size_t c = 0; c < payload.size(); ++c) {
    SCOPED_TRACE(std::string(ColumnTypeName(payload[c].type)));
    ExpectGathered(gathered[c], model.Expect(payload[c], query));
  }
  ExpectPayloadInfo(*this->backend_, *index, payload, model);
}

// The winner of a key repeated across key chunks is its lowest row, whatever
// the chunking; a null at the winner row stays null though later rows hold values.
TYPED_TEST(PayloadTest, DuplicatesAcrossChunksKeepTheLowestRowsPayload) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(32);
  // rows:                       0   1   2   3   4   5   6   7   8   9
  const std::vector<K> keys = this->Keys({5, 6, 7, 5, 8, 6, 5, 9, 7, 9});
  const std::vector<int64_t> v = {50, 60, 70, 51, 80, 61, 52, 90, 71, 91};
  const std::vector<bool> valid = {1, 0, 1, 1, 1, 1, 1, 1, 1, 1};  // key 6's winner is null
  const std::vector<TestColumn> payload = {
      Fixed(ColumnType::kInt64, v, valid),
      Strings({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})};
  const BuildStatistics stats = this->BuildWith(*index, Cut(keys, {1, 4, 4, 7}), payload);
  EXPECT_EQ(stats.unique_keys, 5u);
  EXPECT_EQ(stats.duplicate_rows, 5u);
  const std::vector<K> query = this->Keys({9, 8, 7, 6, 5, 4});
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  ASSERT_TRUE(this->LookupGather(*index, One(query), g).ok());
  const auto i64 = [](int64_t x) { return Cell{true, BytesOf(x)}; };
  const auto str = [](const char* x) { return Cell{true, x}; };
  ExpectGathered(g[0], {i64(90), i64(80), i64(70), kNull, i64(50), kNull});
  ExpectGathered(g[1], {str("h"), str("e"), str("c"), str("b"), str("a"), kNull});
  const Model<K> model = ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0));
  ExpectPayloadInfo(*this->backend_, *index, payload, model);
  EXPECT_EQ(index->payload()[0].null_count, 1u);
}

// Explicit values: the lowest row's value is retained, and so is its payload,
// also when a later row of the key carries the same value.
TYPED_TEST(PayloadTest, ExplicitValuesKeepTheLowestRowsPayload) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = this->Keys({3, 4, 3, 4, 3});
  const std::vector<uint32_t> values = {7, 8, 7, 9, 1};
  const std::vector<TestColumn> payload = {
      Fixed(ColumnType::kUint32, std::vector<uint32_t>{0, 1, 2, 3, 4})};
  this->BuildWith(*index, Cut(keys, {2}), payload, Cut(values, {3}));
  const std::vector<K> query = this->Keys({4, 3});
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  typename TestFixture::LookupOut out;
  ASSERT_TRUE(this->LookupGather(*index, One(query), g, &out).ok());
  EXPECT_EQ(out.values, (std::vector<uint32_t>{8, 7}));
  ExpectGathered(g[0], {Cell{true, BytesOf(uint32_t{1})}, Cell{true, BytesOf(uint32_t{0})}});
  ExpectPayloadInfo(*this->backend_, *index, payload,
                    ModelOf<K>(*index, PlainSource<K>(keys, values, 0)));
}

// Batch builds: the payload is aligned with every row of the chunks in order
// (masked rows included, empty chunks adding none); the winner is the earliest
// valid row by chunk order, whatever the row bases.
TYPED_TEST(PayloadTest, BatchBuildWinnerIsTheEarliestValidRowWhateverTheRowBases) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(32);
  const std::vector<K> c0 = {this->Key(1), this->Key(2), TestFixture::kEmpty, this->Key(3)};
  const std::vector<uint32_t> m0 = {0, 1, 1, 1};  // key 1's first row is masked out
  const std::vector<K> c1 = {};
  const std::vector<K> c2 = {this->Key(2), this->Key(1), this->Key(4), this->Key(3)};
  const std::vector<K> c3 = {this->Key(1), this->Key(4)};
  const std::vector<uint32_t> m3 = {1, 0};
  std::vector<BatchChunkT<K>> chunks = {{c0, 500, m0}, {c1, 7, {}}, {c2, 100, {}}, {c3, 0, m3}};
  // Global rows 0..9: c0 = 0..3, c2 = 4..7, c3 = 8..9.
  const std::vector<std::string> names = {"m1", "a2", "e",  "a3", "b2",
                                          "b1", "a4", "b3", "c1", "m4"};
  const std::vector<TestColumn> payload = {Strings(names), Bools({1, 0, 1, 1, 1, 0, 1, 0, 1, 1})};
  const BuildStatistics stats = this->BatchBuildWith(*index, chunks, payload);
  EXPECT_EQ(stats.invalid_rows, 3u);
  EXPECT_EQ(stats.unique_keys, 4u);
  const std::vector<K> query = this->Keys({1, 2, 3, 4, 5});
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  typename TestFixture::LookupOut out;
  ASSERT_TRUE(this->LookupGather(*index, One(query), g, &out).ok());
  // Values are row bases + positions: key 1 -> c2[1] = 101, 2 -> 501, 3 -> 503, 4 -> 102.
  EXPECT_EQ(out.values, (std::vector<uint32_t>{101, 501, 503, 102, kEmptyKey}));
  const auto str = [](const char* x) { return Cell{true, x}; };
  ExpectGathered(g[0], {str("b1"), str("a2"), str("a3"), str("a4"), kNull});
  const Cell t{true, "\1"}, f{true, std::string(1, '\0')};
  ExpectGathered(g[1], {f, f, t, t, kNull});
  // The model over the same rows.
  std::vector<SourceRow<K>> source;
  uint64_t row = 0;
  for (const auto& chunk : chunks) {
    for (size_t i = 0; i < chunk.keys.size(); ++i, ++row) {
      if (chunk.keys[i] == TestFixture::kEmpty || (!chunk.validity.empty() && !chunk.validity[i])) {
        continue;
      }
      source.push_back({row, chunk.keys[i], chunk.row_base + uint32_t(i)});
    }
  }
  ExpectPayloadInfo(*this->backend_, *index, payload, ModelOf<K>(*index, source));
}

// Rows holding the reserved key store nothing (their payload is never a
// winner); reserved and missing query keys gather null.
TYPED_TEST(PayloadTest, ReservedKeyRowsStoreNothingAndMissingKeysGatherNull) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = {TestFixture::kEmpty, this->Key(1), TestFixture::kEmpty,
                               this->Key(2)};
  const std::vector<TestColumn> payload = {
      Fixed(ColumnType::kFloat64, std::vector<double>{-1, 1, -2, 2})};
  const BuildStatistics stats = this->BuildWith(*index, One(keys), payload);
  EXPECT_EQ(stats.invalid_rows, 2u);
  const std::vector<K> query = {TestFixture::kEmpty, this->Key(2), this->Key(3), this->Key(1)};
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  ASSERT_TRUE(this->LookupGather(*index, One(query), g).ok());
  ExpectGathered(g[0], {kNull, Cell{true, BytesOf(2.0)}, kNull, Cell{true, BytesOf(1.0)}});
  ExpectPayloadInfo(*this->backend_, *index, payload,
                    ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0)));
}

// A small probe bound drops keys: every retained key's payload is that of the
// lowest row whose key and value are its slot's, dropped keys gather null.
TYPED_TEST(PayloadTest, OverflowKeepsPayloadConsistentWithTheTable) {
  using K = typename TestFixture::K;
  constexpr uint32_t kCapacity = 16;
  auto index = this->NewIndex(kCapacity, /*max_probe_count=*/2);
  // Ten keys of one home and five of the next, each twice (the second time
  // with another payload), interleaved so later keys push earlier ones out.
  std::vector<K> distinct = KeysWithHomeOf<K>(kCapacity, 3, 10);
  for (K k : KeysWithHomeOf<K>(kCapacity, 4, 5)) distinct.push_back(k);
  std::vector<K> keys;
  for (size_t i = 0; i < distinct.size(); ++i) keys.push_back(distinct[distinct.size() - 1 - i]);
  for (K k : distinct) keys.push_back(k);
  std::vector<int32_t> v;
  std::vector<std::string> s;
  for (size_t r = 0; r < keys.size(); ++r) {
    v.push_back(-int32_t(r));
    s.push_back(std::string(r, 'x'));
  }
  const std::vector<TestColumn> payload = {Fixed(ColumnType::kInt32, v), Strings(s)};
  for (bool explicit_values : {false, true}) {
    SCOPED_TRACE(explicit_values ? "explicit values" : "generated values");
    // Explicit values: one per key, so a key's rows share it.
    std::vector<uint32_t> values;
    for (K k : keys) values.push_back(uint32_t(k) * 7);
    std::optional<ChunkedU32> chunked;
    if (explicit_values) chunked = One(values);
    const BuildStatistics stats = this->BuildWith(*index, Cut(keys, {5, 20}), payload, chunked);
    EXPECT_GT(stats.overflow_rows, 0u);
    const Model<K> model = ModelOf<K>(
        *index, PlainSource<K>(keys, explicit_values ? std::optional(values) : std::nullopt, 0));
    EXPECT_EQ(model.winner.size(), stats.unique_keys);
    std::vector<Gathered> g = this->OutputsFor(*index, distinct.size());
    typename TestFixture::LookupOut out;
    ASSERT_TRUE(this->LookupGather(*index, One(distinct), g, &out).ok());
    ExpectGathered(g[0], model.Expect(payload[0], distinct));
    ExpectGathered(g[1], model.Expect(payload[1], distinct));
    EXPECT_EQ(out.statistics.found, stats.unique_keys);
    ExpectPayloadInfo(*this->backend_, *index, payload, model);
  }
}

// An empty build stores empty columns: every lookup row is null; an empty
// lookup writes an empty string column and a zero null count.
TYPED_TEST(PayloadTest, EmptyBuildGathersNullsAndEmptyLookupsWriteEmptyColumns) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(8);
  const std::vector<TestColumn> payload = {Fixed(ColumnType::kUint64, std::vector<uint64_t>{}),
                                           Bools({}, {}), Strings({}, {}, ColumnType::kBinary)};
  const std::vector<K> none;
  const BuildStatistics stats = this->BuildWith(*index, Cut(none, {0, 0}), payload);
  EXPECT_EQ(stats.unique_keys, 0u);
  ASSERT_EQ(index->payload().size(), 3u);
  ExpectPayloadInfo(*this->backend_, *index, payload, ModelOf<K>(*index, {}));
  const std::vector<K> query = this->Keys({1, 2, 3});
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  ASSERT_TRUE(this->LookupGather(*index, One(query), g).ok());
  for (const Gathered& col : g) ExpectGathered(col, {kNull, kNull, kNull});
  std::vector<Gathered> empty = this->OutputsFor(*index, 0);
  ASSERT_TRUE(this->LookupGather(*index, One(none), empty).ok());
  for (const Gathered& col : empty) ExpectGathered(col, {});
  EXPECT_EQ(empty[2].bytes, "");
  EXPECT_EQ(empty[2].offsets, std::vector<uint32_t>{0});
}

TYPED_TEST(PayloadTest, OneRow) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(1);
  const std::vector<K> keys = this->Keys({42});
  const std::vector<TestColumn> payload = {Strings({"only"}, {true}), Bools({true}, {true})};
  this->BuildWith(*index, One(keys), payload);
  const std::vector<K> query = this->Keys({42, 43, 42});
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  ASSERT_TRUE(this->LookupGather(*index, One(query), g).ok());
  ExpectGathered(g[0], {Cell{true, "only"}, kNull, Cell{true, "only"}});
  ExpectGathered(g[1], {Cell{true, "\1"}, kNull, Cell{true, "\1"}});
  ExpectPayloadInfo(*this->backend_, *index, payload,
                    ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0)));
}

// Columns may be gathered in any order, repeatedly, or only some of them, and
// the null count is optional.
TYPED_TEST(PayloadTest, GathersSelectColumnsInAnyOrder) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = this->Keys({1, 2, 3});
  const std::vector<TestColumn> payload = {
      Fixed(ColumnType::kInt32, std::vector<int32_t>{-1, -2, -3}),
      Strings({"x", "", "zz"}, {1, 1, 0}),
      Fixed(ColumnType::kFloat32, std::vector<float>{.5f, 1.5f, 2.5f})};
  this->BuildWith(*index, One(keys), payload);
  const std::vector<K> query = this->Keys({3, 9, 2, 1});
  std::vector<Gathered> g = {Gathered(ColumnType::kFloat32, 4), Gathered(ColumnType::kString, 4),
                             Gathered(ColumnType::kFloat32, 4)};
  CommandGraph graph;
  LookupNodeT<K> node;
  std::vector<uint32_t> values(query.size());
  node.index = index.get();
  node.keys = One(query);
  node.values = values;
  node.gather = {g[0].Output(2), g[1].Output(1, /*count_nulls=*/false), g[2].Output(2)};
  graph.Add(node);
  this->RunOk(graph);
  const Model<K> model = ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0));
  ExpectGathered(g[0], model.Expect(payload[2], query));
  ExpectGathered(g[1], model.Expect(payload[1], query), /*counted=*/false);
  EXPECT_EQ(g[1].null_count, kPoison64) << "no null count was asked for";
  ExpectGathered(g[2], model.Expect(payload[2], query));
  EXPECT_EQ(g[1].bytes, "x");  // key 3's value is null, 9 is missing, 2's is empty
}

// Join gathers follow the pairs: pair p gets the payload of its right key, in
// left order with repeated and missing left keys, explicit and generated left
// rows, over several batches (one of them empty).
TYPED_TEST(PayloadTest, JoinGathersFollowThePairs) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(64);
  const std::vector<K> right = this->Keys({10, 30, 20, 30, 40});
  const std::vector<TestColumn> payload = {
      Fixed(ColumnType::kUint64, std::vector<uint64_t>{~0ull, 1ull << 63, 2, 3, 4},
            {1, 1, 0, 1, 1}),
      Strings({"ten", "thirty", "twenty", "again", ""}), Bools({1, 0, 1, 1, 0})};
  this->BuildWith(*index, Cut(right, {3}), payload);
  const Model<K> model = ModelOf<K>(*index, PlainSource<K>(right, std::nullopt, 0));
  const std::vector<K> left0 = {this->Key(40), this->Key(99),       this->Key(30), this->Key(10),
                                this->Key(30), TestFixture::kEmpty, this->Key(20)};
  const std::vector<K> left1 = this->Keys({20, 20, 5});
  const std::vector<K> left2;
  const std::vector<uint32_t> rows1 = {9, 8, 7};
  std::vector<typename TestFixture::JoinOut> outs = {
      this->MakeJoinOut(*index, 10), this->MakeJoinOut(*index, 4), this->MakeJoinOut(*index, 3)};
  ASSERT_TRUE(
      this->JoinGather(*index, {Cut(left0, {2, 2}), One(left1), One(left2)}, {{}, rows1, {}}, outs)
          .ok());
  // Batch 0: pairs of left rows 0, 2, 3, 4, 6.
  EXPECT_EQ(outs[0].result.count, 5u);
  const std::vector<K> pair_keys0 = this->Keys({40, 30, 10, 30, 20});
  for (size_t c = 0; c < payload.size(); ++c) {
    ExpectGathered(outs[0].gathered[c], model.Expect(payload[c], pair_keys0));
  }
  EXPECT_EQ(outs[0].gathered[1].bytes, "thirtytenthirtytwenty");
  EXPECT_EQ(outs[1].result.count, 2u);
  EXPECT_EQ(std::vector<uint32_t>(outs[1].left.begin(), outs[1].left.begin() + 2),
            (std::vector<uint32_t>{9, 8}));
  for (size_t c = 0; c < payload.size(); ++c) {
    ExpectGathered(outs[1].gathered[c], model.Expect(payload[c], this->Keys({20, 20})));
  }
  EXPECT_EQ(outs[2].result.count, 0u);
  for (size_t c = 0; c < payload.size(); ++c) ExpectGathered(outs[2].gathered[c], {});
}

// A join over its capacity writes the stable prefix of pairs and of every
// gathered column; a capacity above the count leaves the positions past it as
// they were (bits past the written rows in their last byte zero).
TYPED_TEST(PayloadTest, JoinCapacityKeepsTheStablePrefixOfGatheredRows) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(64);
  std::vector<K> right;
  std::vector<int64_t> v;
  std::vector<std::string> s;
  for (uint32_t i = 0; i < 20; ++i) {
    right.push_back(this->Key(i));
    v.push_back(int64_t(i) * -3);
    s.push_back(std::string(i % 4, char('a' + i)));
  }
  const std::vector<TestColumn> payload = {
      Fixed(ColumnType::kInt64, v, std::vector<bool>(20, true)), Strings(s),
      Bools(std::vector<bool>(20, true))};
  this->BuildWith(*index, One(right), payload);
  const Model<K> model = ModelOf<K>(*index, PlainSource<K>(right, std::nullopt, 0));
  // 9 matches among 12 left rows.
  const std::vector<K> left = this->Keys({19, 3, 50, 3, 7, 60, 11, 0, 70, 18, 5, 2});
  std::vector<K> matched;
  for (K k : left) {
    if (model.winner.count(k)) matched.push_back(k);
  }
  ASSERT_EQ(matched.size(), 9u);
  for (size_t capacity : {size_t{5}, size_t{9}, size_t{13}, size_t{30}}) {
    SCOPED_TRACE(absl::StrCat("capacity ", capacity));
    std::vector<typename TestFixture::JoinOut> outs = {this->MakeJoinOut(*index, capacity)};
    ASSERT_TRUE(this->JoinGather(*index, {One(left)}, {{}}, outs).ok());
    EXPECT_EQ(outs[0].result.count, 9u);
    EXPECT_EQ(outs[0].result.overflow, capacity < 9);
    const std::vector<K> prefix(matched.begin(), matched.begin() + std::min<size_t>(capacity, 9));
    for (size_t c = 0; c < payload.size(); ++c) {
      ExpectGathered(outs[0].gathered[c], model.Expect(payload[c], prefix));
    }
  }
}

// Count-only batches (capacity 0) write no gathered output at all.
TYPED_TEST(PayloadTest, CountOnlyJoinWritesNoGatheredOutput) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> right = this->Keys({1, 2, 3});
  const std::vector<TestColumn> payload = EveryType(3);
  this->BuildWith(*index, One(right), payload);
  const std::vector<K> left = this->Keys({3, 3, 4, 1});
  std::vector<typename TestFixture::JoinOut> outs = {this->MakeJoinOut(*index, 0)};
  ASSERT_TRUE(this->JoinGather(*index, {One(left)}, {{}}, outs).ok());
  EXPECT_EQ(outs[0].result.count, 3u);
  EXPECT_TRUE(outs[0].result.overflow);
  ASSERT_EQ(outs[0].gathered.size(), payload.size());
  for (const Gathered& g : outs[0].gathered) ExpectUntouched(g);
}

// A string gather whose bytes exceed max_string_bytes is RESOURCE_EXHAUSTED
// naming both numbers, and no gathered output of the node is written; exactly
// the limit passes.
TYPED_TEST(PayloadTest, StringGatherOverMaxStringBytesIsRefused) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> right = this->Keys({1, 2});
  const std::vector<TestColumn> payload = {Fixed(ColumnType::kInt32, std::vector<int32_t>{1, 2}),
                                           Strings({"abcde", "xyz"})};
  this->BuildWith(*index, One(right), payload);
  const std::vector<K> query = this->Keys({1, 2, 1});  // 13 bytes
  for (uint64_t limit : {uint64_t{12}, uint64_t{13}}) {
    SCOPED_TRACE(absl::StrCat("max_string_bytes ", limit));
    std::vector<Gathered> g = this->OutputsFor(*index, query.size());
    std::vector<uint32_t> values(query.size());
    CommandGraph graph;
    LookupNodeT<K> node;
    node.index = index.get();
    node.keys = One(query);
    node.values = values;
    node.gather = {g[0].Output(0), g[1].Output(1)};
    node.gather[1].max_string_bytes = limit;
    graph.Add(node);
    const absl::Status status = this->backend_->Run(graph);
    if (limit == 12) {
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr("13"));
      EXPECT_THAT(std::string(status.message()), HasSubstr("max_string_bytes 12"));
      ExpectUntouched(g[0]);
      ExpectUntouched(g[1]);
    } else {
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(g[1].bytes, "abcdexyzabcde");
    }
  }
  // The same in a join's batch.
  std::vector<typename TestFixture::JoinOut> outs = {this->MakeJoinOut(*index, 3)};
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = index.get();
  JoinBatchT<K> batch;
  batch.keys = One(query);
  batch.out_left_rows = outs[0].left;
  batch.out_right_rows = outs[0].right;
  batch.result = &outs[0].result;
  batch.gather = {outs[0].gathered[1].Output(1)};
  batch.gather[0].max_string_bytes = 4;
  join.batches.push_back(batch);
  graph.Add(join);
  const absl::Status status = this->backend_->Run(graph);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("max_string_bytes 4"));
  ExpectUntouched(outs[0].gathered[1]);
}

// A rebuild without payload drops the earlier payload (memory and columns), and
// a gather of it is then INVALID_ARGUMENT; a rebuild with other columns replaces them.
TYPED_TEST(PayloadTest, RebuildReplacesOrDropsThePayload) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = this->Keys({1, 2});
  this->BuildWith(*index, One(keys), {Strings({"a", "b"}), Bools({1, 1})});
  ASSERT_EQ(index->payload().size(), 2u);
  const std::vector<TestColumn> other = {Fixed(ColumnType::kFloat32, std::vector<float>{1, 2})};
  this->BuildWith(*index, One(keys), other);
  ASSERT_EQ(index->payload().size(), 1u);
  EXPECT_EQ(index->payload()[0].type, ColumnType::kFloat32);
  ExpectPayloadInfo(*this->backend_, *index, other,
                    ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0)));
  this->Build(*index, One(keys));
  EXPECT_TRUE(index->payload().empty());
  EXPECT_EQ(index->memory_bytes(), this->backend_->IndexBytes(index->spec()));
  std::vector<Gathered> g = {Gathered(ColumnType::kFloat32, 2)};
  const absl::Status status = this->LookupGather(*index, One(keys), g);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("the index has 0 payload columns"));
  ExpectUntouched(g[0]);
}

// A lookup in the graph that builds the index sees the build node's payload.
TYPED_TEST(PayloadTest, GatherInTheGraphThatBuildsTheIndex) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = this->Keys({4, 5, 4});
  const std::vector<TestColumn> payload = {Strings({"four", "five", "again"}, {1, 1, 1})};
  const std::vector<K> query = this->Keys({5, 4, 6});
  std::vector<Gathered> g = {Gathered(ColumnType::kString, 3)};
  std::vector<uint32_t> values(3);
  CommandGraph graph;
  BuildIndexNodeT<K> build{index.get(), One(keys), std::nullopt, 0, nullptr};
  build.payload = Views(payload);
  graph.Add(build);
  LookupNodeT<K> lookup;
  lookup.index = index.get();
  lookup.keys = One(query);
  lookup.values = values;
  lookup.gather = {g[0].Output(0)};
  graph.Add(lookup);
  this->RunOk(graph);
  ExpectGathered(g[0], {Cell{true, "five"}, Cell{true, "four"}, kNull});
  // Built again without payload in the graph: the lookup's gather no longer validates.
  CommandGraph rebuild;
  rebuild.Add(BuildIndexNodeT<K>{index.get(), One(keys), std::nullopt, 0, nullptr});
  rebuild.Add(lookup);
  const absl::Status status = rebuild.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("node 1 (lookup)"));
  EXPECT_EQ(index->payload().size(), 1u) << "a rejected graph changes nothing";
}

// Many rows with duplicates across chunks and nulls, on a table large enough
// that every backend splits the work (cpu3: several parts per pass): lookups
// and joins match the model.
TYPED_TEST(PayloadTest, LargeBuildWithDuplicatesMatchesTheModel) {
  using K = typename TestFixture::K;
  constexpr size_t kRows = 120000;
  auto index = this->NewIndex(1u << 17);
  std::mt19937 rng(20);
  std::vector<K> keys(kRows);
  std::vector<int64_t> v(kRows);
  std::vector<bool> valid(kRows), bits(kRows);
  std::vector<std::string> s(kRows);
  for (size_t r = 0; r < kRows; ++r) {
    keys[r] = r % 997 == 0 ? TestFixture::kEmpty : this->Key(rng() % 50000);
    v[r] = int64_t(rng()) - (int64_t{1} << 31);
    valid[r] = rng() % 10 != 0;
    bits[r] = rng() % 2;
    s[r] = std::string(rng() % 12, char('a' + r % 26));
  }
  const std::vector<TestColumn> payload = {Fixed(ColumnType::kInt64, v, valid), Bools(bits),
                                           Strings(s, valid, ColumnType::kString, 3)};
  this->BuildWith(*index, Cut(keys, {1000, 50000, 50000, 90001}), payload);
  const Model<K> model = ModelOf<K>(*index, PlainSource<K>(keys, std::nullopt, 0));
  ExpectPayloadInfo(*this->backend_, *index, payload, model);
  std::vector<K> query(100000);
  for (K& k : query) k = this->Key(rng() % 60000);
  std::vector<Gathered> g = this->OutputsFor(*index, query.size());
  ASSERT_TRUE(this->LookupGather(*index, Cut(query, {33333}), g).ok());
  for (size_t c = 0; c < payload.size(); ++c) ExpectGathered(g[c], model.Expect(payload[c], query));
  std::vector<typename TestFixture::JoinOut> outs = {this->MakeJoinOut(*index, 70000)};
  ASSERT_TRUE(this->JoinGather(*index, {One(query)}, {{}}, outs).ok());
  std::vector<K> matched;
  for (K k : query) {
    if (model.winner.count(k)) matched.push_back(k);
  }
  ASSERT_EQ(outs[0].result.count, matched.size());
  matched.resize(std::min<size_t>(matched.size(), 70000));
  for (size_t c = 0; c < payload.size(); ++c) {
    ExpectGathered(outs[0].gathered[c], model.Expect(payload[c], matched));
  }
}

// CommandGraph::Validate's payload rules: every error is INVALID_ARGUMENT
// naming the node, the column or output, and the sizes; Run reports the same
// and changes nothing.
class PayloadValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateBackend(BackendKind::kCpu);
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    index_ = std::move(*backend_->CreateIndex(HashIndexSpec{16, 0}));
    // Columns 0 int64, 1 string, 2 bool.
    CommandGraph build;
    build.Add(BuildNode(columns_));
    ASSERT_TRUE(backend_->Run(build).ok());
    ASSERT_EQ(index_->payload().size(), 3u);
  }

  BuildIndexNode BuildNode(const std::vector<TestColumn>& columns) {
    BuildIndexNode n{index_.get(), Cut(keys_, {1}), std::nullopt, 0, nullptr};
    n.payload = Views(columns);
    return n;
  }

  // Expects INVALID_ARGUMENT containing every fragment from Validate and Run,
  // and that Run changed nothing.
  void ExpectInvalid(const CommandGraph& graph, const std::vector<std::string>& fragments) {
    const absl::Status status = graph.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (const auto& f : fragments) EXPECT_THAT(std::string(status.message()), HasSubstr(f));
    EXPECT_EQ(backend_->Run(graph), status);
    EXPECT_EQ(index_->payload().size(), 3u);
  }
  void ExpectBuildInvalid(const ColumnView& column, const std::vector<std::string>& fragments) {
    CommandGraph g;
    BuildIndexNode n = BuildNode(columns_);
    n.payload[1] = column;
    g.Add(n);
    ExpectInvalid(g, fragments);
  }

  // A lookup of 3 keys gathering `out`.
  LookupNode Lookup(const GatherOutput& out) {
    LookupNode n;
    n.index = index_.get();
    n.keys = One(query_);
    n.values = values_;
    n.gather = {out};
    return n;
  }
  void ExpectGatherInvalid(const GatherOutput& out, const std::vector<std::string>& fragments) {
    CommandGraph g;
    g.Add(Lookup(out));
    ExpectInvalid(g, fragments);
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<HashIndex> index_;
  std::vector<uint32_t> keys_ = {1, 2, 3, 4, 5};
  std::vector<TestColumn> columns_ = {
      Fixed(ColumnType::kInt64, std::vector<int64_t>{1, 2, 3, 4, 5}),
      Strings({"a", "bb", "", "d", "e"}, {1, 1, 1, 0, 1}), Bools({1, 0, 1, 0, 1})};
  std::vector<uint32_t> query_ = {1, 2, 9};
  std::vector<uint32_t> values_ = std::vector<uint32_t>(3);
};

TEST_F(PayloadValidateTest, ValidGraphsPass) {
  CommandGraph g;
  g.Add(BuildNode(columns_));
  EXPECT_TRUE(g.Validate().ok());
  Gathered out(ColumnType::kString, 3);
  CommandGraph q;
  q.Add(Lookup(out.Output(1)));
  EXPECT_TRUE(q.Validate().ok());
}

TEST_F(PayloadValidateTest, PayloadRowsMustEqualTheKeyRows) {
  TestColumn c = Strings({"a", "b", "c", "d"});
  ExpectBuildInvalid(c.View(),
                     {"node 0 (build)", "payload[1] (string) has 4 rows but keys have 5"});
  // Batch builds count every row of every chunk, masked-out ones included.
  const std::vector<uint32_t> a = {1, 2}, b = {3, 4, 5}, mask = {0, 0, 1};
  CommandGraph g;
  BuildBatchIndexNode n{index_.get(), {{a, 0, {}}, {b, 10, mask}}, nullptr};
  n.payload = {c.View()};
  g.Add(n);
  ExpectInvalid(g, {"node 0 (batch build)", "payload[0] (string) has 4 rows but keys have 5"});
  n.payload = Views(columns_);
  CommandGraph ok;
  ok.Add(n);
  EXPECT_TRUE(ok.Validate().ok());
}

TEST_F(PayloadValidateTest, FixedWidthDataMustHoldEveryRow) {
  TestColumn c = Fixed(ColumnType::kInt64, std::vector<int64_t>{1, 2, 3, 4, 5});
  ColumnView v = c.View();
  v.data = v.data.first(39);
  ExpectBuildInvalid(v, {"payload[1] (int64) data has 39 bytes; 5 rows of 8 bytes need 40"});
  v.type = ColumnType::kFloat32;
  v.data = c.View().data;
  ExpectBuildInvalid(v, {"payload[1] (float32) data has 40 bytes; 5 rows of 4 bytes need 20"});
  v = c.View();
  const std::vector<uint64_t> offsets(6, 0);
  v.offsets = offsets;
  ExpectBuildInvalid(v, {"payload[1] (int64) has 6 offsets; only binary and string columns"});
}

TEST_F(PayloadValidateTest, BitmapsMustHoldEveryRow) {
  TestColumn c = Bools({1, 0, 1, 0, 1});
  ColumnView v = c.View();
  v.data = {};
  ExpectBuildInvalid(v,
                     {"payload[1] (bool) data has 0 bytes; a bitmap of 5 rows needs at least 1"});
  // Validity: none, or at least the bitmap's bytes (longer is fine).
  TestColumn nine = Bools({1, 0, 1, 0, 1, 1, 1, 1, 1});
  ColumnView w = nine.View();
  const std::vector<uint8_t> short_validity = {0xff};
  w.validity = short_validity;
  CommandGraph g;
  BuildIndexNode n{index_.get(), {}, std::nullopt, 0, nullptr};
  const std::vector<uint32_t> keys(9, 7);
  n.keys = One(keys);
  n.payload = {w};
  g.Add(n);
  ExpectInvalid(g, {"payload[0] (bool) validity has 1 bytes; a bitmap of 9 rows needs at least 2"});
  const std::vector<uint8_t> long_validity = {0xff, 0xff, 0xff};
  n.payload[0].validity = long_validity;
  CommandGraph ok;
  ok.Add(n);
  EXPECT_TRUE(ok.Validate().ok());
}

TEST_F(PayloadValidateTest, StringOffsetsMustBeCompleteMonotoneAndWithinTheBytes) {
  TestColumn c = Strings({"a", "bb", "", "d", "e"});
  ColumnView v = c.View();
  v.offsets = v.offsets.first(5);
  ExpectBuildInvalid(v, {"payload[1] (string) offsets has 5 entries; 5 rows need 6"});
  std::vector<uint64_t> decreasing = c.offsets;
  decreasing[3] = 1;  // 3, then 1 at row 2 -> 3
  v = c.View();
  v.offsets = decreasing;
  ExpectBuildInvalid(v, {"payload[1] (string) offsets decrease at row 2 (3 then 1)"});
  std::vector<uint64_t> past = c.offsets;
  past[5] = c.data.size() + 1;
  v = c.View();
  v.offsets = past;
  ExpectBuildInvalid(v, {absl::StrCat("offsets end at ", c.data.size() + 1, " but data has ",
                                      c.data.size(), " bytes")});
  v = c.View();
  v.type = ColumnType::kBinary;
  v.offsets = {};
  ExpectBuildInvalid(v, {"payload[1] (binary) offsets has 0 entries; 5 rows need 6"});
  v = c.View();
  v.type = static_cast<ColumnType>(42);
  ExpectBuildInvalid(v, {"payload[1] has an unknown column type 42"});
  // Hash-only types are refused, never read as payload.
  for (ColumnType t : {ColumnType::kInt8, ColumnType::kDecimal128, ColumnType::kLargeString,
                       ColumnType::kDictionary, ColumnType::kStruct, ColumnType::kNull}) {
    v = c.View();
    v.type = t;
    ExpectBuildInvalid(v, {absl::StrCat("payload[1] has column type ",
                                        std::string(ColumnTypeName(t)), ", which only Hash takes")});
  }
}

TEST_F(PayloadValidateTest, GatherMustNameAColumnOfTheIndex) {
  Gathered out(ColumnType::kInt64, 3);
  ExpectGatherInvalid(out.Output(3), {"node 0 (lookup)", "gather[0] asks for payload column 3",
                                      "the index has 3 payload columns"});
  // An earlier build node of the graph decides: here it stores one column.
  CommandGraph g;
  g.Add(BuildNode({columns_[0]}));
  g.Add(Lookup(out.Output(1)));
  ExpectInvalid(g, {"node 1 (lookup)", "payload column 1", "the index has 1 payload column"});
}

TEST_F(PayloadValidateTest, GatherOutputsMustFitTheColumnsType) {
  {
    Gathered out(ColumnType::kInt64, 3);
    GatherOutput o = out.Output(0);
    o.data = o.data.first(23);
    ExpectGatherInvalid(o, {"gather[0] (column 0, int64) data has 23 bytes; 3 query rows need 24"});
    o = out.Output(0);
    o.validity = {};
    ExpectGatherInvalid(o,
                        {"gather[0] (column 0, int64) validity has 0 bytes", "(it is required)"});
    std::vector<uint32_t> offsets(4);
    o = out.Output(0);
    o.offsets = offsets;
    ExpectGatherInvalid(o, {"gather[0] (column 0, int64) has 4 offsets"});
  }
  {
    Gathered out(ColumnType::kString, 3);
    GatherOutput o = out.Output(1);
    o.offsets = o.offsets.first(3);
    ExpectGatherInvalid(
        o, {"gather[0] (column 1, string) offsets has 3 entries; 3 query rows need 4"});
    o = out.Output(1);
    o.string_bytes = nullptr;
    ExpectGatherInvalid(o, {"gather[0] (column 1, string) string_bytes is null"});
    o = out.Output(1);
    std::vector<std::byte> data(3);
    o.data = data;
    ExpectGatherInvalid(o, {"gather[0] (column 1, string) data has 3 bytes; it must be empty"});
    o = out.Output(1);
    o.max_string_bytes = uint64_t{1} << 31;
    ExpectGatherInvalid(o, {"max_string_bytes is 2147483648; at most 2^31 - 1"});
  }
  {
    Gathered out(ColumnType::kBool, 3);
    std::vector<std::byte> two(2);
    GatherOutput o = out.Output(2);
    o.data = two;
    ExpectGatherInvalid(o, {"gather[0] (column 2, bool) data has 2 bytes; 3 query rows need 1"});
  }
}

TEST_F(PayloadValidateTest, JoinGathersAreSizedByThePairCapacity) {
  std::vector<uint32_t> l(10), r(10);
  JoinResult result;
  Gathered out(ColumnType::kInt64, 3);  // 3 positions, capacity 10
  CommandGraph g;
  JoinNode join;
  join.index = index_.get();
  join.batches.push_back(JoinBatch{One(query_), {}, 0, l, r, &result, {}, {}});
  join.batches[0].gather = {out.Output(0)};
  g.Add(join);
  ExpectInvalid(g, {"node 0 (join) batch 0", "gather[0] (column 0, int64) validity has 1 bytes",
                    "10 pairs needs 2"});
  // Count only: zero positions, string outputs still need their one offset and string.
  Gathered none(ColumnType::kString, 0);
  CommandGraph g2;
  JoinNode count_only;
  count_only.index = index_.get();
  count_only.batches.push_back(JoinBatch{One(query_), {}, 0, {}, {}, &result, {}, {}});
  count_only.batches[0].gather = {none.Output(1)};
  g2.Add(count_only);
  EXPECT_TRUE(g2.Validate().ok());
  count_only.batches[0].gather[0].string_bytes = nullptr;
  CommandGraph g3;
  g3.Add(count_only);
  ExpectInvalid(g3, {"node 0 (join) batch 0", "string_bytes is null"});
}

TEST_F(PayloadValidateTest, GatherOutputsTakePartInAliasing) {
  Gathered a(ColumnType::kInt64, 3), b(ColumnType::kString, 3);
  // A gathered output over the lookup's values.
  LookupNode n = Lookup(b.Output(1));
  n.gather.push_back(a.Output(0));
  n.gather[1].validity = std::span(reinterpret_cast<uint8_t*>(values_.data()), 1);
  CommandGraph g;
  g.Add(n);
  ExpectInvalid(g, {"node 0 (lookup) values", "node 0 (lookup) gather[1] validity"});
  // Two string gathers into one string.
  Gathered c(ColumnType::kString, 3);
  GatherOutput shared = c.Output(1);
  shared.string_bytes = &b.bytes;
  LookupNode n2 = Lookup(b.Output(1));
  n2.gather.push_back(shared);
  CommandGraph g2;
  g2.Add(n2);
  ExpectInvalid(g2, {"gather[0] string_bytes", "gather[1] string_bytes"});
  // A payload input that a later node writes.
  TestColumn col = Fixed(ColumnType::kInt64, std::vector<int64_t>{1, 2, 3, 4, 5});
  Gathered d(ColumnType::kInt64, 3);
  CommandGraph g3;
  BuildIndexNode build = BuildNode(columns_);
  build.payload[0] = col.View();
  g3.Add(build);
  GatherOutput into_input = d.Output(0);
  into_input.data = std::span(reinterpret_cast<std::byte*>(col.data.data()), 24);
  g3.Add(Lookup(into_input));
  ExpectInvalid(g3, {"node 0 (build) payload[0] data", "node 1 (lookup) gather[0] data"});
}

// BuildShapeOf carries each payload column's shape; PayloadBytes is the upper
// bound a build is reserved for (every string byte counted); the CPU build takes
// one 4-byte winner row per slot while it stores payload.
TEST(PayloadShapeTest, ShapesBytesAndTransientMemory) {
  const std::vector<TestColumn> columns = {
      Fixed(ColumnType::kInt32, std::vector<int32_t>{1, 2, 3}, {1, 0, 1}), Bools({1, 1, 0}),
      Strings({"ab", "", "cde"}, {}, ColumnType::kString, 4)};
  const std::vector<uint32_t> keys = {1, 2, 3};
  BuildIndexNode plain{nullptr, Cut(keys, {1}), std::nullopt, 0, nullptr};
  plain.payload = Views(columns);
  const BuildShape shape = BuildShapeOf(plain);
  ASSERT_EQ(shape.payload.size(), 3u);
  EXPECT_EQ(shape.payload[0], (PayloadShape{ColumnType::kInt32, true, 0}));
  EXPECT_EQ(shape.payload[1], (PayloadShape{ColumnType::kBool, false, 0}));
  EXPECT_EQ(shape.payload[2], (PayloadShape{ColumnType::kString, false, 5}));
  BuildBatchIndexNode batch{nullptr, {{keys, 0, {}}}, nullptr};
  batch.payload = Views(columns);
  EXPECT_EQ(BuildShapeOf(batch).payload, shape.payload);

  EXPECT_EQ(PayloadStorageBytes(16, shape.payload[0]), 16u * 4 + 2);
  EXPECT_EQ(PayloadStorageBytes(16, shape.payload[1]), 2u);
  EXPECT_EQ(PayloadStorageBytes(16, shape.payload[2]), 17u * 8 + 5);
  auto backend = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(backend.ok());
  const HashIndexSpec spec{16, 0};
  EXPECT_EQ((*backend)->PayloadBytes(spec, shape.payload, shape.rows), 66u + 2 + 141);
  EXPECT_EQ((*backend)->BuildTransientBytes(spec, shape), 16u * 4);
  BuildShape none = shape;
  none.payload.clear();
  EXPECT_EQ((*backend)->BuildTransientBytes(spec, none), 0u);
}

}  // namespace
}  // namespace gpujoin::engine::testing
