// Request options of the C++ client that only the server's own tests guarded
// before, now through gpujoin::client::Client against a real gpujoind: a
// request's probe bound (LookupBatch/JoinBatch::max_probe_count and
// QueryAllOptions::max_probe_count), a build's overflow as every join of the
// index reports it, and the nulls of typed aggregation values
// (AggregateBatch::validity, AggregateAll's validity).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "gpujoin/testing/server_process.hpp"

namespace {

using gpujoin::client::Client;
using gpujoin::testing::ServerProcess;
namespace gc = gpujoin::client;

class ClientRequestOptionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->ready()) << "gpujoind did not start:\n" << server_->log();
    gc::ConnectOptions o;
    o.address = server_->grpc_address();
    o.deadline = std::chrono::seconds(60);  // a stream the server never answers fails
    auto c = Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  // One Lookup stream batch of `keys` with probes.
  gc::LookupResult LookupOnce(const std::string& index, const std::vector<uint32_t>& keys,
                              uint32_t bound) {
    gc::LookupResult out;
    bool sent = false;
    const absl::Status st = client_->Lookup(
        index,
        [&]() -> std::optional<gc::LookupBatch> {
          if (sent) return std::nullopt;
          sent = true;
          gc::LookupBatch b;
          b.keys = keys;
          b.want_probes = true;
          b.max_probe_count = bound;
          return b;
        },
        [&](gc::LookupResult&& r) {
          out = std::move(r);
          return absl::OkStatus();
        });
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_TRUE(out.error.ok()) << out.error;
    return out;
  }

  // One Join stream request of `keys` as one left batch.
  gc::JoinPairs JoinOnce(const std::string& index, const std::vector<uint32_t>& keys,
                         uint32_t bound, bool count_only = false) {
    gc::JoinPairs out;
    bool sent = false;
    const absl::Status st = client_->Join(
        index,
        [&]() -> std::optional<gc::JoinBatch> {
          if (sent) return std::nullopt;
          sent = true;
          gc::JoinBatch b;
          gc::JoinLeft l;
          l.keys = keys;
          l.count_only = count_only;
          b.lefts.push_back(l);
          b.max_probe_count = bound;
          return b;
        },
        [&](gc::JoinResult&& r) {
          EXPECT_TRUE(r.error.ok()) << r.error;
          if (r.results.size() == 1) out = std::move(r.results[0]);
          return absl::OkStatus();
        });
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }

  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<Client> client_;
};

// The keys fill a 64-slot table, so many sit past their home slot; the
// unbounded lookup's probe counts are the oracle: under a request bound b a key
// is found exactly when its probe count is at most b. A client that dropped the
// bound (in the stream encoders or in LookupAll/JoinAll) finds every key.
TEST_F(ClientRequestOptionsTest, LookupAndJoinHonourTheRequestsProbeBound) {
  constexpr uint32_t kCapacity = 64;
  std::vector<uint32_t> keys(kCapacity);
  std::iota(keys.rbegin(), keys.rend(), 1u);  // 64 .. 1
  gc::IndexSpec spec;
  spec.name = "options_bound";
  spec.capacity = kCapacity;
  spec.replace = true;
  auto info = client_->BuildIndexFromColumns(spec, keys);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->statistics.unique_keys, kCapacity);
  const gc::LookupResult free = LookupOnce("options_bound", keys, 0);
  ASSERT_EQ(free.probes.size(), keys.size());
  ASSERT_GT(*std::max_element(free.probes.begin(), free.probes.end()), 2u)
      << "no key sits two slots past its home: the test shows nothing";

  for (uint32_t bound : {1u, 2u}) {
    SCOPED_TRACE(::testing::Message() << "max_probe_count " << bound);
    std::vector<uint8_t> within(keys.size());
    std::vector<uint32_t> rows, values;
    for (size_t i = 0; i < keys.size(); ++i) {
      within[i] = free.probes[i] <= bound;
      if (within[i]) {
        rows.push_back(static_cast<uint32_t>(i));
        values.push_back(free.values[i]);
      }
    }
    const gc::LookupResult streamed = LookupOnce("options_bound", keys, bound);
    EXPECT_EQ(streamed.found, within);
    EXPECT_EQ(streamed.statistics.found, rows.size());
    EXPECT_EQ(streamed.statistics.max_probes, bound);

    gc::QueryAllOptions o;
    o.batch_rows = 10;
    o.max_probe_count = bound;
    auto all = client_->LookupAll("options_bound", keys, o);
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_EQ(all->found, within);

    const gc::JoinPairs joined = JoinOnce("options_bound", keys, bound);
    EXPECT_EQ(joined.left_rows, rows);
    EXPECT_EQ(joined.right_rows, values);
    EXPECT_FALSE(joined.overflow);
    auto join_all = client_->JoinAll("options_bound", keys, o);
    ASSERT_TRUE(join_all.ok()) << join_all.status();
    EXPECT_EQ(join_all->left_rows, rows);
    EXPECT_EQ(join_all->right_rows, values);
  }

  gc::QueryAllOptions over;
  over.max_probe_count = kCapacity + 1;
  auto refused = client_->LookupAll("options_bound", keys, over);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("max_probe_count"), std::string::npos);
}

