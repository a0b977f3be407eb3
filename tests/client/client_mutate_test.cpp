// The client library's Mutate stream against a real gpujoind (CPU backend):
// upserts with values and payload (nulls included), deletes of integer and
// key-column keys, the counts and sequences answered, a bad batch answered in
// its result while the stream goes on, and the client-side errors raised
// before anything is sent.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "server_client_fixture.hpp"

namespace {

namespace gc = gpujoin::client;
using gc::ColumnType;
using gc::ColumnView;

class ClientMutateTest : public gpujoin::testing::ServerClientTest {
 protected:
  // Runs `batches` on one Mutate stream of `index`; every result, in order.
  std::vector<gc::MutateResult> Mutate(const std::string& index,
                                       const std::vector<gc::MutateBatch>& batches,
                                       absl::Status* status = nullptr) {
    std::vector<gc::MutateResult> out;
    size_t next = 0;
    const absl::Status s = client_->Mutate(
        index,
        [&]() -> std::optional<gc::MutateBatch> {
          if (next == batches.size()) return std::nullopt;
          return batches[next++];
        },
        [&](gc::MutateResult&& r) {
          out.push_back(std::move(r));
          return absl::OkStatus();
        });
    if (status != nullptr) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s;
    }
    return out;
  }
};

TEST_F(ClientMutateTest, UpsertsAndDeletesWithPayloadOnAUint32Index) {
  gc::IndexSpec spec;
  spec.name = "mut32";
  spec.replace = true;
  spec.capacity = 8;
  spec.explicit_values = true;
  spec.payload = {{"price", ColumnType::kInt64}};
  const std::vector<uint32_t> keys = {1, 2, 3};
  const std::vector<uint32_t> values = {10, 20, 30};
  const gc::Column price = gc::Column::Of<int64_t>("price", std::vector<int64_t>{100, 200, 300});
  const std::vector<ColumnView> payload = {price.view()};
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, keys, values, payload).ok());

  // Batch 0: assign key 2, insert 4 (twice: the last row wins), price null for 4.
  const std::vector<uint32_t> up_keys = {2, 4, 4};
  const std::vector<uint32_t> up_values = {21, 40, 41};
  gc::Column up_price("price", ColumnType::kInt64);
  up_price.Append<int64_t>(201);
  up_price.Append<int64_t>(400);
  up_price.AppendNull();
  gc::MutateBatch upsert;
  upsert.keys = up_keys;
  upsert.values = up_values;
  upsert.payload = {up_price.view()};
  // Batch 1: a payload column of another name: answered in-band, nothing changes.
  gc::Column other("cost", ColumnType::kInt64);
  other.Append<int64_t>(1);
  const std::vector<uint32_t> one_key = {5};
  const std::vector<uint32_t> one_value = {50};
  gc::MutateBatch bad;
  bad.keys = one_key;
  bad.values = one_value;
  bad.payload = {other.view()};
  // Batch 2: delete 1, 9 (absent) and 1 again.
  const std::vector<uint32_t> del_keys = {1, 9, 1};
  gc::MutateBatch del;
  del.delete_keys = del_keys;

  const std::vector<gc::MutateResult> out = Mutate("mut32", {upsert, bad, del});
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].batch_id, i);
  ASSERT_TRUE(out[0].error.ok()) << out[0].error;
  EXPECT_EQ(out[0].mutation_sequence, 1u);
  EXPECT_EQ(out[0].upsert_rows, 3u);
  EXPECT_EQ(out[0].updated_keys, 1u);
  EXPECT_EQ(out[0].inserted_keys, 1u);
  EXPECT_EQ(out[0].statistics.unique_keys, 4u);
  EXPECT_GE(out[0].capacity, 8u);
  EXPECT_FALSE(out[0].durable);
  EXPECT_EQ(out[1].error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out[1].error.message().find("payload[0].name"), std::string::npos) << out[1].error;
  ASSERT_TRUE(out[2].error.ok()) << out[2].error;
  EXPECT_EQ(out[2].mutation_sequence, 2u);
  EXPECT_EQ(out[2].deleted_keys, 1u);
  EXPECT_EQ(out[2].deleted_rows, 1u);
  EXPECT_EQ(out[2].not_found_keys, 1u);
  EXPECT_EQ(out[2].statistics.unique_keys, 3u);

  gc::QueryAllOptions o;
  o.select = {"price"};
  const std::vector<uint32_t> probe = {1, 2, 3, 4, 5};
  auto looked = client_->LookupAll("mut32", probe, o);
  ASSERT_TRUE(looked.ok()) << looked.status();
  EXPECT_EQ(looked->values, (std::vector<uint32_t>{gc::kNoMatch, 21, 30, 41, gc::kNoMatch}));
  ASSERT_EQ(looked->columns.size(), 1u);
  const gc::Column& got = looked->columns[0];
  EXPECT_EQ(got.Value<int64_t>(1), 201);
  EXPECT_EQ(got.Value<int64_t>(2), 300);
  EXPECT_FALSE(got.Valid(3));  // the winning row's price is null
}

