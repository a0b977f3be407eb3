// Payload columns through a real gpujoind, on $GPUJOIN_TEST_BACKEND
// (cpu unless set; bench/device_run.sh can repeat it on cuda), with the generated
// stub: every column type through build, lookup (bytes path and protobuf path)
// and join, with nulls, empty and multi-byte strings, duplicates across chunks
// and payload chunk boundaries independent of the keys' (bitmaps continued at odd
// bit positions); IndexInfo's payload; every bad-input rule installing nothing
// while the old version keeps serving; select errors in-band; count-only joins;
// join results split over several messages reassembled equal to one message;
// --max-result-bytes, the memory budget and the staging limits with payload;
// rebuilds under eight checking streams that never mix versions; the payload
// metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "build_messages.hpp"
#include "raw_stub_test.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/eventually.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "payload_model.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::Bytes;
using gpujoin::server::testing::Cell;
using gpujoin::server::testing::CellsAt;
using gpujoin::server::testing::kNoRow;
using gpujoin::server::testing::ModelColumn;
using gpujoin::server::testing::RandomCells;
using gpujoin::server::testing::ReadColumn;
using gpujoin::server::testing::Reassemble;
using gpujoin::server::testing::WireChunk;
using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr v1::ColumnType kEveryType[] = {
    v1::COLUMN_TYPE_UINT32, v1::COLUMN_TYPE_INT32,   v1::COLUMN_TYPE_UINT64,
    v1::COLUMN_TYPE_INT64,  v1::COLUMN_TYPE_FLOAT32, v1::COLUMN_TYPE_FLOAT64,
    v1::COLUMN_TYPE_BINARY, v1::COLUMN_TYPE_BOOL,    v1::COLUMN_TYPE_STRING};

// A build's table: keys (uint32) and payload columns aligned with them.
struct Table {
  std::vector<uint32_t> keys;
  std::vector<ModelColumn> columns;

  // The lowest row of every key (its duplicate winner).
  std::map<uint32_t, uint32_t> Winners() const {
    std::map<uint32_t, uint32_t> w;
    for (uint32_t r = 0; r < keys.size(); ++r) w.emplace(keys[r], r);
    return w;
  }
  const ModelColumn& Column(const std::string& name) const {
    for (const auto& c : columns) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "no column " << name;
    return columns.front();
  }
};

// `rows` keys drawn from [1, distinct] (duplicates across chunks) and one
// column of each type in `types`, named c0, c1, ...
Table RandomTable(size_t rows, uint32_t distinct, const std::vector<v1::ColumnType>& types,
                  std::mt19937_64& rng, int null_percent = 20) {
  Table t;
  for (size_t r = 0; r < rows; ++r) t.keys.push_back(1 + static_cast<uint32_t>(rng() % distinct));
  for (size_t i = 0; i < types.size(); ++i) {
    t.columns.push_back(ModelColumn{"c" + std::to_string(i), types[i],
                                    RandomCells(types[i], rows, rng, null_percent)});
  }
  return t;
}

v1::BuildIndexRequest SpecOf(const std::string& name, const Table& t, uint64_t capacity,
                             bool replace = false) {
  v1::BuildIndexRequest r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_capacity(capacity);
  r.mutable_spec()->set_replace(replace);
  for (const auto& c : t.columns) {
    auto* p = r.mutable_spec()->add_payload();
    p->set_name(c.name);
    p->set_type(c.type);
  }
  return r;
}

// The build messages of `t`: keys in chunks of `key_chunk` rows; every column in
// chunks of random sizes (1 to 2 * key_chunk rows, so bitmaps continue at odd
// bit positions), each attached to a random key chunk message at or after the
// previous one of its column, or to payload-only messages that follow.
// `separate`: every payload chunk in a message of its own (small messages).
std::vector<v1::BuildIndexRequest> ChunksOf(const Table& t, size_t key_chunk, std::mt19937_64& rng,
                                            bool always_validity = false, bool separate = false) {
  std::vector<v1::BuildIndexRequest> messages;
  for (size_t first = 0; first < t.keys.size(); first += key_chunk) {
    const size_t n = std::min(key_chunk, t.keys.size() - first);
    messages.push_back(testing::ChunkMsg(std::vector<uint32_t>(
        t.keys.begin() + static_cast<long>(first), t.keys.begin() + static_cast<long>(first + n))));
  }
  const size_t extra = 3;  // payload-only messages at the end
  for (size_t i = 0; i < extra; ++i) messages.emplace_back().mutable_chunk();
  for (const ModelColumn& c : t.columns) {
    size_t at = 0;
    for (size_t first = 0; first < t.keys.size();) {
      const size_t n = std::min<size_t>(1 + rng() % (2 * key_chunk), t.keys.size() - first);
      at = std::min(messages.size() - 1, at + static_cast<size_t>(rng() % 2));
      v1::Column chunk = WireChunk(c, first, n, always_validity || rng() % 3 == 0, rng() % 2 == 0);
      if (separate) {
        *messages.emplace_back().mutable_chunk()->add_payload() = std::move(chunk);
      } else {
        *messages[at].mutable_chunk()->add_payload() = std::move(chunk);
      }
      first += n;
    }
  }
  return messages;
}

class PayloadIntegrationTest : public RawStubTest {
 protected:
  void Start(std::vector<std::string> extra = {}) { StartServer(std::move(extra), true); }
};

v1::LookupRequest LookupOf(const std::string& index, const std::vector<uint32_t>& keys,
                           const std::vector<std::string>& select, bool packed, uint64_t id) {
  v1::LookupRequest r;
  r.set_index(index);
  r.set_batch_id(id);
  if (packed) {
    *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  } else {
    for (uint32_t k : keys) r.mutable_keys()->mutable_values()->add_v(k);
  }
  for (const auto& s : select) r.add_select(s);
  return r;
}

// Expected answers of a lookup of `keys` on `t`: the winner row of each key.
std::vector<uint32_t> WinnerRows(const Table& t, const std::vector<uint32_t>& keys) {
  const auto winners = t.Winners();
  std::vector<uint32_t> rows;
  for (uint32_t k : keys) {
    auto it = winners.find(k);
    rows.push_back(it == winners.end() ? kNoRow : it->second);
  }
  return rows;
}