// Eight keys into four slots with a bound of one: at least four find no slot.
// Every join of the index says overflow, whatever its own pairs (JoinAll, the
// stream, count_only, a left batch without a match), so a caller knows the
// answer may miss keys; a rebuild without overflow clears it.
TEST_F(ClientRequestOptionsTest, BuildOverflowReachesEveryJoin) {
  const std::vector<uint32_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  gc::IndexSpec spec;
  spec.name = "options_overflow";
  spec.capacity = 4;
  spec.max_probe_count = 1;
  spec.replace = true;
  auto info = client_->BuildIndexFromColumns(spec, keys);
  ASSERT_TRUE(info.ok()) << info.status();
  const uint64_t stored = info->statistics.unique_keys;
  EXPECT_GE(info->statistics.overflow_rows, 4u);
  EXPECT_EQ(info->statistics.overflow_rows + stored, keys.size());

  auto all = client_->JoinAll("options_overflow", keys);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->overflow);
  EXPECT_EQ(all->count, stored);
  EXPECT_EQ(all->left_rows.size(), stored);
  for (gc::JoinKind kind : {gc::JoinKind::kLeftOuter, gc::JoinKind::kLeftSemi,
                            gc::JoinKind::kLeftAnti}) {
    gc::QueryAllOptions o;
    o.kind = kind;
    auto j = client_->JoinAll("options_overflow", keys, o);
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_TRUE(j->overflow) << gc::JoinKindName(kind);
  }
  EXPECT_TRUE(JoinOnce("options_overflow", keys, 0).overflow);
  EXPECT_TRUE(JoinOnce("options_overflow", keys, 0, /*count_only=*/true).overflow);
  EXPECT_TRUE(JoinOnce("options_overflow", {100}, 0).overflow);

  spec.capacity = 16;
  spec.max_probe_count = 0;
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, keys).ok());
  auto clean = client_->JoinAll("options_overflow", keys);
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_FALSE(clean->overflow);
}

