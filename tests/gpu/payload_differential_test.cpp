// Payload columns, CUDA vs CPU: builds store typed columns beside the
// index in slot order, lookups and joins gather them (docs/engine.md, "Payload").
// Every test draws fresh random inputs (the seed is printed on failure) for both
// key words and both forced CUDA build paths (direct, tiles): every column type,
// nulls, empty and long strings, offsets that do not start at 0, garbage bits
// past the rows in input bitmaps, duplicates across chunks (so the winner
// matters), reserved keys, missing query keys, batch builds with masks. Every
// output is poisoned first, and each backend's bytes are compared exactly: the
// table layout, build statistics, PayloadColumnInfo, lookup values/found/probes,
// join pairs and results, and every gathered byte (data, validity, offsets,
// string bytes, null counts, and the untouched tails past a join's written
// pairs). The CPU's gathers are also checked against a host model (the lowest
// valid row of each key whose value is the slot's), and overflowing builds,
// whose retained keys may differ between backends, are checked against the
// model of each backend's own table. Sizes stay small enough for
// compute-sanitizer (bench/device_run.sh runs memcheck and racecheck on a filter).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine {
namespace {

constexpr uint64_t kPoison64 = 0xa5a5a5a5a5a5a5a5ull;
const std::string kPoisonString = "poison";

constexpr ColumnType kAllTypes[] = {ColumnType::kUint32, ColumnType::kInt32,   ColumnType::kUint64,
                                    ColumnType::kInt64,  ColumnType::kFloat32, ColumnType::kFloat64,
                                    ColumnType::kBinary, ColumnType::kBool,    ColumnType::kString};

// Slots an index stores payload for: the capacity, which the CUDA table pads to
// at least 4.
uint64_t StoredSlots(const HashIndex& index) {
  const uint32_t capacity = index.spec().capacity;
  return index.backend() == BackendKind::kCuda && capacity < 4 ? 4 : capacity;
}

// The padding of the records in which the CUDA backend keeps the fixed-width
// payload columns of a build of `types` for `slots` slots (docs/engine.md,
// "Payload"): per slot, the values' bytes rounded up to a power of two when at
// most 64, else to a multiple of 64, less the values' bytes. It is charged to
// the last fixed-width column, whose index goes to `*column` (types.size()
// when there is none).
uint64_t CudaRecordPadding(const std::vector<ColumnType>& types, uint64_t slots, size_t* column) {
  uint64_t values = 0;
  *column = types.size();
  for (size_t c = 0; c < types.size(); ++c) {
    if (ColumnWidth(types[c]) == 0) continue;
    values += ColumnWidth(types[c]);
    *column = c;
  }
  uint64_t stride = values;
  if (values > 64) {
    stride = (values + 63) / 64 * 64;
  } else if (values > 0) {
    stride = 4;
    while (stride < values) stride *= 2;
  }
  return slots * (stride - values);
}

// One value as the model sees it: null, or its bytes (fixed width: the
// little-endian value; kBool: one byte 0 or 1; variable width: the bytes).
struct Cell {
  bool valid = false;
  std::string bytes;
  friend bool operator==(const Cell&, const Cell&) = default;
};

// An owned payload column of a build, with the layout freedoms ColumnView
// allows: offsets starting past 0, bytes after the last value, bitmaps longer
// than needed and garbage bits past the rows.
struct SourceColumn {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> validity;

  ColumnView View() const { return ColumnView{type, rows, data, offsets, validity}; }

  Cell At(uint64_t r) const {
    if (!validity.empty() && !BitAt(validity, r)) return Cell{};
    const auto* bytes = reinterpret_cast<const char*>(data.data());
    if (type == ColumnType::kBool) {
      const auto bits = std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      return Cell{true, std::string(1, char(BitAt(bits, r)))};
    }
    if (IsVariableWidth(type)) {
      return Cell{true, std::string(bytes + offsets[r], offsets[r + 1] - offsets[r])};
    }
    const size_t w = ColumnWidth(type);
    return Cell{true, std::string(bytes + r * w, w)};
  }
};

// A bitmap of `rows` random bits (1 with probability `ones`), one spare byte and
// random bits past the rows.
std::vector<uint8_t> RandomBitmap(std::mt19937_64& rng, uint64_t rows, double ones) {
  std::vector<uint8_t> out(BitmapBytes(rows) + 1);
  for (auto& b : out) b = uint8_t(rng());
  std::bernoulli_distribution bit(ones);
  for (uint64_t i = 0; i < rows; ++i) {
    const uint8_t m = uint8_t(1u << (i % 8));
    out[i / 8] = bit(rng) ? (out[i / 8] | m) : (out[i / 8] & ~m);
  }
  return out;
}

// A random column of `type`: `null_fraction` of its rows null (0: no bitmap);
// strings mostly short, a quarter empty, and with `long_strings` a few of up to
// 3000 bytes.
SourceColumn RandomColumn(std::mt19937_64& rng, ColumnType type, uint64_t rows,
                          double null_fraction, bool long_strings) {
  SourceColumn c;
  c.type = type;
  c.rows = rows;
  if (null_fraction > 0) c.validity = RandomBitmap(rng, rows, 1.0 - null_fraction);
  if (type == ColumnType::kBool) {
    for (uint8_t b : RandomBitmap(rng, rows, 0.5)) c.data.push_back(std::byte{b});
    return c;
  }
  if (!IsVariableWidth(type)) {
    c.data.resize(rows * ColumnWidth(type));
    for (auto& b : c.data) b = std::byte(rng());
    return c;
  }
  const size_t first = rng() % 17;  // offsets need not start at 0
  c.data.assign(first, std::byte{'#'});
  c.offsets.push_back(first);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t pick = rng() % 1000;
    size_t len = 0;
    if (pick < 250) {
      len = 0;
    } else if (pick < 900) {
      len = 1 + rng() % 12;
    } else if (pick < 995 || !long_strings) {
      len = 13 + rng() % 100;
    } else {
      len = 200 + rng() % 2800;
    }
    for (size_t k = 0; k < len; ++k) c.data.push_back(std::byte('a' + rng() % 26));
    c.offsets.push_back(c.data.size());
  }
  for (int k = 0; k < 5; ++k) c.data.push_back(std::byte{'~'});  // bytes after the last value
  return c;
}

// One gathered output, owned, poisoned before a run.
struct Gathered {
  std::vector<std::byte> data;
  std::vector<uint8_t> validity;
  std::vector<uint32_t> offsets;
  std::string bytes = kPoisonString;
  uint64_t null_count = kPoison64;
  friend bool operator==(const Gathered&, const Gathered&) = default;

  // Sized and poisoned for `positions` output rows of a column of `type`.
  GatherOutput Prepare(uint32_t column, ColumnType type, uint64_t positions,
                       uint64_t max_string_bytes) {
    data.assign(IsVariableWidth(type)       ? 0
                : type == ColumnType::kBool ? BitmapBytes(positions)
                                            : positions * ColumnWidth(type),
                std::byte{kPoison8});
    validity.assign(BitmapBytes(positions), kPoison8);
    offsets.assign(IsVariableWidth(type) ? positions + 1 : 0, kPoison32);
    bytes = kPoisonString;
    null_count = kPoison64;
    GatherOutput out;
    out.column = column;
    out.data = data;
    out.validity = validity;
    out.offsets = offsets;
    out.string_bytes = IsVariableWidth(type) ? &bytes : nullptr;
    out.max_string_bytes = max_string_bytes;
    out.null_count = &null_count;
    return out;
  }

