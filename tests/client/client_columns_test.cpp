// The client library's typed columns without a server: Column appends and
// views at any bit offset, the wire codec of gpujoin.v1.Column (slices shifted
// to bit 0, offsets rebased, malformed server columns refused), the splitting of
// whole build columns into message-sized chunks (BuildChunker), and the
// reassembly of join answers split over several messages (JoinAssembler).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "build_chunker.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "join_assembler.hpp"
#include "wire.hpp"

namespace {

namespace gc = gpujoin::client;
namespace pb = gpujoin::v1;
using gc::Column;
using gc::ColumnType;
using gc::ColumnView;

// One row of any type, for expectations: nullopt = null.
using Value = std::variant<int64_t, uint64_t, double, bool, std::string>;
using Rows = std::vector<std::optional<Value>>;

std::optional<Value> RowOf(const Column& c, uint64_t r) {
  if (!c.Valid(r)) return std::nullopt;
  switch (c.type) {
    case ColumnType::kUint32:
      return Value(uint64_t{c.Value<uint32_t>(r)});
    case ColumnType::kInt32:
      return Value(int64_t{c.Value<int32_t>(r)});
    case ColumnType::kUint64:
      return Value(c.Value<uint64_t>(r));
    case ColumnType::kInt64:
      return Value(c.Value<int64_t>(r));
    case ColumnType::kFloat32:
      return Value(double{c.Value<float>(r)});
    case ColumnType::kFloat64:
      return Value(c.Value<double>(r));
    case ColumnType::kBool:
      return Value(c.Bool(r));
    case ColumnType::kBinary:
    case ColumnType::kString:
      return Value(std::string(c.String(r)));
  }
  return std::nullopt;
}

Rows RowsOf(const Column& c) {
  Rows out;
  for (uint64_t r = 0; r < c.length; ++r) out.push_back(RowOf(c, r));
  return out;
}

// Checks the invariants column.hpp promises for an owned column.
void ExpectWellFormed(const Column& c) {
  SCOPED_TRACE(c.name);
  if (gc::IsVariableWidth(c.type)) {
    if (c.length > 0) {
      ASSERT_EQ(c.offsets.size(), c.length + 1);
      EXPECT_EQ(c.offsets[0], 0);
      EXPECT_EQ(static_cast<size_t>(c.offsets.back()), c.data.size());
    }
  } else if (c.type == ColumnType::kBool) {
    EXPECT_EQ(c.data.size(), gc::BitmapBytes(c.length));
  } else {
    EXPECT_EQ(c.data.size(), c.length * gc::ColumnWidth(c.type));
  }
  uint64_t nulls = 0;
  if (!c.validity.empty()) {
    ASSERT_EQ(c.validity.size(), gc::BitmapBytes(c.length));
    for (uint64_t r = 0; r < c.length; ++r) nulls += !gc::BitAt(c.validity, r);
    for (uint64_t b = c.length; b < 8 * c.validity.size(); ++b) {
      EXPECT_FALSE(gc::BitAt(c.validity, b)) << "validity bit " << b << " past the rows";
    }
  }
  EXPECT_EQ(c.null_count, nulls);
}

// A random column of `type`: about a quarter null, strings of 0..max_len bytes
// (some empty), some rows repeated.
Column RandomColumn(const std::string& name, ColumnType type, size_t rows, uint32_t seed,
                    size_t max_len = 12, bool nulls = true) {
  std::mt19937_64 rng(seed);
  Column c(name, type);
  for (size_t r = 0; r < rows; ++r) {
    if (nulls && rng() % 4 == 0) {
      c.AppendNull();
      continue;
    }
    const uint64_t x = rng();
    switch (type) {
      case ColumnType::kUint32:
        c.Append(static_cast<uint32_t>(x));
        break;
      case ColumnType::kInt32:
        c.Append(static_cast<int32_t>(x));
        break;
      case ColumnType::kUint64:
        c.Append(x);
        break;
      case ColumnType::kInt64:
        c.Append(static_cast<int64_t>(x));
        break;
      case ColumnType::kFloat32:
        c.Append(static_cast<float>(static_cast<int64_t>(x % 100000)) / 7.0f);
        break;
      case ColumnType::kFloat64:
        c.Append(static_cast<double>(static_cast<int64_t>(x)) / 3.0);
        break;
      case ColumnType::kBool:
        c.AppendBool(x & 1);
        break;
      case ColumnType::kBinary:
      case ColumnType::kString: {
        std::string s(x % (max_len + 1), 'a');
        for (char& ch : s) ch = static_cast<char>('a' + rng() % 26);
        EXPECT_TRUE(c.AppendString(s).ok());
        break;
      }
    }
  }
  return c;
}

constexpr ColumnType kEveryType[] = {
    ColumnType::kUint32, ColumnType::kInt32,   ColumnType::kUint64,
    ColumnType::kInt64,  ColumnType::kFloat32, ColumnType::kFloat64,
    ColumnType::kBinary, ColumnType::kBool,    ColumnType::kString};

// ---------------------------------------------------------------- Column

TEST(ClientColumn, TypeNamesRoundTrip) {
  for (ColumnType t : kEveryType) EXPECT_EQ(*gc::ParseColumnType(gc::ColumnTypeName(t)), t);
  EXPECT_EQ(gc::ParseColumnType("utf8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gc::ColumnWidth(ColumnType::kInt32), 4u);
  EXPECT_EQ(gc::ColumnWidth(ColumnType::kFloat64), 8u);
  EXPECT_EQ(gc::ColumnWidth(ColumnType::kBool), 0u);
}

TEST(ClientColumn, AppendsKeepValuesNullsAndInvariants) {
  Column s("s", ColumnType::kString);
  ASSERT_TRUE(s.AppendString("héllo").ok());
  s.AppendNull();
  ASSERT_TRUE(s.AppendString("").ok());
  EXPECT_EQ(RowsOf(s), (Rows{Value(std::string("héllo")), std::nullopt, Value(std::string())}));
  ExpectWellFormed(s);

  // The validity bitmap appears with the first null, the earlier rows valid.
  Column b("b", ColumnType::kBool);
  for (int i = 0; i < 9; ++i) b.AppendBool(i % 3 == 0);
  EXPECT_TRUE(b.validity.empty());
  b.AppendNull();
  b.AppendBool(true);
  EXPECT_EQ(b.null_count, 1u);
  EXPECT_EQ(RowOf(b, 9), std::nullopt);
  EXPECT_EQ(RowOf(b, 10), std::optional<Value>(true));
  EXPECT_EQ(RowOf(b, 3), std::optional<Value>(true));
  EXPECT_EQ(RowOf(b, 4), std::optional<Value>(false));
  ExpectWellFormed(b);

  const std::vector<double> d = {1.5, -0.0, 1e300};
  Column f = Column::Of("f", d);
  EXPECT_EQ(f.type, ColumnType::kFloat64);
  EXPECT_EQ(f.Value<double>(2), 1e300);
  ExpectWellFormed(f);

  // An empty string column has a view with its one offset.
  Column empty("e", ColumnType::kString);
  ColumnView v = empty.view();
  ASSERT_EQ(v.offsets.size(), 1u);
  EXPECT_TRUE(gc::CheckColumnView(v, "e").ok());
}

// AppendRows from views at every bit offset (bool data and validity shifted
// across bytes, string offsets rebased) gives the rows of the view.
TEST(ClientColumn, AppendRowsAtAnyOffsetConcatenatesExactly) {
  for (ColumnType type : kEveryType) {
    SCOPED_TRACE(std::string(gc::ColumnTypeName(type)));
    const Column src = RandomColumn("x", type, 77, 11);
    const Rows want = RowsOf(src);
    for (uint64_t cut : {0u, 1u, 7u, 8u, 9u, 30u, 76u, 77u}) {
      Column out("x", type);
      ASSERT_TRUE(out.AppendRows(src.view().Slice(0, cut)).ok());
      // Append the rest in uneven pieces.
      for (uint64_t at = cut; at < src.length; at += 5) {
        ASSERT_TRUE(out.AppendRows(src.view().Slice(at, 5)).ok());
      }
      EXPECT_EQ(RowsOf(out), want) << "cut " << cut;
      ExpectWellFormed(out);
    }
  }
  Column a("a", ColumnType::kInt64);
  const Column b = RandomColumn("b", ColumnType::kInt32, 3, 1);
  EXPECT_EQ(a.AppendRows(b.view()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClientColumn, CheckColumnViewNamesTheBufferAndSizes) {
  const std::vector<uint8_t> data(16);
  ColumnView v;
  v.name = "p";
  v.type = ColumnType::kInt64;
  v.data = data;
  v.length = 2;
  EXPECT_TRUE(gc::CheckColumnView(v, "p").ok());
  v.offset = 1;
  absl::Status st = gc::CheckColumnView(v, "payload[0]");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("data has 16 bytes, needs 24"), std::string::npos) << st;

  const std::vector<int32_t> offsets = {0, 3, 2};
  ColumnView s;
  s.type = ColumnType::kString;
  s.data = data;
  s.offsets = offsets;
  s.length = 2;
  st = gc::CheckColumnView(s, "s");
  EXPECT_NE(st.message().find("offsets[2] = 2 is below offsets[1] = 3"), std::string::npos) << st;
  const std::vector<uint8_t> short_validity(1);
  ColumnView b;
  b.type = ColumnType::kBool;
  b.data = data;
  b.validity = short_validity;
  b.length = 9;
  st = gc::CheckColumnView(b, "b");
  EXPECT_NE(st.message().find("validity has 1 bytes, needs 2"), std::string::npos) << st;
}

// ---------------------------------------------------------------- wire codec

TEST(ClientWire, EncodeSliceThenDecodeGivesTheSliceRows) {
  for (ColumnType type : kEveryType) {
    SCOPED_TRACE(std::string(gc::ColumnTypeName(type)));
    const Column src = RandomColumn("col.x-1", type, 45, 5);
    for (uint64_t begin : {0u, 3u, 8u, 13u}) {
      for (uint64_t n : {0u, 1u, 9u, 20u}) {
        const ColumnView slice = src.view().Slice(begin, n);
        pb::Column wire;
        gpujoin::client::detail::EncodeColumn(slice, &wire);
        EXPECT_EQ(wire.type(), static_cast<int>(type) + 1);
        EXPECT_EQ(wire.length(), n);
        // Bitmaps start at the slice's first row and have no bits past it.
        if (!wire.validity().empty()) {
          ASSERT_EQ(wire.validity().size(), gc::BitmapBytes(n));
          if (n % 8) {
            EXPECT_EQ(static_cast<uint8_t>(wire.validity().back()) >> (n % 8), 0);
          }
        }
        if (gc::IsVariableWidth(type)) {
          int32_t first;
          std::memcpy(&first, wire.offsets().data(), 4);
          EXPECT_EQ(first, 0);
        }
        // The estimate bounds what the column adds to a build chunk.
        pb::BuildChunk chunk;
        *chunk.add_payload() = wire;
        EXPECT_LE(chunk.ByteSizeLong(), gpujoin::client::detail::EncodedColumnBytes(slice));

        auto back = gpujoin::client::detail::DecodeColumn(wire, "columns[0]");
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_EQ(back->name, "col.x-1");
        ExpectWellFormed(*back);
        Rows want;
        for (uint64_t r = 0; r < slice.length; ++r) want.push_back(RowOf(src, begin + r));
        EXPECT_EQ(RowsOf(*back), want) << "begin " << begin << " n " << n;
      }
    }
  }
}

TEST(ClientWire, DecodeRefusesMalformedServerColumns) {
  auto decode = [](const pb::Column& c) {
    return gpujoin::client::detail::DecodeColumn(c, "columns[1]").status();
  };
  pb::Column c;
  c.set_name("price");
  c.set_type(pb::COLUMN_TYPE_INT64);
  c.set_length(2);
  c.set_data(std::string(15, '\0'));
  absl::Status st = decode(c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("columns[1] ('price') with 15 data bytes for 2 rows"),
            std::string::npos)
      << st;
  c.set_type(pb::COLUMN_TYPE_UNSPECIFIED);
  EXPECT_EQ(decode(c).code(), absl::StatusCode::kInternal);

  // Lengths whose byte sizes would wrap (4 * (n + 1), n * 8, (n + 7) / 8) are
  // refused before any size is computed, for every layout.
  for (const auto type : {pb::COLUMN_TYPE_STRING, pb::COLUMN_TYPE_INT64, pb::COLUMN_TYPE_BOOL}) {
    pb::Column huge;
    huge.set_type(type);
    huge.set_length(~uint64_t{0});
    const absl::Status refused = decode(huge);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInternal) << refused;
    EXPECT_NE(refused.message().find("more rows than a message can hold"), std::string::npos)
        << refused;
  }

  pb::Column s;
  s.set_type(pb::COLUMN_TYPE_STRING);
  s.set_length(2);
  s.set_data("abc");
  const int32_t bad[] = {0, 2, 1};
  s.set_offsets(reinterpret_cast<const char*>(bad), sizeof(bad));
  EXPECT_NE(decode(s).message().find("decreasing offsets"), std::string::npos) << decode(s);
  const int32_t past[] = {0, 2, 4};
  s.set_offsets(reinterpret_cast<const char*>(past), sizeof(past));
  EXPECT_EQ(decode(s).code(), absl::StatusCode::kInternal);
  // Offsets that start past 0 are rebased.
  const int32_t shifted[] = {1, 2, 3};
  s.set_offsets(reinterpret_cast<const char*>(shifted), sizeof(shifted));
  auto ok = gpujoin::client::detail::DecodeColumn(s, "columns[0]");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->String(0), "b");
  EXPECT_EQ(ok->String(1), "c");

  pb::Column n;
  n.set_type(pb::COLUMN_TYPE_BOOL);
  n.set_length(9);
  n.set_data(std::string(2, '\xff'));
  n.set_null_count(1);
  EXPECT_NE(decode(n).message().find("1 nulls but no validity"), std::string::npos) << decode(n);
  n.set_validity(std::string(1, '\xff'));
  EXPECT_NE(decode(n).message().find("validity of 1 bytes for 9 rows"), std::string::npos)
      << decode(n);
  // Bits past the rows are cleared; null_count is counted from the bitmap.
  n.set_validity(std::string("\xfe\xff", 2));
  auto bits = gpujoin::client::detail::DecodeColumn(n, "columns[0]");
  ASSERT_TRUE(bits.ok()) << bits.status();
  EXPECT_EQ(bits->null_count, 1u);
  EXPECT_EQ(bits->data[1], 1);
  ExpectWellFormed(*bits);
}

// ---------------------------------------------------------------- BuildChunker

// What the client sends for `chunk` (as BuildIndex encodes it).
pb::BuildChunk Encode(const gc::BuildChunk& chunk) {
  pb::BuildChunk out;
  if (chunk.keys.type() == gc::KeyType::kUint64) {
    out.mutable_keys64()->set_packed(std::string(chunk.keys.bytes()));
  } else {
    out.mutable_keys()->set_packed(std::string(chunk.keys.bytes()));
  }
  if (!chunk.values.empty()) {
    out.mutable_values()->set_packed(reinterpret_cast<const char*>(chunk.values.data()),
                                     chunk.values.size_bytes());
  }
  for (const ColumnView& v : chunk.payload) {
    gpujoin::client::detail::EncodeColumn(v, out.add_payload());
  }
  return out;
}

struct Chunked {
  std::vector<uint64_t> keys;
  std::vector<uint32_t> values;
  std::map<std::string, Column> payload;
  size_t chunks = 0;
  size_t payload_only_chunks = 0;
};

// Runs the chunker to the end, checking every chunk's size and that no payload
// column runs ahead of the keys, and concatenates what the chunks carry.
Chunked RunChunker(gc::Keys keys, std::span<const uint32_t> values,
                   const std::vector<Column>& payload, size_t chunk_rows, uint64_t max_bytes) {
  std::vector<ColumnView> views;
  for (const Column& c : payload) views.push_back(c.view());
  auto chunker =
      gpujoin::client::detail::BuildChunker::Make(keys, values, views, chunk_rows, max_bytes);
  EXPECT_TRUE(chunker.ok()) << chunker.status();
  Chunked out;
  if (!chunker.ok()) return out;
  for (const Column& c : payload) out.payload.emplace(c.name, Column(c.name, c.type));
  while (auto chunk = chunker->Next()) {
    ++out.chunks;
    EXPECT_LE(chunk->keys.size(), chunk_rows);
    EXPECT_LE(Encode(*chunk).ByteSizeLong(), max_bytes) << "chunk " << out.chunks;
    if (chunk->keys.empty() && !chunk->payload.empty()) ++out.payload_only_chunks;
    for (uint64_t k : chunk->keys.u64()) out.keys.push_back(k);
    for (uint32_t k : chunk->keys.u32()) out.keys.push_back(k);
    out.values.insert(out.values.end(), chunk->values.begin(), chunk->values.end());
    for (const ColumnView& v : chunk->payload) {
      Column& c = out.payload.at(std::string(v.name));
      EXPECT_TRUE(c.AppendRows(v).ok());
      EXPECT_LE(c.length, out.keys.size()) << "payload '" << v.name << "' ahead of the keys";
    }
    EXPECT_LT(out.chunks, 100000u) << "the chunker does not end";
    if (out.chunks >= 100000u) break;
  }
  return out;
}

TEST(BuildChunker, SplitsPayloadIntoMessageSizedChunksThatReassemble) {
  const size_t rows = 3000;
  std::vector<uint64_t> keys(rows);
  std::vector<uint32_t> values(rows);
  for (size_t i = 0; i < rows; ++i) {
    keys[i] = i * 0x9E3779B97F4A7C15ull;
    values[i] = static_cast<uint32_t>(i * 3);
  }
  std::vector<Column> payload;
  payload.push_back(RandomColumn("i64", ColumnType::kInt64, rows, 1));
  payload.push_back(RandomColumn("flag", ColumnType::kBool, rows, 2));
  payload.push_back(RandomColumn("name", ColumnType::kString, rows, 3, /*max_len=*/300));
  payload.push_back(RandomColumn("f32", ColumnType::kFloat32, rows, 4, 0, /*nulls=*/false));
  for (uint64_t max_bytes : {uint64_t{2048}, uint64_t{20000}, uint64_t{1} << 20}) {
    for (size_t chunk_rows : {size_t{7}, size_t{1000}, size_t{1} << 20}) {
      SCOPED_TRACE(testing::Message() << "max_bytes " << max_bytes << " chunk_rows " << chunk_rows);
      Chunked c = RunChunker(keys, values, payload, chunk_rows, max_bytes);
      EXPECT_EQ(c.keys, keys);
      EXPECT_EQ(c.values, values);
      for (const Column& p : payload) {
        EXPECT_EQ(RowsOf(c.payload.at(p.name)), RowsOf(p)) << p.name;
        ExpectWellFormed(c.payload.at(p.name));
      }
      if (max_bytes == 2048) EXPECT_GT(c.payload_only_chunks, 0u);
      if (max_bytes == (uint64_t{1} << 20) && chunk_rows > rows) {
        EXPECT_EQ(c.chunks, 1u);  // everything fits in one message
      }
    }
  }
}

TEST(BuildChunker, EmptyBuildIsOneEmptyChunk) {
  std::vector<Column> payload = {Column("s", ColumnType::kString)};
  Chunked c = RunChunker(std::vector<uint32_t>{}, {}, payload, 10, 4096);
  EXPECT_EQ(c.chunks, 1u);
  EXPECT_TRUE(c.keys.empty());
  EXPECT_EQ(c.payload.at("s").length, 0u);
}

TEST(BuildChunker, RefusesWhatCannotFitInOneChunk) {
  Column s("long_text", ColumnType::kString);
  ASSERT_TRUE(s.AppendString("short").ok());
  ASSERT_TRUE(s.AppendString(std::string(5000, 'x')).ok());
  const std::vector<ColumnView> views = {s.view()};
  const std::vector<uint32_t> keys = {1, 2};
  auto c = gpujoin::client::detail::BuildChunker::Make(keys, {}, views, 10, 4096);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("payload column 'long_text' row 1 needs"), std::string::npos)
      << c.status();
  EXPECT_EQ(gpujoin::client::detail::BuildChunker::Make(keys, {}, {}, 0, 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpujoin::client::detail::BuildChunker::Make(keys, {}, {}, 10, 50).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- JoinAssembler

// A whole join answer: `batches` batches with pairs, found flags and two
// gathered columns (int64 with nulls, string).
pb::JoinResponse WholeAnswer(const std::vector<size_t>& pairs_per_batch) {
  pb::JoinResponse r;
  r.set_batch_id(3);
  r.set_index_version(9);
  uint32_t next = 0;
  for (size_t b = 0; b < pairs_per_batch.size(); ++b) {
    pb::JoinBatchResult* br = r.add_results();
    const size_t n = pairs_per_batch[b];
    std::vector<uint32_t> left(n), right(n);
    for (size_t i = 0; i < n; ++i) {
      left[i] = next++;
      right[i] = 1000 + left[i];
    }
    br->set_left_rows(reinterpret_cast<const char*>(left.data()), 4 * n);
    br->set_right_rows(reinterpret_cast<const char*>(right.data()), 4 * n);
    br->set_count(n + b);
    br->set_capacity(n);
    br->set_overflow(b == 1);
    br->mutable_statistics()->set_found(n);
    br->mutable_statistics()->set_missing(b);
    br->set_found(std::string(n + b, '\x01'));
    br->set_batch(b);
    const Column a = RandomColumn("a", ColumnType::kInt64, n, 20 + b);
    const Column s = RandomColumn("s", ColumnType::kString, n, 30 + b);
    gpujoin::client::detail::EncodeColumn(a.view(), br->add_columns());
    gpujoin::client::detail::EncodeColumn(s.view(), br->add_columns());
  }
  return r;
}

// Splits `whole` as the server may: message k carries, for each batch, the
// pairs [first, first + step) it has left; the head (count, found, ...) goes with
// the batch's first part, which may carry no pairs (`empty_head`).
std::vector<pb::JoinResponse> Split(const pb::JoinResponse& whole, size_t step, bool empty_head) {
  struct Part {
    int batch;
    uint64_t first, pairs;
    bool head;
  };
  std::vector<Part> parts;
  for (int b = 0; b < whole.results_size(); ++b) {
    const uint64_t n = whole.results(b).left_rows().size() / 4;
    uint64_t first = 0;
    if (empty_head) parts.push_back({b, 0, 0, true});
    do {
      const uint64_t m = std::min<uint64_t>(step, n - first);
      parts.push_back({b, first, m, !empty_head && first == 0});
      first += m;
    } while (first < n);
  }
  std::vector<pb::JoinResponse> out;
  for (size_t k = 0; k < parts.size(); k += 2) {  // two parts per message
    pb::JoinResponse m;
    m.set_batch_id(whole.batch_id());
    m.set_index_version(whole.index_version());
    for (size_t j = k; j < std::min(parts.size(), k + 2); ++j) {
      const Part& p = parts[j];
      const pb::JoinBatchResult& src = whole.results(p.batch);
      pb::JoinBatchResult* dst = m.add_results();
      dst->set_batch(p.batch);
      dst->set_first_pair(p.first);
      dst->set_left_rows(src.left_rows().substr(4 * p.first, 4 * p.pairs));
      dst->set_right_rows(src.right_rows().substr(4 * p.first, 4 * p.pairs));
      if (p.head) {
        dst->set_count(src.count());
        dst->set_capacity(src.capacity());
        dst->set_overflow(src.overflow());
        *dst->mutable_statistics() = src.statistics();
        dst->set_found(src.found());
      }
      for (const pb::Column& c : src.columns()) {
        auto col = gpujoin::client::detail::DecodeColumn(c, "src");
        EXPECT_TRUE(col.ok());
        gpujoin::client::detail::EncodeColumn(col->view().Slice(p.first, p.pairs),
                                              dst->add_columns());
      }
    }
    m.set_more(k + 2 < parts.size());
    out.push_back(std::move(m));
  }
  return out;
}

void ExpectSameResult(const gc::JoinResult& got, const gc::JoinResult& want) {
  EXPECT_EQ(got.index_version, want.index_version);
  ASSERT_EQ(got.results.size(), want.results.size());
  for (size_t b = 0; b < want.results.size(); ++b) {
    SCOPED_TRACE(b);
    const gc::JoinPairs& g = got.results[b];
    const gc::JoinPairs& w = want.results[b];
    EXPECT_EQ(g.left_rows, w.left_rows);
    EXPECT_EQ(g.right_rows, w.right_rows);
    EXPECT_EQ(g.count, w.count);
    EXPECT_EQ(g.capacity, w.capacity);
    EXPECT_EQ(g.overflow, w.overflow);
    EXPECT_EQ(g.statistics.found, w.statistics.found);
    EXPECT_EQ(g.statistics.missing, w.statistics.missing);
    EXPECT_EQ(g.found, w.found);
    ASSERT_EQ(g.columns.size(), w.columns.size());
    for (size_t c = 0; c < w.columns.size(); ++c) {
      EXPECT_EQ(g.columns[c].name, w.columns[c].name);
      EXPECT_EQ(RowsOf(g.columns[c]), RowsOf(w.columns[c]));
      ExpectWellFormed(g.columns[c]);
    }
  }
}

TEST(JoinAssembler, PartsReassembleToTheWholeAnswer) {
  const pb::JoinResponse whole = WholeAnswer({10, 0, 23, 1});
  gc::JoinResult want;
  gpujoin::client::detail::JoinAssembler single;
  ASSERT_TRUE(single.Add(whole, &want).ok());
  EXPECT_FALSE(single.in_progress());
  ASSERT_EQ(want.results.size(), 4u);
  EXPECT_EQ(want.results[2].left_rows.size(), 23u);
  EXPECT_EQ(want.results[2].columns[1].length, 23u);

  for (size_t step : {1u, 4u, 9u, 100u}) {
    for (bool empty_head : {false, true}) {
      SCOPED_TRACE(testing::Message() << "step " << step << " empty_head " << empty_head);
      const std::vector<pb::JoinResponse> parts = Split(whole, step, empty_head);
      gpujoin::client::detail::JoinAssembler assembler;
      gc::JoinResult got;
      for (size_t k = 0; k < parts.size(); ++k) {
        ASSERT_TRUE(assembler.Add(parts[k], &got).ok()) << "part " << k;
        EXPECT_EQ(assembler.in_progress(), k + 1 < parts.size());
      }
      ExpectSameResult(got, want);
      // The assembler is ready for the next answer.
      gc::JoinResult next;
      ASSERT_TRUE(assembler.Add(whole, &next).ok());
      ExpectSameResult(next, want);
    }
  }
}

TEST(JoinAssembler, InconsistentPartsAreInternalErrors) {
  const std::vector<pb::JoinResponse> parts = Split(WholeAnswer({10, 5}), 3, false);
  ASSERT_GE(parts.size(), 3u);
  auto run = [](std::vector<pb::JoinResponse> ps) {
    gpujoin::client::detail::JoinAssembler a;
    gc::JoinResult r;
    for (const auto& p : ps) {
      absl::Status st = a.Add(p, &r);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  };
  // A lost part: the next one starts past the pairs received.
  std::vector<pb::JoinResponse> gap = parts;
  gap[1].mutable_results()->DeleteSubrange(0, 1);
  absl::Status st = run(gap);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("continues batch 0 at pair 9 after 6 pairs"), std::string::npos)
      << st;
  // A lost last part of a batch: fewer pairs than min(count, capacity).
  std::vector<pb::JoinResponse> tail = parts;
  tail[1].mutable_results()->DeleteSubrange(1, 1);
  EXPECT_NE(run(tail).message().find("holds 9 pairs of batch 0, not min(count 10, capacity 10)"),
            std::string::npos)
      << run(tail);
  // A batch out of order.
  std::vector<pb::JoinResponse> order = parts;
  order[0].mutable_results(0)->set_batch(1);
  EXPECT_NE(run(order).message().find("holds batch 1 where batch 0 was expected"),
            std::string::npos)
      << run(order);
  // A column that does not match the part's pairs.
  std::vector<pb::JoinResponse> cols = parts;
  cols[1].mutable_results(0)->mutable_columns()->RemoveLast();
  EXPECT_NE(run(cols).message().find("carries 1 columns, its first part 2"), std::string::npos)
      << run(cols);
  std::vector<pb::JoinResponse> rows = parts;
  rows[0].mutable_results(0)->mutable_columns(0)->set_length(2);
  EXPECT_EQ(run(rows).code(), absl::StatusCode::kInternal);
  // A single message's results are positional (an unset batch, 0, is
  // accepted); a set batch must match.
  pb::JoinResponse one = WholeAnswer({2, 2});
  one.mutable_results(1)->set_batch(0);
  EXPECT_TRUE(run({one}).ok()) << run({one});
  one.mutable_results(1)->set_batch(5);
  EXPECT_NE(run({one}).message().find("holds batch 5 where batch 1 was expected"),
            std::string::npos)
      << run({one});
}

TEST(JoinAssembler, InBandErrorDropsTheResults) {
  pb::JoinResponse e;
  e.mutable_error()->set_code(3);
  e.mutable_error()->set_message("select[0]: no payload column 'x'");
  gpujoin::client::detail::JoinAssembler a;
  gc::JoinResult r;
  ASSERT_TRUE(a.Add(e, &r).ok());
  EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.results.empty());
}

}  // namespace