// Every type through build, lookup (both paths, select subsets in any order)
// and join; IndexInfo lists the columns with their null counts and bytes.
TEST_F(PayloadIntegrationTest, EveryTypeThroughBuildLookupAndJoin) {
  Start();
  std::mt19937_64 rng(20);
  const Table t = RandomTable(
      3000, 1500, std::vector<v1::ColumnType>(std::begin(kEveryType), std::end(kEveryType)), rng);
  std::vector<v1::BuildIndexRequest> messages = ChunksOf(t, 250, rng);
  messages.insert(messages.begin(), SpecOf("dim", t, 4096));
  v1::BuildIndexResponse built;
  const grpc::Status s = Build(messages, &built);
  ASSERT_TRUE(s.ok()) << s.error_message();

  // IndexInfo: the columns in spec order, null counts of the retained winners.
  const auto winners = t.Winners();
  const v1::IndexInfo& info = built.index();
  ASSERT_EQ(info.payload_size(), static_cast<int>(t.columns.size()));
  uint64_t payload_bytes = 0;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const auto& p = info.payload(static_cast<int>(i));
    EXPECT_EQ(p.name(), t.columns[i].name);
    EXPECT_EQ(p.type(), t.columns[i].type);
    uint64_t nulls = 0;
    for (const auto& [key, row] : winners) nulls += t.columns[i].cells[row].has_value() ? 0 : 1;
    EXPECT_EQ(p.null_count(), nulls) << p.name();
    EXPECT_GT(p.bytes(), 0u) << p.name();
    payload_bytes += p.bytes();
  }
  EXPECT_EQ(info.payload_bytes(), payload_bytes);
  EXPECT_GT(info.device_bytes(), payload_bytes);  // the table besides
  EXPECT_EQ(info.statistics().unique_keys(), winners.size());
  const v1::IndexInfo described = Describe("dim");
  EXPECT_EQ(described.payload_size(), info.payload_size());
  EXPECT_EQ(described.payload_bytes(), payload_bytes);
  EXPECT_EQ(Info().device_memory_used_bytes(), info.device_bytes());

  // Lookups: hits and misses, packed (bytes path) and typed (protobuf path).
  std::vector<uint32_t> q;
  for (int i = 0; i < 700; ++i) q.push_back(1 + static_cast<uint32_t>(rng() % 1800));
  const std::vector<std::vector<std::string>> selects = {
      {"c8", "c0", "c7"}, {"c1", "c2", "c3", "c4", "c5", "c6"}, {}, {"c6", "c8"}};
  std::vector<v1::LookupRequest> requests;
  for (size_t i = 0; i < selects.size(); ++i) {
    requests.push_back(LookupOf("dim", q, selects[i], true, 2 * i));
    requests.push_back(LookupOf("dim", q, selects[i], false, 2 * i + 1));
  }
  const auto answers = Lookups(requests);
  ASSERT_EQ(answers.size(), requests.size());
  const std::vector<uint32_t> expected_rows = WinnerRows(t, q);
  for (size_t a = 0; a < answers.size(); ++a) {
    const v1::LookupResponse& r = answers[a];
    ASSERT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), expected_rows) << "answer " << a;
    const auto& select = selects[a / 2];
    ASSERT_EQ(r.columns_size(), static_cast<int>(select.size())) << "answer " << a;
    for (size_t c = 0; c < select.size(); ++c) {
      const v1::Column& col = r.columns(static_cast<int>(c));
      EXPECT_EQ(col.name(), select[c]);
      EXPECT_EQ(col.type(), t.Column(select[c]).type);
      EXPECT_EQ(ReadColumn(col, q.size()), CellsAt(t.Column(select[c]), expected_rows))
          << "answer " << a << " column " << select[c];
    }
  }

  // Join: two batches (one with found and probes), every column gathered per pair.
  v1::JoinRequest j;
  j.set_index("dim");
  *j.add_batches()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(q);
  auto* b1 = j.add_batches();
  *b1->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>(q.begin(), q.begin() + 100));
  b1->set_want_found(true);
  b1->set_want_probes(true);
  b1->set_first_left_row(1000);
  for (const auto& c : t.columns) j.add_select(c.name);
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  ASSERT_EQ(joined[0].results_size(), 2);
  for (int b = 0; b < 2; ++b) {
    const v1::JoinBatchResult& r = joined[0].results(b);
    EXPECT_EQ(r.batch(), static_cast<uint64_t>(b));
    const auto left = UnpackColumn<uint32_t>(r.left_rows());
    const auto right = UnpackColumn<uint32_t>(r.right_rows());
    ASSERT_EQ(left.size(), right.size());
    EXPECT_EQ(r.count(), left.size());
    for (size_t p = 0; p < left.size(); ++p) {
      EXPECT_EQ(right[p], expected_rows[left[p] - (b == 1 ? 1000 : 0)]);
    }
    ASSERT_EQ(r.columns_size(), static_cast<int>(t.columns.size()));
    for (size_t c = 0; c < t.columns.size(); ++c) {
      EXPECT_EQ(ReadColumn(r.columns(static_cast<int>(c)), right.size()),
                CellsAt(t.columns[c], right))
          << "batch " << b << " column " << t.columns[c].name;
    }
  }
}

// A small index "dim" of three columns (a int64, s string, f bool) over keys
// 1..3, rows valued by `base`.
Table SmallTable(int64_t base) {
  Table t;
  t.keys = {1, 2, 3};
  t.columns.push_back(ModelColumn{
      "a", v1::COLUMN_TYPE_INT64, {Bytes<int64_t>(base), Cell(), Bytes<int64_t>(base + 2)}});
  t.columns.push_back(
      ModelColumn{"s", v1::COLUMN_TYPE_STRING, {"v" + std::to_string(base), "", Cell()}});
  t.columns.push_back(
      ModelColumn{"f", v1::COLUMN_TYPE_BOOL, {std::string(1, '\1'), std::string(1, '\0'), Cell()}});
  return t;
}

std::vector<v1::BuildIndexRequest> SmallBuild(const Table& t, bool replace) {
  v1::BuildIndexRequest chunk = testing::ChunkMsg(t.keys);
  for (const auto& c : t.columns) *chunk.mutable_chunk()->add_payload() = WireChunk(c, 0, 3);
  return {SpecOf("dim", t, 16, replace), chunk};
}