  // Output row i as a cell (fixed width: checks null rows hold zero bytes; kBool:
  // a 0 bit; strings: empty).
  Cell At(ColumnType type, uint64_t i) const {
    const bool valid = BitAt(validity, i);
    Cell c{valid, ""};
    if (type == ColumnType::kBool) {
      const bool bit =
          BitAt(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()), i);
      if (valid) c.bytes = std::string(1, char(bit));
      if (!valid && bit) c.bytes = "bool bit set on a null row";
    } else if (IsVariableWidth(type)) {
      const std::string s = bytes.substr(offsets[i], offsets[i + 1] - offsets[i]);
      if (valid) c.bytes = s;
      if (!valid && !s.empty()) c.bytes = "bytes on a null row";
    } else {
      const size_t w = ColumnWidth(type);
      const std::string s(reinterpret_cast<const char*>(data.data()) + i * w, w);
      if (valid) c.bytes = s;
      if (!valid && s != std::string(w, '\0')) c.bytes = "nonzero bytes on a null row";
    }
    return c;
  }
};

// The first difference between two byte-comparable vectors, for messages.
template <class T>
std::string FirstDifference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size())
    return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return "first at " + std::to_string(i);
  }
  return "none";
}

// The rows of a build as the model sees them: key, value and validity per
// global row.
template <KeyWord K>
struct SourceRows {
  std::vector<K> keys;
  std::vector<uint32_t> values;
  std::vector<bool> valid;  // not the reserved key and not masked out

  // Lowest valid row of each key (the payload winner of a build without
  // overflow), and of each (key, value) (the winner of a retained slot).
  std::unordered_map<K, uint64_t> FirstRow() const {
    std::unordered_map<K, uint64_t> first;
    for (uint64_t r = 0; r < keys.size(); ++r) {
      if (valid[r]) first.emplace(keys[r], r);
    }
    return first;
  }
  std::map<std::pair<K, uint32_t>, uint64_t> FirstRowOfValue() const {
    std::map<std::pair<K, uint32_t>, uint64_t> first;
    for (uint64_t r = 0; r < keys.size(); ++r) {
      if (valid[r]) first.emplace(std::pair{keys[r], values[r]}, r);
    }
    return first;
  }
};

