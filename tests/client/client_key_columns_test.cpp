// The client library's key columns (Keys of ColumnViews, IndexSpec::key_columns,
// IndexInfo::key_columns) against a real gpujoind (CPU backend): builds,
// lookups and joins on a string key and on a composite (int64, string) key,
// chunked builds whose string keys span many messages, nulls, and the
// client-side errors that name the key column before anything is sent.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "server_client_fixture.hpp"

namespace {

using gpujoin::client::Client;
using gpujoin::testing::ServerProcess;
namespace gc = gpujoin::client;
using gc::ColumnType;
using gc::ColumnView;

gc::Column Strings(std::string name, const std::vector<std::string>& values) {
  gc::Column c(std::move(name), ColumnType::kString);
  for (const std::string& v : values) EXPECT_TRUE(c.AppendString(v).ok());
  return c;
}

class ClientKeyColumnsTest : public gpujoin::testing::ServerClientTest {
 protected:
  static gc::IndexSpec StringSpec(const std::string& name) {
    gc::IndexSpec spec;
    spec.name = name;
    spec.replace = true;
    spec.key_type = gc::KeyType::kColumns;
    spec.key_columns = {{"sku", ColumnType::kString}};
    return spec;
  }
};

TEST_F(ClientKeyColumnsTest, StringKeyBuildLookupJoinWithPayload) {
  const gc::Column skus = Strings("sku", {"A-1043", "B-7", "", "a-1043", "B-7"});
  const gc::Column price = gc::Column::Of<int64_t>("price", std::vector<int64_t>{10, 20, 30, 40, 50});
  gc::IndexSpec spec = StringSpec("skus");
  spec.payload = {{"price", ColumnType::kInt64}};
  const std::vector<ColumnView> keys = {skus.view()};
  const std::vector<ColumnView> payload = {price.view()};
  // Two rows per chunk: the keys and payload cross chunk boundaries.
  auto info = client_->BuildIndexFromColumns(spec, keys, {}, payload, 2);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->key_type, gc::KeyType::kColumns);
  ASSERT_EQ(info->key_columns.size(), 1u);
  EXPECT_EQ(info->key_columns[0], (gc::KeyColumnSpec{"sku", ColumnType::kString}));
  EXPECT_EQ(info->statistics.unique_keys, 4u);
  EXPECT_EQ(info->statistics.duplicate_rows, 1u);

  auto described = client_->DescribeIndex("skus");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->key_columns, info->key_columns);

  // Case matters, the empty string is a key, a null never matches.
  gc::Column probe = Strings("", {"B-7", "a-1043", "A-1044", ""});
  probe.AppendNull();
  const std::vector<ColumnView> probe_keys = {probe.view()};
  gc::QueryAllOptions o;
  o.batch_rows = 2;
  o.select = {"price"};
  auto r = client_->LookupAll("skus", probe_keys, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->values, (std::vector<uint32_t>{1, 3, gc::kNoMatch, 2, gc::kNoMatch}));
  EXPECT_EQ(r->found, (std::vector<uint8_t>{1, 1, 0, 1, 0}));
  ASSERT_EQ(r->columns.size(), 1u);
  EXPECT_EQ(r->columns[0].Value<int64_t>(0), 20);
  EXPECT_EQ(r->columns[0].Value<int64_t>(1), 40);
  EXPECT_FALSE(r->columns[0].Valid(2));

  o.kind = gc::JoinKind::kLeftOuter;
  auto j = client_->JoinAll("skus", probe_keys, o);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->left_rows, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(j->right_rows, (std::vector<uint32_t>{1, 3, gc::kNoMatch, 2, gc::kNoMatch}));
  EXPECT_EQ(j->statistics.found, 3u);
}

TEST_F(ClientKeyColumnsTest, CompositeKeyKeepAllJoinSizesItself) {
  // (tenant, order) pairs whose columns, swapped, are other keys.
  const gc::Column tenant = gc::Column::Of<int64_t>("tenant", std::vector<int64_t>{1, 2, 1, 1, -5});
  const gc::Column order = Strings("order", {"2", "1", "2", "x", ""});
  gc::IndexSpec spec;
  spec.name = "orders";
  spec.replace = true;
  spec.key_type = gc::KeyType::kColumns;
  spec.key_columns = {{"tenant", ColumnType::kInt64}, {"order", ColumnType::kString}};
  spec.duplicates = gc::DuplicatePolicy::kKeepAll;
  const std::vector<ColumnView> keys = {tenant.view(), order.view()};
  auto info = client_->BuildIndexFromColumns(spec, keys, {}, 1000);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->key_columns, spec.key_columns);
  EXPECT_EQ(info->statistics.unique_keys, 4u);

  const gc::Column lt = gc::Column::Of<int64_t>("", std::vector<int64_t>{1, 2, -5, 9});
  const gc::Column lo = Strings("", {"2", "2", "", "x"});
  const std::vector<ColumnView> left = {lt.view(), lo.view()};
  auto j = client_->JoinAll("orders", left, gc::QueryAllOptions{.batch_rows = 3});
  ASSERT_TRUE(j.ok()) << j.status();
  // Left row 0 (1, "2") matches build rows 0 and 2; (2, "2") nothing; (-5, "") row 4.
  EXPECT_EQ(j->left_rows, (std::vector<uint32_t>{0, 0, 2}));
  EXPECT_EQ(j->right_rows, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(j->count, 3u);

  // The Lookup stream with batches of their own.
  std::vector<gc::LookupResult> results;
  int sent = 0;
  auto st = client_->Lookup(
      "orders",
      [&]() -> std::optional<gc::LookupBatch> {
        if (sent == 2) return std::nullopt;
        gc::LookupBatch b;
        b.keys = gc::Keys(left).subspan(2 * sent, 2);
        b.want_match_counts = true;
        ++sent;
        return b;
      },
      [&](gc::LookupResult&& r) {
        results.push_back(std::move(r));
        return absl::OkStatus();
      });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].match_counts, (std::vector<uint32_t>{2, 0}));
  EXPECT_EQ(results[1].match_counts, (std::vector<uint32_t>{1, 0}));
}