// Every bad-input rule of payload builds: INVALID_ARGUMENT naming the field and
// the column, nothing installed, and the old version (payload included) keeps
// serving under its version number.
TEST_F(PayloadIntegrationTest, EveryBadInputRuleInstallsNothing) {
  Start();
  const Table good = SmallTable(100);
  ASSERT_TRUE(Build(SmallBuild(good, false)).ok());

  struct Case {
    std::string name;
    std::function<void(std::vector<v1::BuildIndexRequest>&)> mutate;
    std::string message;
  };
  auto spec = [](std::vector<v1::BuildIndexRequest>& m) { return m[0].mutable_spec(); };
  auto col = [](std::vector<v1::BuildIndexRequest>& m, int i) {
    return m[1].mutable_chunk()->mutable_payload(i);
  };
  const std::vector<Case> cases = {
      {"bad column name", [&](auto& m) { spec(m)->mutable_payload(0)->set_name("a b"); },
       "spec.payload[0].name: column name has character 0x20 at position 1"},
      {"empty column name", [&](auto& m) { spec(m)->mutable_payload(0)->set_name(""); },
       "spec.payload[0].name: column name is empty"},
      {"duplicate column", [&](auto& m) { spec(m)->mutable_payload(2)->set_name("a"); },
       "spec.payload[2].name: column \"a\" is declared twice (also spec.payload[0])"},
      {"unspecified type",
       [&](auto& m) { spec(m)->mutable_payload(1)->set_type(v1::COLUMN_TYPE_UNSPECIFIED); },
       "spec.payload[1].type: COLUMN_TYPE_UNSPECIFIED is not a column type"},
      {"unknown type",
       [&](auto& m) { spec(m)->mutable_payload(1)->set_type(static_cast<v1::ColumnType>(42)); },
       "spec.payload[1].type: 42 is not a column type"},
      {"undeclared column", [&](auto& m) { col(m, 1)->set_name("zz"); },
       "chunks[0].payload[1].name: column \"zz\" is not declared (spec.payload declares \"a\", "
       "\"s\", \"f\")"},
      {"type mismatch", [&](auto& m) { col(m, 0)->set_type(v1::COLUMN_TYPE_UINT64); },
       "chunks[0].payload[0] (column \"a\").type: COLUMN_TYPE_UINT64, but spec.payload declares "
       "it COLUMN_TYPE_INT64"},
      {"fixed-width data size", [&](auto& m) { col(m, 0)->mutable_data()->resize(20); },
       "chunks[0].payload[0] (column \"a\").data: 20 bytes, need length 3 * 8 = 24"},
      {"length that disagrees with the data", [&](auto& m) { col(m, 0)->set_length(4); },
       "chunks[0].payload[0] (column \"a\").data: 24 bytes, need length 4 * 8 = 32"},
      {"offsets on a fixed-width column", [&](auto& m) { col(m, 0)->set_offsets("1234"); },
       "chunks[0].payload[0] (column \"a\").offsets: set (4 bytes) for a fixed-width column"},
      {"bool bitmap size", [&](auto& m) { col(m, 2)->set_data("ab"); },
       "chunks[0].payload[2] (column \"f\").data: 2 bytes, but a bitmap of length 3 rows has "
       "ceil(3 / 8) = 1"},
      {"validity size", [&](auto& m) { col(m, 0)->set_validity("ab"); },
       "chunks[0].payload[0] (column \"a\").validity: 2 bytes, but a bitmap of length 3 rows has "
       "ceil(3 / 8) = 1"},
      {"offsets not whole int32s", [&](auto& m) { col(m, 1)->mutable_offsets()->resize(15); },
       "chunks[0].payload[1] (column \"s\").offsets: byte length 15 is not a multiple of 4"},
      {"offsets count", [&](auto& m) { col(m, 1)->mutable_offsets()->resize(12); },
       "chunks[0].payload[1] (column \"s\").offsets: 3 int32 offsets, need length 3 + 1 = 4"},
      {"negative first offset",
       [&](auto& m) {
         col(m, 1)->set_offsets(Bytes<int32_t>(-1) + Bytes<int32_t>(0) + Bytes<int32_t>(0) +
                                Bytes<int32_t>(0));
       },
       "chunks[0].payload[1] (column \"s\").offsets[0]: -1 is negative"},
      {"decreasing offsets",
       [&](auto& m) {
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(3) + Bytes<int32_t>(1) +
                                Bytes<int32_t>(4));
       },
       "chunks[0].payload[1] (column \"s\").offsets[2]: 1 is below offsets[1] = 3"},
      {"offsets beyond the data",
       [&](auto& m) {
         col(m, 1)->set_data("abcd");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(1) + Bytes<int32_t>(2) +
                                Bytes<int32_t>(9));
       },
       "chunks[0].payload[1] (column \"s\").offsets[3]: 9 is beyond chunks[0].payload[1] "
       "(column \"s\").data (4 bytes)"},
      {"invalid UTF-8",
       [&](auto& m) {
         col(m, 1)->set_data("ok\xff");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(2) + Bytes<int32_t>(3) +
                                Bytes<int32_t>(3));
       },
       "chunks[0].payload[1] (column \"s\"): row 1 of this chunk is not valid UTF-8 (byte 0xff "
       "at position 0 of the row's 1 bytes); send bytes that are not UTF-8 text in a "
       "COLUMN_TYPE_BINARY column"},
      {"a UTF-8 character split between rows",
       [&](auto& m) {
         col(m, 1)->set_data("\xc3\xa4");  // valid as a whole, not per row
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(1) + Bytes<int32_t>(2) +
                                Bytes<int32_t>(2));
       },
       "chunks[0].payload[1] (column \"s\"): row 0 of this chunk is not valid UTF-8 (byte 0xc3 "
       "at position 0 of the row's 1 bytes)"},
      {"an overlong encoding",
       [&](auto& m) {
         col(m, 1)->set_data("\xc0\xaf");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(2) + Bytes<int32_t>(2) +
                                Bytes<int32_t>(2));
       },
       "row 0 of this chunk is not valid UTF-8 (byte 0xc0 at position 0"},
      {"a surrogate",
       [&](auto& m) {
         col(m, 1)->set_data("\xed\xa0\x80");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(3) + Bytes<int32_t>(3) +
                                Bytes<int32_t>(3));
       },
       "row 0 of this chunk is not valid UTF-8 (byte 0xed at position 0"},
      {"too few payload rows in total",
       [&](auto& m) { *col(m, 0) = WireChunk(good.columns[0], 0, 2); },
       "spec.payload[0] (column \"a\"): 2 rows in total, but the keys have 3"},
      {"too many payload rows in total",
       [&](auto& m) {
         *m.emplace_back().mutable_chunk()->add_payload() = WireChunk(good.columns[1], 0, 1);
       },
       "spec.payload[1] (column \"s\"): 4 rows in total, but the keys have 3"},
      {"a column never sent",
       [&](auto& m) { m[1].mutable_chunk()->mutable_payload()->DeleteSubrange(2, 1); },
       "spec.payload[2] (column \"f\"): 0 rows in total, but the keys have 3"},
      {"a bad chunk after good ones",
       [&](auto& m) {
         auto* bad = m.emplace_back().mutable_chunk()->add_payload();
         *bad = WireChunk(good.columns[0], 0, 1);
         bad->set_type(v1::COLUMN_TYPE_FLOAT64);
       },
       "chunks[1].payload[0] (column \"a\").type: COLUMN_TYPE_FLOAT64, but spec.payload "
       "declares it COLUMN_TYPE_INT64"},
  };
  for (const Case& c : cases) {
    std::vector<v1::BuildIndexRequest> messages = SmallBuild(SmallTable(7), true);
    c.mutate(messages);
    const grpc::Status s = Build(messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_THAT(s.error_message(), HasSubstr(c.message)) << c.name;
  }
  // BINARY is not checked for UTF-8 (the same bytes as the refused STRING).
  Table binary = SmallTable(7);
  binary.columns[1].type = v1::COLUMN_TYPE_BINARY;
  binary.columns[1].cells[1] = std::string("\xff\xc3");
  std::vector<v1::BuildIndexRequest> messages = SmallBuild(binary, true);
  messages[0].mutable_spec()->set_name("bin");
  EXPECT_TRUE(Build(messages).ok());

  // Nothing above was installed: version 1 still serves its own payload.
  EXPECT_EQ(Describe("dim").version(), 1u);
  const auto answers = Lookups({LookupOf("dim", {1, 2, 3, 4}, {"s", "a", "f"}, true, 9)});
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].has_error()) << answers[0].error().message();
  EXPECT_EQ(answers[0].index_version(), 1u);
  const std::vector<uint32_t> rows = {0, 1, 2, kNoRow};
  EXPECT_EQ(ReadColumn(answers[0].columns(0), 4), CellsAt(good.Column("s"), rows));
  EXPECT_EQ(ReadColumn(answers[0].columns(1), 4), CellsAt(good.Column("a"), rows));
  EXPECT_EQ(ReadColumn(answers[0].columns(2), 4), CellsAt(good.Column("f"), rows));
}