class PayloadDifferential
    : public CudaVsCpuTest,
      public ::testing::WithParamInterface<std::tuple<CudaBuildPath, KeyType>> {
 protected:
  PayloadDifferential() : CudaVsCpuTest("CUDA-vs-CPU payload differential tests skipped") {}

  void SetUp() override {
    cuda_options_.cuda_build_path = std::get<0>(GetParam());
    CudaVsCpuTest::SetUp();
  }
  KeyType key_type() const { return std::get<1>(GetParam()); }

  std::unique_ptr<HashIndex> NewIndex(Backend& b, uint32_t capacity, uint32_t max_probe = 0) {
    auto index = b.CreateIndex(HashIndexSpec{capacity, max_probe, key_type()});
    EXPECT_TRUE(index.ok()) << index.status();
    return index.ok() ? std::move(*index) : nullptr;
  }

  void RunOk(Backend& b, const CommandGraph& g) {
    const absl::Status s = b.Run(g);
    ASSERT_TRUE(s.ok()) << BackendKindName(b.Info().kind) << ": " << s << " " << Seed();
  }

  // One column of every type (nullable ones with `null_fraction` nulls), the
  // string and binary columns with long strings, and a second string column
  // without nulls.
  std::vector<SourceColumn> EveryType(uint64_t rows, double null_fraction) {
    std::vector<SourceColumn> cols;
    bool nullable = rng_() % 2;
    for (ColumnType t : kAllTypes) {
      cols.push_back(RandomColumn(rng_, t, rows, nullable ? null_fraction : 0.0, true));
      nullable = !nullable;
    }
    cols.push_back(RandomColumn(rng_, ColumnType::kString, rows, 0.0, false));
    return cols;
  }

  static std::vector<ColumnView> Views(const std::vector<SourceColumn>& cols) {
    std::vector<ColumnView> v;
    for (const SourceColumn& c : cols) v.push_back(c.View());
    return v;
  }

  // `n` keys: distinct ones with `duplicates` of the rows repeating an earlier
  // row's key (possibly in another chunk) and `reserved` of them the reserved key.
  template <KeyWord K>
  std::vector<K> BuildKeys(size_t n, double duplicates, double reserved) {
    std::vector<K> keys = DistinctKeysOf<K>(n);
    std::bernoulli_distribution dup(duplicates), res(reserved);
    for (size_t i = 1; i < n; ++i) {
      if (dup(rng_)) keys[i] = keys[rng_() % i];
      if (res(rng_)) keys[i] = kEmptyKeyOf<K>;
    }
    return keys;
  }

  // Query keys: random build keys (hits unless reserved) or fresh random ones
  // (almost always misses), even odds.
  template <KeyWord K>
  std::vector<K> Queries(const std::vector<K>& keys, size_t n) {
    std::vector<K> q(n);
    for (auto& x : q) x = rng_() % 2 ? keys[rng_() % keys.size()] : K(rng_());
    return q;
  }

  // Both indexes built with `payload` by a plain build node (explicit values
  // when given, else first_value + row); build statistics compared.
  template <KeyWord K>
  void BuildPlain(HashIndex& cpu_index, HashIndex& gpu_index, const std::vector<K>& keys,
                  const std::vector<uint32_t>* values, uint32_t first_value,
                  const std::vector<SourceColumn>& payload) {
    BuildStatistics stats[2];
    int k = 0;
    const Chunked<K> chunks = RandomChunks(keys);
    std::optional<ChunkedU32> value_chunks;
    if (values != nullptr) value_chunks = RandomChunks(*values);
    for (auto [b, idx] : {std::pair{cpu_.get(), &cpu_index}, std::pair{cuda_.get(), &gpu_index}}) {
      BuildIndexNodeT<K> node;
      node.index = idx;
      node.keys = chunks;
      node.values = value_chunks;
      node.first_value = first_value;
      node.statistics = &stats[k++];
      node.payload = Views(payload);
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
    ExpectSameBuild<K>(cpu_index, gpu_index, stats[0], stats[1], payload);
  }

  // The model rows of a plain build.
  template <KeyWord K>
  static SourceRows<K> PlainRows(const std::vector<K>& keys, const std::vector<uint32_t>* values,
                                 uint32_t first_value) {
    SourceRows<K> rows;
    rows.keys = keys;
    for (size_t r = 0; r < keys.size(); ++r) {
      rows.values.push_back(values != nullptr ? (*values)[r] : first_value + uint32_t(r));
      rows.valid.push_back(keys[r] != kEmptyKeyOf<K>);
    }
    return rows;
  }

  // Without overflow: the same statistics, the same table layout, the same
  // payload infos (for capacities of at least 4 slots, where both backends store
  // the same slots). Always: memory_bytes = the table + the payload.
  template <KeyWord K>
  void ExpectSameBuild(const HashIndex& cpu_index, const HashIndex& gpu_index,
                       const BuildStatistics& cpu_stats, const BuildStatistics& gpu_stats,
                       const std::vector<SourceColumn>& payload) {
    EXPECT_EQ(gpu_stats.invalid_rows, cpu_stats.invalid_rows) << Seed();
    if (cpu_stats.overflow_rows == 0) {
      // With duplicate keys total_probes may differ: a duplicate row counts
      // where it met its key, which the CPU's in-order insert and the GPU's
      // parallel one place differently (docs/engine.md; gpu_differential_tests
      // bounds it). Every other statistic is exact.
      BuildStatistics gpu_cmp = gpu_stats;
      if (cpu_stats.duplicate_rows > 0) gpu_cmp.total_probes = cpu_stats.total_probes;
      EXPECT_EQ(gpu_cmp, cpu_stats) << Seed();
      auto a = cpu_index.SnapshotAs<K>(), b = gpu_index.SnapshotAs<K>();
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_TRUE(a->keys == b->keys && a->values == b->values)
          << "table layouts differ " << Seed();
      if (cpu_index.spec().capacity >= 4) {
        // The same infos but for the CUDA records' padding.
        std::vector<PayloadColumnInfo> want = cpu_index.payload();
        size_t padded = 0;
        const uint64_t padding =
            CudaRecordPadding(TypesOf(payload), StoredSlots(gpu_index), &padded);
        if (padded < want.size()) want[padded].bytes += padding;
        EXPECT_EQ(gpu_index.payload(), want) << Seed();
      }
    }
    ExpectPayloadBytes(cpu_index, *cpu_, payload);
    ExpectPayloadBytes(gpu_index, *cuda_, payload);
  }

  static std::vector<ColumnType> TypesOf(const std::vector<SourceColumn>& payload) {
    std::vector<ColumnType> types;
    for (const SourceColumn& c : payload) types.push_back(c.type);
    return types;
  }

  // The payload infos' types and bytes (PayloadStorageBytes of the backend's
  // slots with the retained bytes, on CUDA the records' padding on the last
  // fixed-width column; at most what PayloadBytes reserves, exactly that without
  // strings) and the index's memory_bytes.
  void ExpectPayloadBytes(const HashIndex& index, const Backend& backend,
                          const std::vector<SourceColumn>& payload) {
    const uint64_t slots = StoredSlots(index);
    ASSERT_EQ(index.payload().size(), payload.size()) << Seed();
    size_t padded = payload.size();
    const uint64_t padding = index.backend() == BackendKind::kCuda
                                 ? CudaRecordPadding(TypesOf(payload), slots, &padded)
                                 : 0;
    uint64_t sum = 0;
    bool strings = false;
    std::vector<PayloadShape> shapes;
    for (size_t c = 0; c < payload.size(); ++c) {
      const PayloadColumnInfo& info = index.payload()[c];
      PayloadShape shape = PayloadShapeOf(payload[c].View());
      shapes.push_back(shape);
      strings |= IsVariableWidth(shape.type);
      EXPECT_EQ(info.type, payload[c].type) << "column " << c;
      const uint64_t pad = c == padded ? padding : 0;
      const uint64_t fixed =
          PayloadStorageBytes(slots, PayloadShape{shape.type, shape.nullable, 0}) + pad;
      EXPECT_GE(info.bytes, fixed) << "column " << c;
      if (!IsVariableWidth(shape.type)) EXPECT_EQ(info.bytes, fixed) << "column " << c;
      EXPECT_LE(info.bytes, PayloadStorageBytes(slots, shape) + pad) << "column " << c;
      sum += info.bytes;
    }
    EXPECT_LE(sum, backend.PayloadBytes(index.spec(), shapes, index.built_rows()));
    if (!strings) EXPECT_EQ(sum, backend.PayloadBytes(index.spec(), shapes, index.built_rows()));
    EXPECT_EQ(index.memory_bytes(), backend.IndexBytes(index.spec()) + sum)
        << BackendKindName(index.backend());
  }

  // Checks `index`'s payload against the model of its own table: each
  // retained key's gathered row is the lowest valid row with the slot's key and
  // value, and each column's null count is the retained keys whose winner is
  // null. Looks up every retained key.
  template <KeyWord K>
  void ExpectPayloadFollowsTable(Backend& b, const HashIndex& index, const SourceRows<K>& rows,
                                 const std::vector<SourceColumn>& payload) {
    auto snap = index.SnapshotAs<K>();
    ASSERT_TRUE(snap.ok());
    std::vector<K> keys;
    std::vector<uint32_t> values;
    for (size_t s = 0; s < snap->keys.size(); ++s) {
      if (snap->keys[s] == kEmptyKeyOf<K>) continue;
      keys.push_back(snap->keys[s]);
      values.push_back(snap->values[s]);
    }
    const auto first = rows.FirstRowOfValue();
    std::vector<uint64_t> winner(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = first.find({keys[i], values[i]});
      ASSERT_NE(it, first.end()) << "retained key without a source row " << Seed();
      winner[i] = it->second;
    }
    for (size_t c = 0; c < payload.size(); ++c) {
      uint64_t nulls = 0;
      for (uint64_t w : winner) nulls += !payload[c].At(w).valid;
      EXPECT_EQ(index.payload()[c].null_count, nulls)
          << BackendKindName(index.backend()) << " column " << c << " " << Seed();
    }
    std::vector<Gathered> out(payload.size());
    std::vector<uint32_t> got_values(keys.size(), kPoison32);
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = Chunked<K>{std::span<const K>(keys)};
    node.values = got_values;
    for (size_t c = 0; c < payload.size(); ++c) {
      node.gather.push_back(out[c].Prepare(uint32_t(c), payload[c].type, keys.size(), 0x7fffffff));
    }
    CommandGraph g;
    g.Add(node);
    RunOk(b, g);
    EXPECT_EQ(got_values, values) << Seed();
    for (size_t c = 0; c < payload.size(); ++c) {
      size_t wrong = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        wrong += out[c].At(payload[c].type, i) != payload[c].At(winner[i]);
      }
      EXPECT_EQ(wrong, 0u) << BackendKindName(index.backend()) << " column " << c << " ("
                           << ColumnTypeName(payload[c].type) << ") " << Seed();
    }
  }

  // Lookups of `queries` gathering `columns` (indexes into the payload, repeats
  // allowed) on both backends: every output byte equal, and the CPU's gathers
  // equal to the model (winner = `first` row of the key, or null).
  template <KeyWord K>
  void LookupAndCompare(const HashIndex& cpu_index, const HashIndex& gpu_index,
                        const std::vector<K>& queries, const std::vector<SourceColumn>& payload,
                        const std::vector<uint32_t>& columns,
                        const std::unordered_map<K, uint64_t>* first) {
    const Chunked<K> chunks = RandomChunks(queries);
    const size_t n = queries.size();
    struct Out {
      std::vector<uint32_t> values, probes;
      std::vector<uint8_t> found;
      QueryStatistics stats{1, 2, 3, 4};
      std::vector<Gathered> gathered;
    } out[2];
    int k = 0;
    for (auto [b, idx] : {std::pair{cpu_.get(), &cpu_index}, std::pair{cuda_.get(), &gpu_index}}) {
      Out& o = out[k++];
      o.values.assign(n, kPoison32);
      o.probes.assign(n, kPoison32);
      o.found.assign(n, kPoison8);
      o.gathered.resize(columns.size());
      LookupNodeT<K> node;
      node.index = idx;
      node.keys = chunks;
      node.values = o.values;
      node.found = o.found;
      node.probes = o.probes;
      node.statistics = &o.stats;
      for (size_t g = 0; g < columns.size(); ++g) {
        node.gather.push_back(
            o.gathered[g].Prepare(columns[g], payload[columns[g]].type, n, 0x7fffffff));
      }
      CommandGraph graph;
      graph.Add(node);
      RunOk(*b, graph);
    }
    EXPECT_EQ(out[1].values, out[0].values) << Seed();
    EXPECT_EQ(out[1].found, out[0].found) << Seed();
    EXPECT_EQ(out[1].probes, out[0].probes) << Seed();
    EXPECT_EQ(out[1].stats, out[0].stats) << Seed();
    for (size_t g = 0; g < columns.size(); ++g) {
      const Gathered &c = out[0].gathered[g], &d = out[1].gathered[g];
      const std::string what = "gather " + std::to_string(g) + " (column " +
                               std::to_string(columns[g]) + ", " +
                               std::string(ColumnTypeName(payload[columns[g]].type)) + ") ";
      EXPECT_TRUE(c.data == d.data)
          << what << "data: " << FirstDifference(c.data, d.data) << Seed();
      EXPECT_TRUE(c.validity == d.validity)
          << what << "validity: " << FirstDifference(c.validity, d.validity) << Seed();
      EXPECT_TRUE(c.offsets == d.offsets)
          << what << "offsets: " << FirstDifference(c.offsets, d.offsets) << Seed();
      EXPECT_TRUE(c.bytes == d.bytes) << what << "string bytes: " << c.bytes.size() << " vs "
                                      << d.bytes.size() << " " << Seed();
      EXPECT_EQ(c.null_count, d.null_count) << what << Seed();
      if (first == nullptr) continue;
      const SourceColumn& src = payload[columns[g]];
      size_t wrong = 0;
      uint64_t nulls = 0;
      for (size_t i = 0; i < n; ++i) {
        const auto it = queries[i] == kEmptyKeyOf<K> ? first->end() : first->find(queries[i]);
        const Cell want = it == first->end() ? Cell{} : src.At(it->second);
        wrong += c.At(src.type, i) != want;
        nulls += !want.valid;
      }
      EXPECT_EQ(wrong, 0u) << what << "rows differ from the model " << Seed();
      EXPECT_EQ(c.null_count, nulls) << what << Seed();
    }
  }

  // One join batch of `queries` with `capacity` pairs gathering `columns` on
  // both backends: the same result, pairs and gathered bytes, and the CPU's
  // gathers per written pair equal to the model (winner = `first` row of the key).
  template <KeyWord K>
  void JoinAndCompare(HashIndex& cpu_index, HashIndex& gpu_index, const std::vector<K>& queries,
                      const std::vector<SourceColumn>& payload,
                      const std::vector<uint32_t>& columns, size_t capacity,
                      const std::unordered_map<K, uint64_t>& first) {
    struct Out {
      std::vector<uint32_t> l, r;
      JoinResult result{kPoison64, true, {}};
      std::vector<Gathered> gathered;
    } out[2];
    const Chunked<K> chunks = RandomChunks(queries);
    int k = 0;
    for (auto [b, idx] : {std::pair{cpu_.get(), &cpu_index}, std::pair{cuda_.get(), &gpu_index}}) {
      Out& o = out[k++];
      o.l.assign(capacity, kPoison32);
      o.r.assign(capacity, kPoison32);
      o.gathered.resize(columns.size());
      JoinBatchT<K> batch;
      batch.keys = chunks;
      batch.out_left_rows = o.l;
      batch.out_right_rows = o.r;
      batch.result = &o.result;
      for (size_t g = 0; g < columns.size(); ++g) {
        batch.gather.push_back(
            o.gathered[g].Prepare(columns[g], payload[columns[g]].type, capacity, 0x7fffffff));
      }
      JoinNodeT<K> node;
      node.index = idx;
      node.batches.push_back(std::move(batch));
      CommandGraph graph;
      graph.Add(node);
      RunOk(*b, graph);
    }
    EXPECT_EQ(out[1].result.count, out[0].result.count) << Seed();
    EXPECT_EQ(out[1].result.statistics, out[0].result.statistics) << Seed();
    EXPECT_EQ(out[1].l, out[0].l) << Seed();
    EXPECT_EQ(out[1].r, out[0].r) << Seed();
    const uint64_t written = std::min<uint64_t>(out[0].result.count, capacity);
    for (size_t g = 0; g < columns.size(); ++g) {
      const Gathered &c = out[0].gathered[g], &d = out[1].gathered[g];
      const SourceColumn& src = payload[columns[g]];
      const std::string what = "gather " + std::to_string(g) + " (column " +
                               std::to_string(columns[g]) + ", " +
                               std::string(ColumnTypeName(src.type)) + ") ";
      EXPECT_TRUE(c == d) << what << "data " << FirstDifference(c.data, d.data) << ", validity "
                          << FirstDifference(c.validity, d.validity) << ", null counts "
                          << c.null_count << " vs " << d.null_count << " " << Seed();
      size_t wrong = 0;
      for (uint64_t p = 0; p < written; ++p) {
        wrong += c.At(src.type, p) != src.At(first.at(queries[out[0].l[p]]));
      }
      EXPECT_EQ(wrong, 0u) << what << "pairs differ from the model " << Seed();
    }
  }

  // Builds with every column type, looks up with every column gathered: with
  // no `sizes`, rows + 77 keys, then 1000 keys gathering a subset in another
  // order with a repeat; else one lookup of every column per size, in turn on
  // the one index (outputs poisoned each time, so stale bytes of the lookup
  // before cannot pass).
  template <KeyWord K>
  void LookupEveryType(size_t rows, uint32_t capacity, bool explicit_values,
                       std::initializer_list<size_t> sizes = {}) {
    const std::vector<K> keys = BuildKeys<K>(rows, 0.3, 0.02);
    std::vector<uint32_t> values(rows);
    for (auto& v : values) v = uint32_t(rng_());
    const std::vector<SourceColumn> payload = EveryType(rows, 0.3);
    auto cpu_index = NewIndex(*cpu_, capacity);
    auto gpu_index = NewIndex(*cuda_, capacity);
    ASSERT_TRUE(cpu_index && gpu_index);
    const uint32_t first_value = uint32_t(rng_());
    BuildPlain<K>(*cpu_index, *gpu_index, keys, explicit_values ? &values : nullptr, first_value,
                  payload);
    if (HasFailure()) return;
    const auto first =
        PlainRows<K>(keys, explicit_values ? &values : nullptr, first_value).FirstRow();
    std::vector<uint32_t> all;
    for (uint32_t c = 0; c < payload.size(); ++c) all.push_back(c);
    for (size_t n : sizes) {
      SCOPED_TRACE("lookup of " + std::to_string(n) + " keys");
      LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, n), payload, all, &first);
      if (HasFailure()) return;
    }
    if (sizes.size() != 0) return;
    LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, rows + 77), payload, all, &first);
    LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, 1000), payload,
                        {8, 3, 8, uint32_t(payload.size() - 1)}, &first);
  }
};

