// gpujoin-loadtest --payload: the two payload columns of the load tester's
// index (derived from each row's value), the check of a lookup answer's
// payload rows (a wrong byte, a swapped column, a null on a hit must be
// caught), the echo service answering selecting lookups, and the Redis values
// that carry the same payload.
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "echo_clients.hpp"
#include "redis_stream.hpp"
#include "runner.hpp"
#include "payload.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {
namespace {

WorkloadSpec PayloadSpec() {
  WorkloadSpec s;
  s.build_keys = 4000;
  s.hit_ratio = 0.7;
  s.seed = 9;
  s.select_payload = true;
  return s;
}

// The answer a server gives a batch: values and found flags, and the payload
// rows of the values found (null where missing).
client::LookupResult RightAnswer(const PoolBatch& b) {
  client::LookupResult r;
  r.values = b.expected_values;
  r.found = b.expected_found;
  r.statistics.found = b.hits;
  r.statistics.missing = b.rows() - b.hits;
  r.columns = PayloadColumnsOf(b.expected_values, b.expected_found);
  return r;
}

size_t FirstRow(const PoolBatch& b, bool found) {
  size_t r = 0;
  while ((b.expected_found[r] != 0) != found) ++r;
  return r;
}

TEST(Payload, RowsDeriveFromTheValueAndSpanTheirTypes) {
  std::set<size_t> tag_lengths;
  bool negative = false, positive = false;
  for (uint32_t v = 0; v < 4096; ++v) {
    EXPECT_EQ(PayloadInt64Of(v), PayloadInt64Of(v));
    const std::string tag = PayloadStringOf(v);
    EXPECT_EQ(tag, PayloadStringOf(v));
    tag_lengths.insert(tag.size());
    (PayloadInt64Of(v) < 0 ? negative : positive) = true;
  }
  EXPECT_EQ(tag_lengths, (std::set<size_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(negative && positive);
  EXPECT_NE(PayloadInt64Of(1), PayloadInt64Of(2));
}

TEST(Payload, ColumnsNullTheMissingRows) {
  const std::vector<uint32_t> values = {7, 0xffffffffu, 9};
  const std::vector<uint8_t> found = {1, 0, 1};
  const std::vector<client::Column> c = PayloadColumnsOf(values, found);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].name, kPayloadInt64Name);
  EXPECT_EQ(c[0].type, client::ColumnType::kInt64);
  EXPECT_EQ(c[1].name, kPayloadStringName);
  EXPECT_EQ(c[1].type, client::ColumnType::kString);
  for (const client::Column& col : c) {
    EXPECT_EQ(col.length, 3u);
    EXPECT_EQ(col.null_count, 1u);
    EXPECT_TRUE(col.Valid(0) && !col.Valid(1) && col.Valid(2));
  }
  EXPECT_EQ(c[0].Value<int64_t>(2), PayloadInt64Of(9));
  EXPECT_EQ(c[1].String(0), PayloadStringOf(7));
  EXPECT_EQ(PayloadColumnsOf(values)[0].null_count, 0u);  // no mask: every row valid
}

TEST(Payload, BuildDataCarriesTheColumnsOfItsValues) {
  const BuildData d = MakeBuildData(PayloadSpec());
  ASSERT_EQ(d.payload.size(), 2u);
  ASSERT_EQ(d.payload[0].length, d.values.size());
  for (size_t r = 0; r < d.values.size(); r += 97) {
    EXPECT_EQ(d.payload[0].Value<int64_t>(r), PayloadInt64Of(d.values[r]));
    EXPECT_EQ(d.payload[1].String(r), PayloadStringOf(d.values[r]));
  }
  EXPECT_TRUE(MakeBuildData(WorkloadSpec{.build_keys = 10}).payload.empty());
}

TEST(Payload, NeedsTheLoadTestersIndexAndLookups) {
  WorkloadSpec s = PayloadSpec();
  EXPECT_TRUE(ValidateWorkloadSpec(s).ok());
  s.rpc = Rpc::kJoin;
  EXPECT_NE(ValidateWorkloadSpec(s).message().find("--payload"), std::string::npos);
  s = PayloadSpec();
  s.build_keys = 0;
  EXPECT_NE(ValidateWorkloadSpec(s).message().find("--build-keys"), std::string::npos);
}

TEST(CheckLookupPayload, AcceptsTheRightAnswerAndCatchesWrongOnes) {
  const BatchPool pool = MakeBatchPool(PayloadSpec(), 300, 2);
  ASSERT_TRUE(pool.select_payload);
  const PoolBatch& b = pool.batches[0];
  const size_t hit = FirstRow(b, true), miss = FirstRow(b, false);
  EXPECT_EQ(CheckLookup(pool, b, RightAnswer(b), true), "");

  // An int64 one bit off, a tag one byte off: the full check names the row.
  client::LookupResult r = RightAnswer(b);
  r.columns[0].data[8 * hit] ^= 1;
  EXPECT_EQ(CheckLookup(pool, b, r, false), "");  // sampled out: shape only
  EXPECT_NE(CheckLookup(pool, b, r, true).find(absl::StrCat("row ", hit)), std::string::npos);
  r = RightAnswer(b);
  r.columns[1].data[r.columns[1].offsets[hit]] ^= 1;
  EXPECT_NE(CheckLookup(pool, b, r, true).find(absl::StrCat("row ", hit)), std::string::npos);

  // A hit answered null, a miss answered valid.
  r = RightAnswer(b);
  r.columns[1].validity[hit / 8] &= static_cast<uint8_t>(~(1u << (hit % 8)));
  EXPECT_NE(CheckLookup(pool, b, r, true).find("found"), std::string::npos);
  r = RightAnswer(b);
  r.columns[0].validity[miss / 8] |= static_cast<uint8_t>(1u << (miss % 8));
  EXPECT_NE(CheckLookup(pool, b, r, true).find("missing"), std::string::npos);

  // Columns swapped, one missing, one row short: every answer catches them.
  r = RightAnswer(b);
  std::swap(r.columns[0], r.columns[1]);
  EXPECT_NE(CheckLookup(pool, b, r, false).find("expected lt_int64 INT64"), std::string::npos);
  r = RightAnswer(b);
  r.columns.pop_back();
  EXPECT_NE(CheckLookup(pool, b, r, false), "");
  r = RightAnswer(b);
  r.columns[1] = PayloadColumnsOf(std::span(b.expected_values).first(b.rows() - 1))[1];
  EXPECT_NE(CheckLookup(pool, b, r, false).find("rows for 300 keys"), std::string::npos);
}

TEST(CheckRedisLookup, PayloadValuesCarryTheRowsAfterTheValue) {
  const BatchPool pool = MakeBatchPool(PayloadSpec(), 64, 1);
  const PoolBatch& b = pool.batches[0];
  const size_t hit = FirstRow(b, true);
  RespReply right;
  right.type = RespReply::Type::kArray;
  for (size_t i = 0; i < b.rows(); ++i) {
    RespReply e;
    if (b.expected_found[i]) {
      e.type = RespReply::Type::kBulkString;
      e.str = RedisValueOf(b.expected_values[i], true);
    }
    right.elements.push_back(std::move(e));
  }
  EXPECT_EQ(RedisValueOf(7, true),
            absl::StrCat("7,", PayloadInt64Of(7), ",", PayloadStringOf(7)));
  EXPECT_EQ(CheckRedisLookup(b, right, true, /*payload=*/true), "");
  RespReply wrong = right;
  wrong.elements[hit].str.back() ^= 1;  // the tag's last byte
  EXPECT_NE(CheckRedisLookup(b, wrong, true, true).find(absl::StrCat("row ", hit)),
            std::string::npos);
  wrong.elements[hit].str = RedisValueOf(b.expected_values[hit], false);  // the value alone
  EXPECT_NE(CheckRedisLookup(b, wrong, true, true), "");
  EXPECT_NE(CheckRedisLookup(b, right, true, /*payload=*/false), "");
}

// The echo answers a selecting lookup with the payload of the values it
// echoes, and every answer checks out row by row.
TEST(EchoRun, LookupsSelectingThePayload) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));
  RunConfig cfg;
  cfg.workload = PayloadSpec();
  cfg.index = "echo";
  cfg.in_flight = 2;
  cfg.warmup_seconds = 0;
  cfg.duration_seconds = 0.2;
  cfg.verify_every = 1;
  const BatchPool pool = MakeBatchPool(cfg.workload, 100, 4);
  const SettingResult r = RunSetting(Target::kEcho, echo.raw, pool, 1, cfg);
  EXPECT_EQ(r.ErrorCount(), 0u) << r.first_error;
  EXPECT_EQ(r.wrong_answers, 0u) << r.first_wrong;
  EXPECT_GT(r.checked, 0u);
  EXPECT_GT(r.response_bytes, r.batches * 100 * (4 + 1 + 8 + 4));  // the payload's bytes counted
}

}  // namespace
}  // namespace gpujoin::loadtest