TEST_F(ClientMutateTest, KeyColumnsAndUint64KeysTravelInTheirFields) {
  gc::IndexSpec spec;
  spec.name = "mutcols";
  spec.replace = true;
  spec.capacity = 8;
  spec.key_type = gc::KeyType::kColumns;
  spec.key_columns = {{"tenant", ColumnType::kInt64}, {"sku", ColumnType::kString}};
  gc::Column tenants = gc::Column::Of<int64_t>("tenant", std::vector<int64_t>{1, 2});
  gc::Column skus("sku", ColumnType::kString);
  ASSERT_TRUE(skus.AppendString("a").ok());
  ASSERT_TRUE(skus.AppendString("b").ok());
  const std::vector<ColumnView> keys = {tenants.view(), skus.view()};
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, keys).ok());
  // Delete (1, "a"); upsert (1, "b"), which is new: row ID 2.
  gc::Column del_tenant = gc::Column::Of<int64_t>("tenant", std::vector<int64_t>{1});
  gc::Column del_sku("sku", ColumnType::kString);
  ASSERT_TRUE(del_sku.AppendString("a").ok());
  gc::Column up_sku("sku", ColumnType::kString);
  ASSERT_TRUE(up_sku.AppendString("b").ok());
  const std::vector<ColumnView> del_keys = {del_tenant.view(), del_sku.view()};
  const std::vector<ColumnView> up_keys = {del_tenant.view(), up_sku.view()};
  gc::MutateBatch b;
  b.keys = up_keys;
  b.delete_keys = del_keys;
  const std::vector<gc::MutateResult> out = Mutate("mutcols", {b});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].error.ok()) << out[0].error;
  EXPECT_EQ(out[0].deleted_keys, 1u);
  EXPECT_EQ(out[0].inserted_keys, 1u);
  auto info = client_->DescribeIndex("mutcols");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->statistics.unique_keys, 2u);

  gc::IndexSpec wide;
  wide.name = "mut64";
  wide.replace = true;
  wide.capacity = 8;
  wide.key_type = gc::KeyType::kUint64;
  const std::vector<uint64_t> wide_keys = {uint64_t{1} << 40, 7};
  ASSERT_TRUE(client_->BuildIndexFromColumns(wide, wide_keys).ok());
  const std::vector<uint64_t> gone = {uint64_t{1} << 40};
  gc::MutateBatch d;
  d.delete_keys = gone;
  const std::vector<gc::MutateResult> out64 = Mutate("mut64", {d});
  ASSERT_EQ(out64.size(), 1u);
  ASSERT_TRUE(out64[0].error.ok()) << out64[0].error;
  EXPECT_EQ(out64[0].deleted_keys, 1u);
}

TEST_F(ClientMutateTest, MisshapenBatchesFailBeforeAnythingIsSent) {
  const std::vector<uint32_t> keys = {1, 2};
  const std::vector<uint32_t> one_value = {1};
  gc::MutateBatch b;
  b.keys = keys;
  b.values = one_value;
  absl::Status status;
  EXPECT_TRUE(Mutate("never_built", {b}, &status).empty());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mutate batch 0: 1 values for 2 upsert keys"), std::string::npos)
      << status;

  const gc::Column price = gc::Column::Of<int64_t>("price", std::vector<int64_t>{1});
  gc::MutateBatch short_payload;
  short_payload.keys = keys;
  short_payload.payload = {price.view()};
  EXPECT_TRUE(Mutate("never_built", {short_payload}, &status).empty());
  EXPECT_NE(status.message().find("mutate batch 0 payload[0]: 1 rows for 2 upsert keys"),
            std::string::npos)
      << status;
}

}  // namespace