TEST_P(PayloadDifferential, LookupGathersEveryTypeLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    for (bool explicit_values : {false, true}) {
      SCOPED_TRACE(explicit_values ? "explicit values" : "generated values");
      LookupEveryType<K>(5000, 8192, explicit_values);
      if (HasFailure()) return;
    }
  });
}

// Small lookups, whose outputs come down in one wait through the staging
// buffer, and one too large for it (piece by piece), each after the other.
TEST_P(PayloadDifferential, LookupsOfChangingSizesLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    LookupEveryType<K>(6000, 16384, false, {100, 1, 300000, 2, 4097});
  });
}

TEST_P(PayloadDifferential, FullTableAndTinyTablesLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    for (auto [rows, capacity] :
         {std::pair{size_t{1}, 1u}, std::pair{size_t{3}, 2u}, std::pair{size_t{9}, 4u},
          std::pair{size_t{40}, 32u}, std::pair{size_t{6000}, 4096u}}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", capacity " + std::to_string(capacity));
      // Distinct keys at most the capacity (a full table, no overflow).
      std::vector<K> keys = DistinctKeysOf<K>(std::min<size_t>(rows, capacity));
      while (keys.size() < rows) keys.push_back(keys[rng_() % keys.size()]);
      std::shuffle(keys.begin() + 1, keys.end(), rng_);
      const std::vector<SourceColumn> payload = EveryType(rows, 0.5);
      auto cpu_index = NewIndex(*cpu_, capacity);
      auto gpu_index = NewIndex(*cuda_, capacity);
      ASSERT_TRUE(cpu_index && gpu_index);
      BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 7, payload);
      if (HasFailure()) return;
      const auto first = PlainRows<K>(keys, nullptr, 7).FirstRow();
      std::vector<uint32_t> all;
      for (uint32_t c = 0; c < payload.size(); ++c) all.push_back(c);
      LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, rows + 5), payload, all, &first);
      if (HasFailure()) return;
    }
  });
}