TEST_F(ClientKeyColumnsTest, LongStringKeysSpanManyMessages) {
  gc::ConnectOptions o;
  o.address = server_->grpc_address();
  o.max_message_bytes = 64 * 1024;
  auto small = Client::Connect(o);
  ASSERT_TRUE(small.ok()) << small.status();
  std::vector<std::string> values;
  for (int i = 0; i < 200; ++i) values.push_back(std::string(2000, 'k') + std::to_string(i));
  const gc::Column keys = Strings("sku", values);
  const std::vector<ColumnView> views = {keys.view()};
  auto info = (*small)->BuildIndexFromColumns(StringSpec("long"), views, {}, 1 << 20);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->statistics.unique_keys, 200u);
  auto r = (*small)->LookupAll("long", views, gc::QueryAllOptions{.batch_rows = 20});
  ASSERT_TRUE(r.ok()) << r.status();
  for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(r->values[i], i);
}

TEST_F(ClientKeyColumnsTest, ClientSideErrorsNameTheKeyColumn) {
  const gc::Column skus = Strings("sku", {"a", "b"});
  const gc::Column ids = gc::Column::Of<int64_t>("id", std::vector<int64_t>{1});
  auto expect_invalid = [](const absl::Status& st, const std::string& text) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(text), std::string::npos) << st;
  };
  gc::IndexSpec spec = StringSpec("errs");
  // Too many key columns for the schema.
  const std::vector<ColumnView> two = {skus.view(), skus.view()};
  expect_invalid(client_->BuildIndexFromColumns(spec, two).status(),
                 "keys has 2 key columns but the index has a key of 1");
  // The wrong type.
  const gc::Column f = gc::Column::Of<int64_t>("sku", std::vector<int64_t>{1, 2});
  const std::vector<ColumnView> wrong_type = {f.view()};
  expect_invalid(client_->BuildIndexFromColumns(spec, wrong_type).status(),
                 "keys key_columns[0] ('sku'): int64 rows, but key column 0 ('sku') is declared "
                 "string");
  // Another name.
  const gc::Column other = Strings("name", {"a", "b"});
  const std::vector<ColumnView> renamed = {other.view()};
  expect_invalid(client_->BuildIndexFromColumns(spec, renamed).status(),
                 "key column 0 is 'sku'");
  // Integer keys for a key schema.
  const std::vector<uint32_t> ints = {1, 2};
  expect_invalid(client_->BuildIndexFromColumns(spec, ints).status(),
                 "has uint32 keys but the index has a key schema");
  // Lengths that differ, in a lookup and a join: refused before sending.
  const std::vector<ColumnView> ragged = {skus.view(), ids.view()};
  expect_invalid(client_->LookupAll("errs", ragged, gc::QueryAllOptions{}).status(),
                 "keys key_columns[1] ('id') has 1 rows but keys key_columns[0] ('sku') has 2");
  expect_invalid(client_->JoinAll("errs", ragged, gc::QueryAllOptions{}).status(),
                 "key_columns[1] ('id') has 1 rows");
  // A type that cannot be a key.
  const gc::Column d = gc::Column::Of<double>("d", std::vector<double>{1.0, 2.0});
  const std::vector<ColumnView> doubles = {d.view()};
  expect_invalid(client_->LookupAll("errs", doubles, gc::QueryAllOptions{}).status(),
                 "float64 cannot be a key column");
  // A key column the index does not have: the server's error names it.
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, std::vector<ColumnView>{skus.view()}).ok());
  const gc::Column wrong = gc::Column::Of<int64_t>("", std::vector<int64_t>{1, 2});
  auto r = client_->LookupAll("errs", std::vector<ColumnView>{wrong.view()}, gc::QueryAllOptions{});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("key_columns[0].type"), std::string::npos) << r.status();
}

}  // namespace