// Select errors are in-band for their batch; the stream goes on. An index
// without payload has nothing to select.
TEST_F(PayloadIntegrationTest, SelectErrorsAreInBand) {
  Start();
  ASSERT_TRUE(Build(SmallBuild(SmallTable(5), false)).ok());
  v1::BuildIndexRequest plain_spec;
  plain_spec.mutable_spec()->set_name("plain");
  plain_spec.mutable_spec()->set_capacity(16);
  ASSERT_TRUE(Build({plain_spec, testing::ChunkMsg({1, 2})}).ok());

  const auto answers = Lookups(
      {LookupOf("dim", {1}, {"a", "zz"}, true, 1), LookupOf("dim", {1}, {"s", "f", "s"}, false, 2),
       LookupOf("plain", {1}, {"a"}, true, 3), LookupOf("dim", {1}, {"a"}, true, 4)});
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answers[0].error().message(),
            "select[1]: index \"dim\" has no payload column \"zz\" (its payload columns are "
            "\"a\", \"s\", \"f\")");
  EXPECT_EQ(answers[1].error().message(),
            "select[2]: column \"s\" is selected twice (also select[0])");
  EXPECT_EQ(answers[2].error().message(),
            "select[0]: index \"plain\" has no payload column \"a\" (it has no payload columns)");
  EXPECT_FALSE(answers[3].has_error());
  EXPECT_EQ(answers[3].batch_id(), 4u);
  ASSERT_EQ(answers[3].columns_size(), 1);

  v1::JoinRequest j;
  j.set_index("dim");
  j.set_batch_id(8);
  *j.add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{1, 2});
  j.add_select("nope");
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].batch_id(), 8u);
  EXPECT_EQ(joined[0].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(joined[0].error().message(),
              HasSubstr("select[0]: index \"dim\" has no payload column \"nope\""));
}

// count_only: count, overflow, statistics, found and probes; no pairs and no
// columns, whatever the capacity and the select.
TEST_F(PayloadIntegrationTest, CountOnlyJoinsSizeALaterRequest) {
  Start();
  ASSERT_TRUE(Build(SmallBuild(SmallTable(5), false)).ok());
  v1::JoinRequest j;
  j.set_index("dim");
  j.add_select("s");
  auto* counted = j.add_batches();
  *counted->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{3, 9, 1, 1, 2});
  counted->set_count_only(true);
  counted->set_capacity(1);  // ignored
  counted->set_want_found(true);
  counted->set_want_probes(true);
  auto* paired = j.add_batches();
  *paired->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{3, 9, 1});
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  const v1::JoinBatchResult& c = joined[0].results(0);
  EXPECT_EQ(c.count(), 4u);
  EXPECT_EQ(c.capacity(), 0u);
  EXPECT_FALSE(c.overflow());
  EXPECT_TRUE(c.left_rows().empty());
  EXPECT_TRUE(c.right_rows().empty());
  EXPECT_EQ(c.columns_size(), 0);
  EXPECT_EQ(c.found(), std::string("\1\0\1\1\1", 5));
  EXPECT_EQ(UnpackColumn<uint32_t>(c.probes()).size(), 5u);
  EXPECT_EQ(c.statistics().found(), 4u);
  EXPECT_EQ(c.statistics().missing(), 1u);
  const v1::JoinBatchResult& p = joined[0].results(1);
  EXPECT_EQ(p.batch(), 1u);
  EXPECT_EQ(p.count(), 2u);
  EXPECT_EQ(UnpackColumn<uint32_t>(p.right_rows()), (std::vector<uint32_t>{2, 0}));
  ASSERT_EQ(p.columns_size(), 1);
  EXPECT_EQ(ReadColumn(p.columns(0), 2), CellsAt(SmallTable(5).Column("s"), {2, 0}));
}

// A join whose results exceed the max message size is split into messages of
// at most that size, in request order (several requests on one stream, with a
// window of two in flight), which reassemble into exactly what one message
// carries from a server with the default limit.
TEST_F(PayloadIntegrationTest, MultiMessageJoinsReassembleToTheSingleMessageResult) {
  Start({"--max-message-bytes=4096", "--max-inflight-per-stream=2"});
  ServerProcess big(ServerOptions{});
  ASSERT_TRUE(big.ready()) << big.log();
  auto big_stub = NewStub(big);
  std::mt19937_64 rng(4096);
  const Table t = RandomTable(1200, 900,
                              {v1::COLUMN_TYPE_INT64, v1::COLUMN_TYPE_STRING, v1::COLUMN_TYPE_BOOL,
                               v1::COLUMN_TYPE_FLOAT32},
                              rng, 25);
  std::vector<v1::BuildIndexRequest> messages = ChunksOf(t, 60, rng, false, /*separate=*/true);
  messages.insert(messages.begin(), SpecOf("dim", t, 4096));
  for (const auto& m : messages) ASSERT_LT(m.ByteSizeLong(), 4096u);
  ASSERT_TRUE(Build(messages).ok());
  ASSERT_TRUE(testing::Build(*big_stub, messages).ok());

  auto keys = [&](size_t n, uint32_t hi) {
    std::vector<uint32_t> k;
    for (size_t i = 0; i < n; ++i) k.push_back(1 + static_cast<uint32_t>(rng() % hi));
    return k;
  };
  std::vector<v1::JoinRequest> requests(4);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_index("dim");
    requests[i].set_batch_id(100 + i);
  }
  // 0: one batch, every column: many messages.
  *requests[0].add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(keys(500, 1000));
  for (const auto& c : t.columns) requests[0].add_select(c.name);
  // 1: a small batch, a count-only one, and one with found and probes.
  *requests[1].add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(keys(7, 1000));
  auto* counted = requests[1].add_batches();
  *counted->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys(100, 1000));
  counted->set_count_only(true);
  counted->set_want_found(true);
  auto* probed = requests[1].add_batches();
  *probed->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys(250, 1000));
  probed->set_want_found(true);
  probed->set_want_probes(true);
  probed->set_capacity(200);  // truncated
  requests[1].add_select("c1");
  requests[1].add_select("c2");
  // 2: nothing matches.
  *requests[2].add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>(300, 5000));
  requests[2].add_select("c1");
  // 3: pairs only (no select), more than one message of them.
  *requests[3].add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(keys(800, 900));
  for (const auto& r : requests) ASSERT_LT(r.ByteSizeLong(), 4096u);

  const std::vector<v1::JoinResponse> small = Joins(requests);
  size_t parts = 0;
  const std::vector<v1::JoinResponse> whole = Reassemble(small, 4096, &parts);
  EXPECT_GT(parts, 12u);
  const std::vector<v1::JoinResponse> single = Joins(*big_stub, requests);
  ASSERT_EQ(single.size(), requests.size());
  ASSERT_EQ(whole.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_FALSE(single[i].more());
    EXPECT_FALSE(whole[i].has_error()) << whole[i].error().message();
    EXPECT_TRUE(whole[i].SerializeAsString() == single[i].SerializeAsString()) << "request " << i;
  }
  // The single-message results are right, too.
  const v1::JoinBatchResult& r0 = single[0].results(0);
  const auto right = UnpackColumn<uint32_t>(r0.right_rows());
  EXPECT_EQ(ReadColumn(r0.columns(1), right.size()), CellsAt(t.columns[1], right));
  EXPECT_EQ(single[1].results(2).capacity(), 200u);
  EXPECT_EQ(UnpackColumn<uint32_t>(single[1].results(2).left_rows()).size(),
            std::min<uint64_t>(200, single[1].results(2).count()));
}