// The CUDA backend keeps the fixed-width columns of a build in one record per
// slot, which a gather reads once for all of them: records padded to 16 bytes
// (three 4-byte values; an 8- and a 4-byte value beside a bool and a string), a
// column alone, a 128-byte record whose gathers span more than one 64-byte
// window and take three launches, and random mixes of more than a launch's
// columns with a bool among them. Every column, random selections (any order,
// repeats) and each column alone, in lookups and joins (one truncated), like
// the CPU.
TEST_P(PayloadDifferential, FixedWidthColumnsShareOneRecordLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    using T = ColumnType;
    std::vector<std::vector<ColumnType>> layouts = {{T::kInt32, T::kUint32, T::kFloat32},
                                                    {T::kFloat64, T::kBool, T::kInt32, T::kString},
                                                    {T::kUint64}};
    std::vector<ColumnType> wide(17, T::kInt32);  // and an 8-byte value: 76 bytes
    wide.insert(wide.begin() + 5, T::kUint64);
    layouts.push_back(wide);
    for (int m = 0; m < 2; ++m) {
      std::vector<ColumnType> mixed;
      for (int c = 0; c < 11; ++c) mixed.push_back(kAllTypes[rng_() % 6]);  // fixed width
      mixed.insert(mixed.begin() + 4, T::kBool);
      layouts.push_back(mixed);
    }
    for (const std::vector<ColumnType>& types : layouts) {
      std::string names;
      for (ColumnType t : types) names += std::string(ColumnTypeName(t)) + " ";
      SCOPED_TRACE("columns " + names);
      const size_t rows = 3000;
      const std::vector<K> keys = BuildKeys<K>(rows, 0.3, 0.02);
      std::vector<SourceColumn> payload;
      for (ColumnType t : types) {
        payload.push_back(RandomColumn(rng_, t, rows, rng_() % 2 ? 0.3 : 0.0, false));
      }
      auto cpu_index = NewIndex(*cpu_, 4096);
      auto gpu_index = NewIndex(*cuda_, 4096);
      ASSERT_TRUE(cpu_index && gpu_index);
      BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 5, payload);
      if (HasFailure()) return;
      const auto first = PlainRows<K>(keys, nullptr, 5).FirstRow();
      const uint32_t n = uint32_t(payload.size());
      std::vector<std::vector<uint32_t>> selections(1);
      for (uint32_t c = 0; c < n; ++c) selections[0].push_back(c);
      for (int r = 0; r < 3; ++r) {
        std::vector<uint32_t> pick(1 + rng_() % 12);
        for (auto& c : pick) c = uint32_t(rng_() % n);
        selections.push_back(pick);
      }
      for (uint32_t c = 0; c < n; ++c) selections.push_back({c});
      for (const std::vector<uint32_t>& columns : selections) {
        LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, 1500), payload, columns, &first);
        if (HasFailure()) return;
      }
      JoinAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, 2000), payload, selections[0], 2000,
                        first);
      JoinAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, 2000), payload, selections[1], 300,
                        first);
      if (HasFailure()) return;
    }
  });
}

TEST_P(PayloadDifferential, BatchBuildWithMasksLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    // Chunks with and without masks, an empty one, keys repeated across chunks.
    std::vector<std::vector<K>> chunk_keys;
    std::vector<std::vector<uint32_t>> masks;
    std::vector<uint32_t> bases;
    std::vector<K> pool = DistinctKeysOf<K>(3000);
    SourceRows<K> model;
    for (int c = 0; c < 6; ++c) {
      const size_t n = c == 2 ? 0 : 200 + rng_() % 1500;
      std::vector<K> keys(n);
      for (auto& k : keys) k = rng_() % 50 == 0 ? kEmptyKeyOf<K> : pool[rng_() % pool.size()];
      std::vector<uint32_t> mask;
      if (c % 2 == 1) {
        mask.resize(n);
        for (auto& m : mask) m = rng_() % 4 == 0 ? 0u : uint32_t(rng_() | 1);
      }
      const uint32_t base = uint32_t(rng_());
      for (size_t i = 0; i < n; ++i) {
        model.keys.push_back(keys[i]);
        model.values.push_back(base + uint32_t(i));
        model.valid.push_back(keys[i] != kEmptyKeyOf<K> && (mask.empty() || mask[i] != 0));
      }
      chunk_keys.push_back(std::move(keys));
      masks.push_back(std::move(mask));
      bases.push_back(base);
    }
    const uint64_t rows = model.keys.size();
    const std::vector<SourceColumn> payload = EveryType(rows, 0.25);
    auto cpu_index = NewIndex(*cpu_, 8192);
    auto gpu_index = NewIndex(*cuda_, 8192);
    ASSERT_TRUE(cpu_index && gpu_index);
    BuildStatistics stats[2];
    int k = 0;
    for (auto [b, idx] :
         {std::pair{cpu_.get(), cpu_index.get()}, std::pair{cuda_.get(), gpu_index.get()}}) {
      BuildBatchIndexNodeT<K> node;
      node.index = idx;
      for (size_t c = 0; c < chunk_keys.size(); ++c) {
        node.chunks.push_back(BatchChunkT<K>{chunk_keys[c], bases[c], masks[c]});
      }
      node.statistics = &stats[k++];
      node.payload = Views(payload);
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
    ExpectSameBuild<K>(*cpu_index, *gpu_index, stats[0], stats[1], payload);
    if (HasFailure()) return;
    const auto first = model.FirstRow();
    std::vector<uint32_t> all;
    for (uint32_t c = 0; c < payload.size(); ++c) all.push_back(c);
    LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(pool, 3000), payload, all, &first);
    ExpectPayloadFollowsTable<K>(*cuda_, *gpu_index, model, payload);
  });
}