// Null values (AggregateBatch::validity, AggregateAll's validity) do not
// contribute to their group, in any batch cut (3 rows per batch shifts the
// bitmap by a non-multiple of 8). The values under a null are extreme so that
// counting one would show; group 3 holds only nulls, group 2 no rows.
TEST_F(ClientRequestOptionsTest, NullTypedValuesDoNotContribute) {
  const std::vector<uint32_t> keys = {0, 1, 0, 1, 3, 0, 1, 3, 0, 1, 0};
  const std::vector<int64_t> values = {5,  -7, 9, 11, 13, int64_t{-1} << 40, int64_t{1} << 40,
                                       8,  2,  4, int64_t{1} << 62};
  const std::vector<uint8_t> valid = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  std::vector<uint8_t> bitmap((keys.size() + 7) / 8);
  for (size_t i = 0; i < valid.size(); ++i) bitmap[i / 8] |= uint8_t(valid[i] << (i % 8));
  const std::span<const int64_t> typed(values);
  for (size_t batch_rows : {size_t{3}, size_t{8}, size_t{100}}) {
    SCOPED_TRACE(::testing::Message() << "batch_rows " << batch_rows);
    gc::AggregateSpec spec{gc::AggregateOp::kSum, 4};
    spec.value_type = gc::ColumnType::kInt64;
    auto sum = client_->AggregateAll(spec, keys, typed, bitmap, {}, batch_rows);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->total_typed_values, (std::vector<uint64_t>{16, 8, 0, 0}));
    EXPECT_EQ(sum->total_counts64, (std::vector<uint64_t>{3, 3, 0, 0}));
    EXPECT_EQ(sum->total_overflow_groups, 0u);  // 2^62 + 2^62 would overflow if counted

    spec.op = gc::AggregateOp::kMin;
    auto lo = client_->AggregateAll(spec, keys, typed, bitmap, {}, batch_rows);
    ASSERT_TRUE(lo.ok()) << lo.status();
    EXPECT_EQ(lo->total_typed_values[0], 2u);
    EXPECT_EQ(static_cast<int64_t>(lo->total_typed_values[1]), -7);
    EXPECT_EQ(lo->total_valid, (std::vector<uint8_t>{1, 1, 0, 0}));

    spec.op = gc::AggregateOp::kMax;
    auto hi = client_->AggregateAll(spec, keys, typed, bitmap, {}, batch_rows);
    ASSERT_TRUE(hi.ok()) << hi.status();
    EXPECT_EQ(hi->total_typed_values[0], 9u);
    EXPECT_EQ(hi->total_typed_values[1], 11u);
    EXPECT_EQ(hi->total_valid, (std::vector<uint8_t>{1, 1, 0, 0}));

    spec.op = gc::AggregateOp::kMean;
    auto mean = client_->AggregateAll(spec, keys, typed, bitmap, {}, batch_rows);
    ASSERT_TRUE(mean.ok()) << mean.status();
    ASSERT_EQ(mean->result_type, gc::ColumnType::kFloat64);
    std::vector<double> m(4);
    std::memcpy(m.data(), mean->total_typed_values.data(), 4 * sizeof(double));
    EXPECT_DOUBLE_EQ(m[0], 16.0 / 3);
    EXPECT_DOUBLE_EQ(m[1], 8.0 / 3);
    EXPECT_TRUE(std::isnan(m[2]));
    EXPECT_TRUE(std::isnan(m[3]));
  }

  // Nulls and a mask combine: the mask leaves out row 0 (5 of group 0).
  const std::vector<uint32_t> mask = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  gc::AggregateSpec spec{gc::AggregateOp::kSum, 4};
  spec.value_type = gc::ColumnType::kInt64;
  auto masked = client_->AggregateAll(spec, keys, typed, bitmap, mask, 4);
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_EQ(masked->total_typed_values, (std::vector<uint64_t>{11, 8, 0, 0}));
  EXPECT_EQ(masked->total_counts64, (std::vector<uint64_t>{2, 3, 0, 0}));

  // A bitmap of the wrong size, or on a float32 stream, is refused before anything is sent.
  const std::vector<uint8_t> short_bitmap = {0xff};
  EXPECT_EQ(client_->AggregateAll(spec, keys, typed, short_bitmap).status().code(),
            absl::StatusCode::kInvalidArgument);
  gc::AggregateSpec f32{gc::AggregateOp::kSum, 4};
  const std::vector<float> fv(keys.size(), 1.0f);
  bool sent = false;
  const absl::Status st = client_->Aggregate(
      f32,
      [&]() -> std::optional<gc::AggregateBatch> {
        if (sent) return std::nullopt;
        sent = true;
        gc::AggregateBatch b;
        b.keys = keys;
        b.values = fv;
        b.validity = bitmap;
        return b;
      },
      [](gc::AggregateResult&&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("validity is for typed values"), std::string::npos) << st;
}

}  // namespace