// --max-result-bytes bounds a request's results (RESOURCE_EXHAUSTED naming the
// flag); GetServerInfo reports it; string columns share what is left.
TEST_F(PayloadIntegrationTest, MaxResultBytesBoundsOneRequestsResults) {
  Start({"--max-result-bytes=64K"});
  EXPECT_EQ(Info().max_result_bytes(), 65536u);
  Table t;
  std::mt19937_64 rng(64);
  for (uint32_t k = 1; k <= 5000; ++k) t.keys.push_back(k);
  t.columns.push_back(
      ModelColumn{"n", v1::COLUMN_TYPE_INT64, RandomCells(v1::COLUMN_TYPE_INT64, 5000, rng, 0)});
  t.columns.push_back(
      ModelColumn{"s", v1::COLUMN_TYPE_STRING, std::vector<Cell>(5000, std::string(10, 'x'))});
  std::vector<v1::BuildIndexRequest> messages = ChunksOf(t, 1000, rng);
  messages.insert(messages.begin(), SpecOf("dim", t, 16384));
  ASSERT_TRUE(Build(messages).ok());

  // Join: 5000 pairs (40000 bytes) fit; with the int64 column (40000 more) not
  // (80625 bytes of values, 1024 of the batch's objects, 257 of the column's).
  v1::JoinRequest j;
  j.set_index("dim");
  *j.add_batches()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(t.keys);
  v1::JoinRequest with_column = j;
  with_column.add_select("n");
  v1::JoinRequest sized = with_column;  // the same, capacity cut to fit
  sized.mutable_batches(0)->set_capacity(2000);
  const auto joined = Joins({j, with_column, sized});
  ASSERT_EQ(joined.size(), 3u);
  EXPECT_FALSE(joined[0].has_error()) << joined[0].error().message();
  EXPECT_EQ(joined[1].error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(joined[1].error().message(),
              HasSubstr("need 81906 bytes, above --max-result-bytes=65536"));
  EXPECT_FALSE(joined[2].has_error()) << joined[2].error().message();
  EXPECT_EQ(joined[2].results(0).count(), 5000u);
  EXPECT_EQ(joined[2].results(0).columns(0).length(), 2000u);

  // Lookup: 5000 rows (25000 bytes) and the int64 column (40625) exceed 64 KiB.
  const auto answers =
      Lookups({LookupOf("dim", t.keys, {"n"}, true, 1), LookupOf("dim", t.keys, {}, true, 2),
               LookupOf("dim", std::vector<uint32_t>(t.keys.begin(), t.keys.begin() + 2000), {"s"},
                        false, 3),
               LookupOf("dim", std::vector<uint32_t>(t.keys.begin(), t.keys.begin() + 3000), {"s"},
                        true, 4)});
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(answers[0].error().message(), HasSubstr("above --max-result-bytes=65536"));
  EXPECT_FALSE(answers[1].has_error());
  // 2000 strings of 10 bytes: 20000 value bytes fit beside 10000 + 8004 + 250.
  EXPECT_FALSE(answers[2].has_error()) << answers[2].error().message();
  // 3000: 15000 + 12004 + 375 bytes leave 38157 for 30000 value bytes... which fit;
  EXPECT_FALSE(answers[3].has_error()) << answers[3].error().message();
  // but 4000 (20000 + 16004 + 500; 40000 value bytes in 29032) do not.
  const auto refused = Lookups({LookupOf(
      "dim", std::vector<uint32_t>(t.keys.begin(), t.keys.begin() + 4000), {"s"}, true, 5)});
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Its share: (65536 - 36504) bytes for the one string column.
  EXPECT_THAT(refused[0].error().message(), HasSubstr("share what --max-message-bytes and"));
  EXPECT_THAT(refused[0].error().message(), HasSubstr("29032 bytes each here"));
  // With a fixed-width column selected before it, the string column's share is
  // what the rest leaves: 3000 rows, 15000 + (375 + 24000) + (375 + 12004) bytes.
  const auto after_fixed = Lookups({LookupOf(
      "dim", std::vector<uint32_t>(t.keys.begin(), t.keys.begin() + 3000), {"n", "s"}, true, 6)});
  ASSERT_EQ(after_fixed.size(), 1u);
  EXPECT_EQ(after_fixed[0].error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(after_fixed[0].error().message(), HasSubstr(": 13782 bytes each here"));
}

// Regression: a join of many batches without pairs made
// per batch a result, engine batch and one Column per selected column that
// --max-result-bytes did not count (GatheredFixedBytes of 0 rows is ~0), so a
// small request of empty batches selecting many columns allocated without
// bound. Every batch now costs 1024 bytes and every selected column of a
// non-count-only batch 256 plus its name, refused before anything is made.
TEST_F(PayloadIntegrationTest, MaxResultBytesCountsEveryBatchsObjects) {
  Start({"--max-result-bytes=64K"});
  ASSERT_TRUE(Build(SmallBuild(SmallTable(5), false)).ok());
  auto empty_batches = [](int n, bool select) {
    v1::JoinRequest j;
    j.set_index("dim");
    if (select) {
      for (const char* c : {"a", "s", "f"}) j.add_select(c);
    }
    for (int i = 0; i < n; ++i) j.add_batches()->mutable_keys()->mutable_values();  // 0 rows
    return j;
  };
  // 10 batches selecting three columns: 10 x (1024 + 3 x 257) + 4 per string
  // offsets fit.
  // 60 batches: 60 x 1024 = 61440 bytes of batches fit, with 60 x 771 more not.
  // 70 batches without select: 71680 bytes of batches alone do not.
  const auto joined = Joins({empty_batches(10, true), empty_batches(60, false),
                             empty_batches(60, true), empty_batches(70, false)});
  ASSERT_EQ(joined.size(), 4u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  ASSERT_EQ(joined[0].results_size(), 10);
  ASSERT_EQ(joined[0].results(9).columns_size(), 3);
  EXPECT_EQ(joined[0].results(9).columns(1).name(), "s");
  EXPECT_EQ(joined[0].results(9).columns(1).length(), 0u);
  EXPECT_FALSE(joined[1].has_error()) << joined[1].error().message();
  EXPECT_EQ(joined[1].results_size(), 60);
  EXPECT_EQ(joined[2].error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(joined[2].error().message(),
              HasSubstr("60 batches (pair capacities and 3 gathered columns) need 107940 bytes, "
                        "above --max-result-bytes=65536"));
  EXPECT_EQ(joined[3].error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(joined[3].error().message(),
              HasSubstr("70 batches (pair capacities) need 71680 bytes, above "
                        "--max-result-bytes=65536"));
}

// Regression: a batch's first part (message and result
// fields, found, probes and every selected column's header) must fit in one
// message; the old check compared found and probes alone with the response
// limit, so a batch within ~150 bytes of it ran and then failed to send
// (RESOURCE_EXHAUSTED) instead of INVALID_ARGUMENT before the run. At
// --max-message-bytes=64K a message has 61440 bytes; a first part takes 150 +
// 5 bytes a row, + 64 for column "a" (int64), + 68 for "s" (a string's first
// offset).
TEST_F(PayloadIntegrationTest, TheFirstPartMustFitInOneMessageBeforeTheRun) {
  Start({"--max-message-bytes=64K"});
  ASSERT_TRUE(Build(SmallBuild(SmallTable(5), false)).ok());
  auto probed = [](size_t rows, const char* select) {
    v1::JoinRequest j;
    j.set_index("dim");
    if (select != nullptr) j.add_select(select);
    auto* b = j.add_batches();
    *b->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>(rows, 7));
    b->set_want_found(true);
    b->set_want_probes(true);
    return j;
  };
  struct Case {
    const char* select;
    size_t fits;  // the most rows whose first part fits
  };
  for (const Case& c : {Case{nullptr, 12258}, Case{"a", 12245}, Case{"s", 12244}}) {
    SCOPED_TRACE(c.select == nullptr ? "no select" : c.select);
    const auto joined =
        Joins({probed(c.fits, c.select), probed(c.fits + 1, c.select), probed(12288, c.select)});
    ASSERT_EQ(joined.size(), 3u);
    ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
    EXPECT_EQ(joined[0].results(0).found().size(), c.fits);
    for (int i : {1, 2}) {
      EXPECT_EQ(joined[i].error().code(), grpc::StatusCode::INVALID_ARGUMENT) << i;
      EXPECT_THAT(joined[i].error().message(),
                  HasSubstr("batches[0]: the batch's first response part (found and probes of "));
      EXPECT_THAT(joined[i].error().message(), HasSubstr("more than the 61440 bytes one message "
                                                         "of --max-message-bytes=65536 carries"));
    }
  }
}

// The default --max-result-bytes: an eighth of physical memory, at most 4 GiB.
TEST_F(PayloadIntegrationTest, DefaultMaxResultBytesIsReported) {
  Start();
  const uint64_t limit = Info().max_result_bytes();
  EXPECT_GT(limit, 0u);
  EXPECT_LE(limit, uint64_t{4} << 30);
}

using gpujoin::testing::Eventually;

// The memory budget charges payload: a spec whose fixed-width payload alone does
// not fit is refused at the spec, a rebuild whose strings stop fitting at the
// chunk that crosses the budget; the serving version, its payload and the
// budget's use are as before, and a build that fits holds exactly its bytes.
TEST_F(PayloadIntegrationTest, TheMemoryBudgetChargesPayload) {
  // Sizes scale by k: the CUDA backend rounds each transient allocation of a
  // build up to its pool's 2 MiB pages, so a 2 MiB budget fits no CUDA build.
  const uint32_t k = gpujoin::testing::TestBackend() == "cpu" ? 1 : 32;
  Start({absl::StrCat("--device-memory-limit=", 2 * k, "M")});
  const Table small = SmallTable(1);
  v1::BuildIndexResponse built;
  ASSERT_TRUE(Build(SmallBuild(small, false), &built).ok());
  EXPECT_GT(built.index().payload_bytes(), 0u);
  EXPECT_EQ(Info().device_memory_used_bytes(), built.index().device_bytes());

  // 2^16 k slots: a 512 k KiB table and 4 x 512 k KiB of int64 payload: refused at the spec.
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("dim");
  spec.mutable_spec()->set_replace(true);
  spec.mutable_spec()->set_capacity(uint64_t{k} << 16);
  for (int i = 0; i < 4; ++i) {
    auto* p = spec.mutable_spec()->add_payload();
    p->set_name("n" + std::to_string(i));
    p->set_type(v1::COLUMN_TYPE_INT64);
  }
  grpc::Status s = Build({spec});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(),
              HasSubstr(absl::StrCat(524288 * k, " table bytes + ", 2097152 * k,
                                     " bytes for 4 payload columns")));
  EXPECT_THAT(s.error_message(), HasSubstr("--device-memory-limit"));

  // An auto-sized rebuild with 64 k KiB of strings per chunk: refused part-way.
  grpc::ClientContext ctx;
  v1::BuildIndexResponse resp;
  auto writer = stub_->BuildIndex(&ctx, &resp);
  v1::BuildIndexRequest strings_spec;
  strings_spec.mutable_spec()->set_name("dim");
  strings_spec.mutable_spec()->set_replace(true);
  auto* p = strings_spec.mutable_spec()->add_payload();
  p->set_name("s");
  p->set_type(v1::COLUMN_TYPE_STRING);
  writer->Write(strings_spec);
  const ModelColumn text{"s", v1::COLUMN_TYPE_STRING,
                         std::vector<Cell>(256, std::string(256 * k, 'q'))};
  int written = 0;
  for (; written < 64; ++written) {  // 4 k MiB of strings against a 2 k MiB budget
    v1::BuildIndexRequest chunk =
        testing::ChunkMsg(testing::Iota(256, 1 + 256 * static_cast<uint32_t>(written)));
    *chunk.mutable_chunk()->add_payload() = WireChunk(text, 0, 256);
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  s = writer->Finish();
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("device memory budget exceeded"));
  EXPECT_THAT(s.error_message(), HasSubstr("bytes for 1 payload columns"));
  const size_t at = s.error_message().find("chunks[");
  ASSERT_NE(at, std::string::npos) << s.error_message();
  EXPECT_LT(std::atoi(s.error_message().c_str() + at + 7), 32) << s.error_message();

  EXPECT_TRUE(Eventually([&] { return Info().staged_bytes() == 0; }));
  EXPECT_EQ(Info().device_memory_used_bytes(), built.index().device_bytes());
  EXPECT_EQ(Describe("dim").version(), 1u);
  const auto answers = Lookups({LookupOf("dim", {3, 1}, {"s", "a"}, true, 1)});
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].has_error()) << answers[0].error().message();
  EXPECT_EQ(ReadColumn(answers[0].columns(0), 2), CellsAt(small.Column("s"), {2, 0}));
  EXPECT_EQ(ReadColumn(answers[0].columns(1), 2), CellsAt(small.Column("a"), {2, 0}));
}

// Staged payload bytes count against --max-build-staged-bytes like keys: the
// chunk that crosses it is refused naming the flag, and the staging is freed.
TEST_F(PayloadIntegrationTest, StagedPayloadCountsAgainstTheStagingLimit) {
  Start({"--max-build-staged-bytes=1M"});
  grpc::ClientContext ctx;
  v1::BuildIndexResponse resp;
  auto writer = stub_->BuildIndex(&ctx, &resp);
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("big");
  auto* p = spec.mutable_spec()->add_payload();
  p->set_name("s");
  p->set_type(v1::COLUMN_TYPE_BINARY);
  writer->Write(spec);
  // Payload-only chunks (no keys): 128 KiB of values each.
  const ModelColumn blob{"s", v1::COLUMN_TYPE_BINARY,
                         std::vector<Cell>(64, std::string(2048, 'b'))};
  for (int i = 0; i < 32; ++i) {
    v1::BuildIndexRequest chunk;
    *chunk.mutable_chunk()->add_payload() = WireChunk(blob, 0, 64);
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max-build-staged-bytes=1048576"));
  const size_t at = s.error_message().find("chunks[");
  ASSERT_NE(at, std::string::npos) << s.error_message();
  EXPECT_LE(std::atoi(s.error_message().c_str() + at + 7), 8) << s.error_message();
  EXPECT_TRUE(Eventually([&] { return Info().staged_bytes() == 0; }));
  EXPECT_EQ(Info().index_count(), 0u);
}

// Eight streams check every row of every answer while the index is rebuilt ten
// times, every other rebuild failing on its payload after good chunks: each
// answer's payload is the one of its index_version (column v = version * 10^6 +
// row, s = "v<version>r<row>"), never a mix, never a failed build's.
TEST_F(PayloadIntegrationTest, RebuildsUnderEightCheckingStreamsNeverMixPayload) {
  Start();
  constexpr uint32_t kRows = 4000;
  auto version_table = [&](uint64_t version) {
    Table t;
    t.keys = testing::Iota(kRows, 1);
    ModelColumn v{"v", v1::COLUMN_TYPE_INT64, {}};
    ModelColumn str{"s", v1::COLUMN_TYPE_STRING, {}};
    for (uint32_t r = 0; r < kRows; ++r) {
      v.cells.push_back(Bytes<int64_t>(static_cast<int64_t>(version * 1000000 + r)));
      str.cells.push_back("v" + std::to_string(version) + "r" + std::to_string(r));
    }
    t.columns = {v, str};
    return t;
  };
  auto build_messages = [&](const Table& t, bool replace) {
    std::vector<v1::BuildIndexRequest> m = {SpecOf("hot", t, 1 << 13, replace)};
    for (uint32_t first = 0; first < kRows; first += 1000) {
      v1::BuildIndexRequest chunk = testing::ChunkMsg(
          std::vector<uint32_t>(t.keys.begin() + first, t.keys.begin() + first + 1000));
      // Payload boundaries off the keys' by 333 rows.
      const uint32_t p = first == 0 ? 0 : first - 333;
      const uint32_t n = first + 1000 >= kRows ? kRows - p : first + 667 - p;
      for (const auto& c : t.columns) *chunk.mutable_chunk()->add_payload() = WireChunk(c, p, n);
      m.push_back(chunk);
    }
    return m;
  };
  ASSERT_TRUE(Build(build_messages(version_table(1), false)).ok());

  constexpr int kStreams = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::atomic<int>> answered(kStreams);
  std::vector<std::thread> streams;
  for (int st = 0; st < kStreams; ++st) {
    streams.emplace_back([&, st] {
      auto own = NewStub(*server_);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      auto stream = own->Lookup(&ctx);
      uint64_t id = 0;
      const std::vector<uint32_t> keys = testing::Iota(kRows, 1);
      while (!stop.load() || answered[st].load() == 0) {
        // The bytes path and the protobuf path in turn.
        if (!stream->Write(LookupOf("hot", keys, {"s", "v"}, id % 2 == 0, id))) break;
        v1::LookupResponse r;
        if (!stream->Read(&r)) break;
        if (r.has_error() || r.batch_id() != id || r.columns_size() != 2) {
          failures.fetch_add(1);
          ADD_FAILURE() << "stream " << st << " batch " << id << ": " << r.error().message();
          break;
        }
        ++id;
        answered[st].fetch_add(1);
        const uint64_t version = r.index_version();
        const Table expected = version_table(version);
        const std::vector<uint32_t> rows = testing::Iota(kRows, 0);
        if (ReadColumn(r.columns(0), kRows) != CellsAt(expected.columns[1], rows) ||
            ReadColumn(r.columns(1), kRows) != CellsAt(expected.columns[0], rows)) {
          failures.fetch_add(1);
          ADD_FAILURE() << "stream " << st << " batch " << id << ": version " << version
                        << " answered with another version's payload";
          break;
        }
      }
      stream->WritesDone();
      const grpc::Status s = stream->Finish();
      if (!s.ok()) {
        failures.fetch_add(1);
        ADD_FAILURE() << "stream " << st << ": " << s.error_message();
      }
    });
  }
  uint64_t expected_version = 1;
  for (int round = 1; round <= 10; ++round) {
    const Table next = version_table(expected_version + 1);
    std::vector<v1::BuildIndexRequest> m = build_messages(next, true);
    if (round % 2 == 0) {
      // Good chunks, then one whose payload is refused (or, every fourth round, a
      // column one row short at the end): nothing is installed.
      if (round % 4 == 0) {
        m.back().mutable_chunk()->mutable_payload(1)->set_type(v1::COLUMN_TYPE_BINARY);
      } else {
        m.back().mutable_chunk()->mutable_payload(0)->CopyFrom(
            WireChunk(next.columns[0], 0, m.back().chunk().payload(0).length() - 1));
      }
      const grpc::Status s = Build(m);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    } else {
      v1::BuildIndexResponse r;
      const grpc::Status s = Build(m, &r);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(r.index().version(), expected_version + 1);
      expected_version = r.index().version();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.store(true);
  for (auto& th : streams) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int st = 0; st < kStreams; ++st) EXPECT_GT(answered[st].load(), 0) << "stream " << st;
  EXPECT_EQ(Describe("hot").version(), expected_version);
}

// gpujoin_index_payload_bytes{index} follows the live version (gone with a
// drop); gpujoin_gathered_bytes_total{rpc} counts the gathered bytes of the
// responses exactly.
TEST_F(PayloadIntegrationTest, PayloadMetrics) {
  Start();
  v1::BuildIndexResponse built;
  ASSERT_TRUE(Build(SmallBuild(SmallTable(3), false), &built).ok());
  auto metrics = [&] { return HttpGet(server_->metrics_address(), "/metrics"); };
  EXPECT_EQ(MetricValue(metrics(), "gpujoin_index_payload_bytes{index=\"dim\"}"),
            built.index().payload_bytes());
  EXPECT_EQ(MetricValue(metrics(), "gpujoin_gathered_bytes_total{rpc=\"Lookup\"}"), 0);
  EXPECT_EQ(MetricValue(metrics(), "gpujoin_gathered_bytes_total{rpc=\"Join\"}"), 0);

  auto bytes_of = [](const google::protobuf::RepeatedPtrField<v1::Column>& columns) {
    uint64_t n = 0;
    for (const auto& c : columns) n += c.data().size() + c.offsets().size() + c.validity().size();
    return n;
  };
  const auto answers =
      Lookups({LookupOf("dim", {1, 2, 3, 9}, {"a", "s", "f"}, true, 1),
               LookupOf("dim", {2, 2}, {"s"}, false, 2), LookupOf("dim", {2, 2}, {}, false, 3)});
  ASSERT_EQ(answers.size(), 3u);
  const uint64_t looked = bytes_of(answers[0].columns()) + bytes_of(answers[1].columns());
  EXPECT_GT(looked, 0u);
  v1::JoinRequest j;
  j.set_index("dim");
  *j.add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{3, 1, 7});
  *j.add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{2});
  j.add_select("s");
  j.add_select("a");
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  const uint64_t gathered =
      bytes_of(joined[0].results(0).columns()) + bytes_of(joined[0].results(1).columns());
  EXPECT_TRUE(Eventually([&] {
    const std::string m = metrics();
    return MetricValue(m, "gpujoin_gathered_bytes_total{rpc=\"Lookup\"}") == looked &&
           MetricValue(m, "gpujoin_gathered_bytes_total{rpc=\"Join\"}") == gathered;
  })) << metrics();

  // A rebuild without payload sets the gauge to 0; a drop removes the series.
  v1::BuildIndexRequest plain = SpecOf("dim", Table{}, 16, true);
  ASSERT_TRUE(Build({plain, testing::ChunkMsg({1})}).ok());
  EXPECT_EQ(MetricValue(metrics(), "gpujoin_index_payload_bytes{index=\"dim\"}"), 0);
  grpc::ClientContext ctx;
  v1::DropIndexRequest drop;
  drop.set_name("dim");
  v1::DropIndexResponse dropped;
  ASSERT_TRUE(stub_->DropIndex(&ctx, drop, &dropped).ok());
  EXPECT_TRUE(std::isnan(MetricValue(metrics(), "gpujoin_index_payload_bytes{index=\"dim\"}")));
}

// Batch mode with uint64 keys: payload is aligned with every row of every chunk,
// masked-out rows included, and a key keeps the payload of its lowest valid row
// (whose row ID it returns). Explicit values: the payload of the lowest row, whatever
// the values.
TEST_F(PayloadIntegrationTest, BatchModeWideKeysAndExplicitValues) {
  Start();
  std::mt19937_64 rng(64);
  // Two chunks of 300 rows over 200 distinct keys (above 2^32), every fifth row masked.
  std::vector<uint64_t> keys;
  std::vector<uint32_t> valid, row_ids;
  for (uint32_t r = 0; r < 600; ++r) {
    keys.push_back((uint64_t{1 + rng() % 200} << 33) | 5);
    valid.push_back(r % 5 == 2 ? 0 : 1);
    row_ids.push_back(r < 300 ? 1000 + r : 5000 + (r - 300));
  }
  const ModelColumn p{"p", v1::COLUMN_TYPE_STRING, RandomCells(v1::COLUMN_TYPE_STRING, 600, rng)};
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("batch");
  spec.mutable_spec()->set_capacity(1024);
  spec.mutable_spec()->set_batch_mode(true);
  spec.mutable_spec()->set_key_type(v1::KEY_TYPE_UINT64);
  auto* ps = spec.mutable_spec()->add_payload();
  ps->set_name("p");
  ps->set_type(v1::COLUMN_TYPE_STRING);
  std::vector<v1::BuildIndexRequest> messages = {spec};
  for (uint32_t c = 0; c < 2; ++c) {
    v1::BuildIndexRequest m;
    *m.mutable_chunk()->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(
        std::vector<uint64_t>(keys.begin() + 300 * c, keys.begin() + 300 * (c + 1)));
    *m.mutable_chunk()->mutable_validity()->mutable_packed() = PackColumn<uint32_t>(
        std::vector<uint32_t>(valid.begin() + 300 * c, valid.begin() + 300 * (c + 1)));
    m.mutable_chunk()->set_row_base(c == 0 ? 1000 : 5000);
    messages.push_back(m);
  }
  // The payload in three payload-only chunks of 101, 398 and 101 rows.
  for (const auto& [first, n] :
       std::vector<std::pair<size_t, size_t>>{{0, 101}, {101, 398}, {499, 101}}) {
    *messages.emplace_back().mutable_chunk()->add_payload() = WireChunk(p, first, n);
  }
  ASSERT_TRUE(Build(messages).ok());
  std::map<uint64_t, uint32_t> winner;  // key -> lowest valid row
  for (uint32_t r = 0; r < 600; ++r) {
    if (valid[r] != 0) winner.emplace(keys[r], r);
  }
  v1::LookupRequest q;
  q.set_index("batch");
  q.add_select("p");
  std::vector<uint64_t> probe_keys;
  for (uint64_t k = 1; k <= 220; ++k) probe_keys.push_back((k << 33) | 5);
  *q.mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(probe_keys);
  const auto answers = Lookups({q});
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].has_error()) << answers[0].error().message();
  const auto values = UnpackColumn<uint32_t>(answers[0].values());
  std::vector<uint32_t> rows;
  for (size_t i = 0; i < probe_keys.size(); ++i) {
    auto it = winner.find(probe_keys[i]);
    rows.push_back(it == winner.end() ? kNoRow : it->second);
    EXPECT_EQ(values[i], it == winner.end() ? kNoRow : row_ids[it->second]) << i;
  }
  EXPECT_EQ(ReadColumn(answers[0].columns(0), probe_keys.size()), CellsAt(p, rows));

  // Explicit values, in chunks of their own boundaries: the lowest row's payload.
  Table t = RandomTable(500, 120, {v1::COLUMN_TYPE_FLOAT64, v1::COLUMN_TYPE_BOOL}, rng);
  std::vector<v1::BuildIndexRequest> explicit_messages = ChunksOf(t, 70, rng);
  v1::BuildIndexRequest explicit_spec = SpecOf("explicit", t, 512);
  explicit_spec.mutable_spec()->set_explicit_values(true);
  explicit_messages.insert(explicit_messages.begin(), explicit_spec);
  std::vector<uint32_t> explicit_values;
  for (uint32_t r = 0; r < 500; ++r) explicit_values.push_back(7 * r + 3);
  for (size_t first = 0; first < 500; first += 90) {
    auto* v = explicit_messages.emplace_back().mutable_chunk()->mutable_values();
    for (size_t r = first; r < std::min<size_t>(500, first + 90); ++r) {
      v->mutable_values()->add_v(explicit_values[r]);
    }
  }
  ASSERT_TRUE(Build(explicit_messages).ok());
  const std::vector<uint32_t> q2 = testing::Iota(130, 1);
  const auto explicit_answers = Lookups({LookupOf("explicit", q2, {"c1", "c0"}, true, 1)});
  ASSERT_EQ(explicit_answers.size(), 1u);
  ASSERT_FALSE(explicit_answers[0].has_error()) << explicit_answers[0].error().message();
  const std::vector<uint32_t> expected_rows = WinnerRows(t, q2);
  std::vector<uint32_t> expected_values;
  for (uint32_t r : expected_rows)
    expected_values.push_back(r == kNoRow ? kNoRow : explicit_values[r]);
  EXPECT_EQ(UnpackColumn<uint32_t>(explicit_answers[0].values()), expected_values);
  EXPECT_EQ(ReadColumn(explicit_answers[0].columns(0), q2.size()),
            CellsAt(t.columns[1], expected_rows));
  EXPECT_EQ(ReadColumn(explicit_answers[0].columns(1), q2.size()),
            CellsAt(t.columns[0], expected_rows));
}

}  // namespace
}  // namespace gpujoin::server