// Joins gathering payload per pair: a batch with room for every pair, a
// truncated one, a count-only one (capacity 0: no gather output written), an
// empty batch with capacity and one with explicit left rows; every output's
// tail past the written pairs stays poisoned on both.
TEST_P(PayloadDifferential, JoinGathersPerPairLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const size_t rows = 4000;
    const std::vector<K> keys = BuildKeys<K>(rows, 0.3, 0.01);
    const std::vector<SourceColumn> payload = EveryType(rows, 0.3);
    auto cpu_index = NewIndex(*cpu_, 8192);
    auto gpu_index = NewIndex(*cuda_, 8192);
    ASSERT_TRUE(cpu_index && gpu_index);
    BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 1000, payload);
    if (HasFailure()) return;
    const auto first = PlainRows<K>(keys, nullptr, 1000).FirstRow();
    std::vector<std::vector<K>> left;
    for (size_t n : {size_t{3001}, size_t{2500}, size_t{900}, size_t{0}, size_t{777}}) {
      left.push_back(Queries(keys, n));
    }
    std::vector<uint32_t> left_rows(left[4].size());
    for (auto& r : left_rows) r = uint32_t(rng_());
    // Capacity: all (left rows), about half the matches, 0, some, all.
    const size_t capacity[] = {left[0].size(), 700, 0, 16, left[4].size()};
    std::vector<uint32_t> columns = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8};
    struct Out {
      std::vector<std::vector<uint32_t>> l, r, probes;
      std::vector<std::vector<uint8_t>> found;
      std::vector<JoinResult> results;
      std::vector<std::vector<Gathered>> gathered;
    } out[2];
    int k = 0;
    for (auto [b, idx] :
         {std::pair{cpu_.get(), cpu_index.get()}, std::pair{cuda_.get(), gpu_index.get()}}) {
      Out& o = out[k++];
      const size_t nb = left.size();
      o.l.resize(nb);
      o.r.resize(nb);
      o.probes.resize(nb);
      o.found.resize(nb);
      o.results.assign(nb, JoinResult{kPoison64, true, {}});
      o.gathered.resize(nb);
      JoinNodeT<K> node;
      node.index = idx;
      for (size_t j = 0; j < nb; ++j) {
        o.l[j].assign(capacity[j], kPoison32);
        o.r[j].assign(capacity[j], kPoison32);
        o.probes[j].assign(left[j].size(), kPoison32);
        o.found[j].assign(left[j].size(), kPoison8);
        o.gathered[j].resize(columns.size());
        JoinBatchT<K> batch;
        batch.keys = RandomChunks(left[j]);
        if (j == 4) batch.left_rows = left_rows;
        batch.first_left_row = uint32_t(j * 100000);
        batch.out_left_rows = o.l[j];
        batch.out_right_rows = o.r[j];
        batch.result = &o.results[j];
        batch.found = o.found[j];
        batch.probes = o.probes[j];
        for (size_t g = 0; g < columns.size(); ++g) {
          batch.gather.push_back(o.gathered[j][g].Prepare(columns[g], payload[columns[g]].type,
                                                          capacity[j], 0x7fffffff));
        }
        node.batches.push_back(std::move(batch));
      }
      CommandGraph graph;
      graph.Add(node);
      RunOk(*b, graph);
    }
    for (size_t j = 0; j < left.size(); ++j) {
      SCOPED_TRACE("batch " + std::to_string(j));
      EXPECT_EQ(out[1].results[j].count, out[0].results[j].count) << Seed();
      EXPECT_EQ(out[1].results[j].overflow, out[0].results[j].overflow) << Seed();
      EXPECT_EQ(out[1].results[j].statistics, out[0].results[j].statistics) << Seed();
      EXPECT_EQ(out[1].l[j], out[0].l[j]) << Seed();
      EXPECT_EQ(out[1].r[j], out[0].r[j]) << Seed();
      EXPECT_EQ(out[1].found[j], out[0].found[j]) << Seed();
      EXPECT_EQ(out[1].probes[j], out[0].probes[j]) << Seed();
      const uint64_t written = std::min<uint64_t>(out[0].results[j].count, capacity[j]);
      if (j == 1) EXPECT_LT(written, out[0].results[j].count) << "batch 1 is truncated";
      // The pairs' left rows name the matched query rows, in order.
      std::vector<size_t> pair_rows;
      for (size_t i = 0; i < left[j].size(); ++i) {
        if (first.count(left[j][i]) != 0 && left[j][i] != kEmptyKeyOf<K>) pair_rows.push_back(i);
      }
      ASSERT_EQ(pair_rows.size(), out[0].results[j].count) << Seed();
      for (size_t g = 0; g < columns.size(); ++g) {
        const Gathered &c = out[0].gathered[j][g], &d = out[1].gathered[j][g];
        const SourceColumn& src = payload[columns[g]];
        const std::string what =
            "gather " + std::to_string(g) + " (" + std::string(ColumnTypeName(src.type)) + ") ";
        EXPECT_TRUE(c == d) << what << "data " << FirstDifference(c.data, d.data) << ", validity "
                            << FirstDifference(c.validity, d.validity) << ", offsets "
                            << FirstDifference(c.offsets, d.offsets) << ", null counts "
                            << c.null_count << " vs " << d.null_count << " " << Seed();
        if (capacity[j] == 0) {
          // Count only: nothing written.
          EXPECT_EQ(c.null_count, kPoison64) << what;
          EXPECT_EQ(c.bytes, kPoisonString) << what;
          if (IsVariableWidth(src.type)) EXPECT_EQ(c.offsets.at(0), kPoison32) << what;
          continue;
        }
        uint64_t nulls = 0;
        size_t wrong = 0;
        for (uint64_t p = 0; p < written; ++p) {
          const Cell want = src.At(first.at(left[j][pair_rows[p]]));
          nulls += !want.valid;
          wrong += c.At(src.type, p) != want;
        }
        EXPECT_EQ(wrong, 0u) << what << "pairs differ from the model " << Seed();
        EXPECT_EQ(c.null_count, nulls) << what << Seed();
        // Past the written pairs: validity bytes after the last written byte, and
        // fixed-width values, stay poisoned.
        for (size_t byte = BitmapBytes(written); byte < c.validity.size(); ++byte) {
          ASSERT_EQ(c.validity[byte], kPoison8) << what << "validity byte " << byte;
        }
        if (!IsVariableWidth(src.type)) {
          const uint64_t end = src.type == ColumnType::kBool ? BitmapBytes(written)
                                                             : written * ColumnWidth(src.type);
          for (size_t byte = end; byte < c.data.size(); ++byte) {
            ASSERT_EQ(c.data[byte], std::byte{kPoison8}) << what << "data byte " << byte;
          }
        }
        if (IsVariableWidth(src.type)) {
          for (size_t i = written + 1; i < c.offsets.size(); ++i) {
            ASSERT_EQ(c.offsets[i], kPoison32) << what << "offset " << i;
          }
        }
      }
    }
  });
}

// A bound of 2 probes at a high load with duplicates and explicit values:
// keys are dropped, some come back with later rows. Which keys are retained may
// differ between backends; each backend's payload must follow its own table.
TEST_P(PayloadDifferential, OverflowKeepsPayloadConsistentWithTheTable) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const size_t rows = 7000;
    const std::vector<K> keys = BuildKeys<K>(rows, 0.4, 0.01);
    std::vector<uint32_t> values(rows);
    for (auto& v : values) v = uint32_t(rng_() % 64);  // repeats: a value may match an earlier row
    const std::vector<SourceColumn> payload = EveryType(rows, 0.3);
    auto cpu_index = NewIndex(*cpu_, 4096, 2);
    auto gpu_index = NewIndex(*cuda_, 4096, 2);
    ASSERT_TRUE(cpu_index && gpu_index);
    BuildPlain<K>(*cpu_index, *gpu_index, keys, &values, 0, payload);
    if (HasFailure()) return;
    ASSERT_GT(cpu_index->build_statistics().overflow_rows, 0u) << "the case must overflow";
    const SourceRows<K> model = PlainRows<K>(keys, &values, 0);
    ExpectPayloadFollowsTable<K>(*cpu_, *cpu_index, model, payload);
    ExpectPayloadFollowsTable<K>(*cuda_, *gpu_index, model, payload);
  });
}

// max_string_bytes below a gather's total: RESOURCE_EXHAUSTED naming both
// numbers, no gather output written; at the total it succeeds.
TEST_P(PayloadDifferential, StringLimitRefusesBeforeWritingLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const size_t rows = 3000;
    const std::vector<K> keys = BuildKeys<K>(rows, 0.2, 0.0);
    const std::vector<SourceColumn> payload = {
        RandomColumn(rng_, ColumnType::kString, rows, 0.2, true),
        RandomColumn(rng_, ColumnType::kInt64, rows, 0.0, false),
        RandomColumn(rng_, ColumnType::kBinary, rows, 0.0, false)};
    auto cpu_index = NewIndex(*cpu_, 8192);
    auto gpu_index = NewIndex(*cuda_, 8192);
    ASSERT_TRUE(cpu_index && gpu_index);
    BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 0, payload);
    if (HasFailure()) return;
    const std::vector<K> queries = Queries(keys, 2000);
    // The total, from an unlimited CPU lookup.
    uint64_t total = 0;
    {
      std::vector<uint32_t> values(queries.size());
      Gathered g;
      LookupNodeT<K> node;
      node.index = cpu_index.get();
      node.keys = Chunked<K>{std::span<const K>(queries)};
      node.values = values;
      node.gather.push_back(g.Prepare(0, ColumnType::kString, queries.size(), 0x7fffffff));
      CommandGraph graph;
      graph.Add(node);
      RunOk(*cpu_, graph);
      total = g.bytes.size();
    }
    ASSERT_GT(total, 0u);
    for (const uint64_t limit : {total - 1, total}) {
      SCOPED_TRACE("limit " + std::to_string(limit));
      for (auto [b, idx] :
           {std::pair{cpu_.get(), cpu_index.get()}, std::pair{cuda_.get(), gpu_index.get()}}) {
        std::vector<uint32_t> values(queries.size(), kPoison32);
        std::vector<Gathered> g(3);
        LookupNodeT<K> node;
        node.index = idx;
        node.keys = Chunked<K>{std::span<const K>(queries)};
        node.values = values;
        node.gather.push_back(g[0].Prepare(1, ColumnType::kInt64, queries.size(), 0x7fffffff));
        node.gather.push_back(g[1].Prepare(0, ColumnType::kString, queries.size(), limit));
        node.gather.push_back(g[2].Prepare(2, ColumnType::kBinary, queries.size(), 0x7fffffff));
        CommandGraph graph;
        graph.Add(node);
        const absl::Status s = b->Run(graph);
        const std::string name(BackendKindName(b->Info().kind));
        if (limit < total) {
          ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << name << ": " << s;
          EXPECT_NE(s.message().find(std::to_string(total)), std::string::npos) << s;
          EXPECT_NE(s.message().find(std::to_string(limit)), std::string::npos) << s;
          EXPECT_NE(s.message().find("gather[1]"), std::string::npos) << s;
          for (const Gathered& x : g) {
            EXPECT_EQ(x.null_count, kPoison64) << name;
            EXPECT_EQ(x.bytes, kPoisonString) << name;
            EXPECT_TRUE(std::all_of(x.validity.begin(), x.validity.end(), [](uint8_t v) {
              return v == kPoison8;
            })) << name;
            EXPECT_TRUE(std::all_of(x.data.begin(), x.data.end(), [](std::byte v) {
              return v == std::byte{kPoison8};
            })) << name;
          }
        } else {
          ASSERT_TRUE(s.ok()) << name << ": " << s;
          EXPECT_EQ(g[1].bytes.size(), total) << name;
        }
      }
      EXPECT_TRUE(cuda_->Healthy());
    }
  });
}

// A build without payload drops the last one (payload() empty, memory back to
// the table's, a gather refused by validation); a later build with other
// columns replaces it; an empty build with payload stores only empty slots, and
// a lookup of no rows writes empty gathers.
TEST_P(PayloadDifferential, RebuildsReplaceAndDropPayloadLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    auto cpu_index = NewIndex(*cpu_, 2048);
    auto gpu_index = NewIndex(*cuda_, 2048);
    ASSERT_TRUE(cpu_index && gpu_index);
    std::vector<K> keys = BuildKeys<K>(1500, 0.2, 0.0);
    const std::vector<SourceColumn> first_payload = EveryType(keys.size(), 0.2);
    BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 0, first_payload);
    if (HasFailure()) return;
    // Without payload.
    BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 0, {});
    if (HasFailure()) return;
    for (auto [b, idx] :
         {std::pair{cpu_.get(), cpu_index.get()}, std::pair{cuda_.get(), gpu_index.get()}}) {
      EXPECT_TRUE(idx->payload().empty());
      EXPECT_EQ(idx->memory_bytes(), b->IndexBytes(idx->spec()));
      std::vector<uint32_t> values(4);
      Gathered g;
      LookupNodeT<K> node;
      node.index = idx;
      node.keys = Chunked<K>{std::span<const K>(keys.data(), 4)};
      node.values = values;
      node.gather.push_back(g.Prepare(0, ColumnType::kInt32, 4, 0x7fffffff));
      CommandGraph graph;
      graph.Add(node);
      EXPECT_EQ(b->Run(graph).code(), absl::StatusCode::kInvalidArgument);
    }
    // Other keys and other columns.
    keys = BuildKeys<K>(1800, 0.3, 0.05);
    std::vector<SourceColumn> second_payload = {
        RandomColumn(rng_, ColumnType::kBool, keys.size(), 0.5, false),
        RandomColumn(rng_, ColumnType::kString, keys.size(), 0.0, true)};
    BuildPlain<K>(*cpu_index, *gpu_index, keys, nullptr, 5, second_payload);
    if (HasFailure()) return;
    const auto first = PlainRows<K>(keys, nullptr, 5).FirstRow();
    LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, 2000), second_payload, {1, 0},
                        &first);
    // Empty build with payload: every query is null.
    const std::vector<K> none;
    second_payload = {RandomColumn(rng_, ColumnType::kFloat64, 0, 0.5, false),
                      RandomColumn(rng_, ColumnType::kString, 0, 0.5, false)};
    BuildPlain<K>(*cpu_index, *gpu_index, none, nullptr, 0, second_payload);
    if (HasFailure()) return;
    EXPECT_EQ(gpu_index->payload()[0].null_count, 0u);
    const std::unordered_map<K, uint64_t> nothing;
    LookupAndCompare<K>(*cpu_index, *gpu_index, Queries(keys, 300), second_payload, {0, 1},
                        &nothing);
    LookupAndCompare<K>(*cpu_index, *gpu_index, none, second_payload, {0, 1}, &nothing);
  });
}

// A build and a lookup that gathers from it in one graph.
TEST_P(PayloadDifferential, BuildAndGatherInOneGraphLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const std::vector<K> keys = BuildKeys<K>(2000, 0.3, 0.01);
    const std::vector<SourceColumn> payload = EveryType(keys.size(), 0.3);
    const std::vector<K> queries = Queries(keys, 2500);
    auto cpu_index = NewIndex(*cpu_, 4096);
    auto gpu_index = NewIndex(*cuda_, 4096);
    ASSERT_TRUE(cpu_index && gpu_index);
    std::vector<Gathered> out[2];
    std::vector<uint32_t> values[2];
    int k = 0;
    for (auto [b, idx] :
         {std::pair{cpu_.get(), cpu_index.get()}, std::pair{cuda_.get(), gpu_index.get()}}) {
      BuildIndexNodeT<K> build;
      build.index = idx;
      build.keys = Chunked<K>{std::span<const K>(keys)};
      build.payload = Views(payload);
      LookupNodeT<K> lookup;
      lookup.index = idx;
      lookup.keys = Chunked<K>{std::span<const K>(queries)};
      values[k].assign(queries.size(), kPoison32);
      lookup.values = values[k];
      out[k].resize(payload.size());
      for (uint32_t c = 0; c < payload.size(); ++c) {
        lookup.gather.push_back(out[k][c].Prepare(c, payload[c].type, queries.size(), 0x7fffffff));
      }
      CommandGraph graph;
      graph.Add(build);
      graph.Add(lookup);
      RunOk(*b, graph);
      ++k;
    }
    EXPECT_EQ(values[1], values[0]);
    for (size_t c = 0; c < payload.size(); ++c) {
      EXPECT_TRUE(out[1][c] == out[0][c]) << "column " << c << " " << Seed();
    }
  });
}

// The CUDA backend's build transient memory counts the payload's uploads and
// scratch: more than without, growing with the columns.
TEST_P(PayloadDifferential, BuildTransientBytesCountThePayload) {
  const HashIndexSpec spec{1u << 16, 0, key_type()};
  BuildShape shape;
  shape.rows = 40000;
  shape.key_type = key_type();
  const uint64_t plain = cuda_->BuildTransientBytes(spec, shape);
  shape.payload.push_back(PayloadShape{ColumnType::kInt64, false, 0});
  const uint64_t one = cuda_->BuildTransientBytes(spec, shape);
  shape.payload.push_back(PayloadShape{ColumnType::kString, true, 64u << 20});
  const uint64_t two = cuda_->BuildTransientBytes(spec, shape);
  EXPECT_GT(one, plain + shape.rows * 8);
  EXPECT_GT(two, one + (64u << 20));
  shape.rows = 0;
  shape.payload = {PayloadShape{ColumnType::kInt32, false, 0}};
  EXPECT_GT(cuda_->BuildTransientBytes(spec, shape), 0u);
  EXPECT_EQ(cuda_->PayloadBytes(spec, shape.payload, shape.rows), uint64_t{4} << 16);
}

// Payload larger than the device: the build fails with RESOURCE_EXHAUSTED, the
// index keeps no payload (payload() empty, memory_bytes the table's), the
// backend stays healthy, and the same index then builds and gathers a small
// payload. Stored columns take slots * 8 bytes whatever the rows, so one row
// and enough int64 columns exhaust the device. (Not in the sanitizer runs: the
// kernels span the whole device.)
class PayloadDeviceMemory : public CudaVsCpuTest {
 protected:
  PayloadDeviceMemory() : CudaVsCpuTest("CUDA payload memory test skipped") {}
};

TEST_F(PayloadDeviceMemory, ExhaustedDeviceMemoryFailsTheBuildAndLeavesNoPayload) {
  const uint64_t free_bytes = cuda_->Info().memory_free_bytes;
  // The largest table of at most an eighth of the free memory.
  uint32_t capacity = 1u << 31;
  while (capacity > (1u << 20) && uint64_t{capacity} * 8 > free_bytes / 8) capacity /= 2;
  const uint64_t columns = free_bytes / (uint64_t{capacity} * 8) + 2;
  auto index = cuda_->CreateIndex(HashIndexSpec{capacity, 0});
  ASSERT_TRUE(index.ok()) << index.status();
  const std::vector<uint32_t> key = {42};
  const std::vector<std::byte> value(8, std::byte{7});
  BuildIndexNode node;
  node.index = index->get();
  node.keys = {std::span<const uint32_t>(key)};
  for (uint64_t c = 0; c < columns; ++c) {
    node.payload.push_back(ColumnView{ColumnType::kInt64, 1, value, {}, {}});
  }
  CommandGraph g;
  g.Add(node);
  const absl::Status s = cuda_->Run(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted)
      << s << " (" << columns << " columns of " << uint64_t{capacity} * 8 << " bytes, "
      << free_bytes << " bytes free)";
  EXPECT_TRUE(cuda_->Healthy());
  EXPECT_TRUE((*index)->payload().empty());
  EXPECT_EQ((*index)->memory_bytes(), cuda_->IndexBytes((*index)->spec()));
  // The same index, a small payload.
  const std::vector<SourceColumn> payload = {RandomColumn(rng_, ColumnType::kInt64, 1, 0.0, false)};
  node.payload = {payload[0].View()};
  CommandGraph again;
  again.Add(node);
  ASSERT_TRUE(cuda_->Run(again).ok());
  ASSERT_EQ((*index)->payload().size(), 1u);
  EXPECT_EQ((*index)->payload()[0].bytes, uint64_t{capacity} * 8);
  std::vector<uint32_t> values(2);
  const std::vector<uint32_t> queries = {42, 43};
  Gathered out;
  LookupNode lookup;
  lookup.index = index->get();
  lookup.keys = {std::span<const uint32_t>(queries)};
  lookup.values = values;
  lookup.gather.push_back(out.Prepare(0, ColumnType::kInt64, 2, 0x7fffffff));
  CommandGraph q;
  q.Add(lookup);
  ASSERT_TRUE(cuda_->Run(q).ok());
  EXPECT_EQ(out.At(ColumnType::kInt64, 0), payload[0].At(0));
  EXPECT_EQ(out.At(ColumnType::kInt64, 1), Cell{});
  EXPECT_EQ(out.null_count, 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, PayloadDifferential,
    ::testing::Combine(::testing::Values(CudaBuildPath::kDirect, CudaBuildPath::kTiles),
                       ::testing::Values(KeyType::kUint32, KeyType::kUint64)),
    [](const ::testing::TestParamInfo<std::tuple<CudaBuildPath, KeyType>>& info) {
      return std::string(std::get<0>(info.param) == CudaBuildPath::kTiles ? "tiles" : "direct") +
             "_" + KeyTypeTag(std::get<1>(info.param));
    });

}  // namespace
}  // namespace gpujoin::engine
