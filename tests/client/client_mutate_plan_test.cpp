// The client library's mutation planning without a server: PlanMutation cuts a
// whole input into requests of bounded rows and bytes (deletes first, upserts
// in order, payload rows with their keys, nothing lost or repeated, over the
// shapes that matter: empty, one row, exact fits, long strings, a row larger
// than a request), the client-side checks of a batch against an index
// (CheckMutateBatch, CheckMutateBatchFor) and the sums of MutateSummary.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "wire.hpp"

namespace {

namespace gc = gpujoin::client;
using gc::Column;
using gc::ColumnType;
using gc::ColumnView;
using gc::MutateBatch;

std::vector<uint32_t> Iota(size_t n, uint32_t from = 0) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

Column Strings(std::string name, size_t n, size_t bytes_each) {
  Column c(std::move(name), ColumnType::kString);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(c.AppendString(std::string(bytes_each, static_cast<char>('a' + i % 26))).ok());
  }
  return c;
}

// The request sizes the planner promises: each batch's encoded rows fit.
uint64_t EncodedBytes(const MutateBatch& b) {
  uint64_t bytes = 0;
  if (!b.delete_keys.empty()) bytes += gc::detail::EncodedKeyBytes(b.delete_keys);
  if (!b.upsert_keys.empty()) bytes += gc::detail::EncodedKeyBytes(b.upsert_keys);
  if (!b.values.empty()) bytes += 11 + 4 * b.values.size();
  for (const ColumnView& p : b.payload) bytes += gc::detail::EncodedColumnBytes(p);
  return bytes;
}

// Checks that the plan covers every row once, deletes before upserts, each
// batch within the bounds, and its views are the rows of its ranges.
void ExpectCovers(const gc::MutatePlan& plan, const MutateBatch& in, size_t max_rows,
                  uint64_t max_bytes) {
  ASSERT_EQ(plan.batches.size(), plan.ranges.size());
  uint64_t d = 0, u = 0;
  for (size_t i = 0; i < plan.batches.size(); ++i) {
    SCOPED_TRACE(i);
    const MutateBatch& b = plan.batches[i];
    const gc::MutateRequestResult& r = plan.ranges[i];
    EXPECT_EQ(r.delete_begin, d);
    EXPECT_EQ(r.upsert_begin, u);
    EXPECT_EQ(b.delete_keys.size(), r.delete_end - r.delete_begin);
    EXPECT_EQ(b.upsert_keys.size(), r.upsert_end - r.upsert_begin);
    EXPECT_GT(b.delete_keys.size() + b.upsert_keys.size(), 0u);
    // An upsert only once every delete is in this or an earlier request.
    if (!b.upsert_keys.empty()) EXPECT_EQ(r.delete_end, in.delete_keys.size());
    EXPECT_LE(b.delete_keys.size() + b.upsert_keys.size(), max_rows);
    EXPECT_LE(EncodedBytes(b), max_bytes);
    if (!in.values.empty() && !b.upsert_keys.empty()) {
      EXPECT_EQ(b.values.data(), in.values.data() + r.upsert_begin);
      EXPECT_EQ(b.values.size(), b.upsert_keys.size());
    }
    if (!b.upsert_keys.empty()) {
      ASSERT_EQ(b.payload.size(), in.payload.size());
      for (size_t c = 0; c < b.payload.size(); ++c) {
        EXPECT_EQ(b.payload[c].offset, in.payload[c].offset + r.upsert_begin);
        EXPECT_EQ(b.payload[c].length, b.upsert_keys.size());
        EXPECT_EQ(b.payload[c].name, in.payload[c].name);
      }
    } else {
      EXPECT_TRUE(b.payload.empty());
      EXPECT_TRUE(b.values.empty());
    }
    d = r.delete_end;
    u = r.upsert_end;
  }
  EXPECT_EQ(d, in.delete_keys.size());
  EXPECT_EQ(u, in.upsert_keys.size());
}

TEST(PlanMutation, EmptyInputPlansNoRequest) {
  auto plan = gc::PlanMutation(MutateBatch{}, 10, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->batches.empty());
}

TEST(PlanMutation, OneRowEitherSide) {
  const std::vector<uint32_t> k = {7};
  MutateBatch up;
  up.upsert_keys = k;
  auto plan = gc::PlanMutation(up, 1, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->batches.size(), 1u);
  EXPECT_EQ(plan->batches[0].upsert_keys.u32()[0], 7u);
  EXPECT_TRUE(plan->batches[0].delete_keys.empty());

  MutateBatch del;
  del.delete_keys = k;
  plan = gc::PlanMutation(del, 1, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->batches.size(), 1u);
  EXPECT_EQ(plan->batches[0].delete_keys.u32()[0], 7u);
}

// Rows bound: deletes fill requests first; the request holding the last
// deletes takes the first upserts; every row once.
TEST(PlanMutation, RowBoundDeletesFirstThenUpserts) {
  const std::vector<uint64_t> dels = {1, 2, 3, 4, 5, 6, 7};
  const std::vector<uint64_t> ups = {10, 11, 12, 13, 14};
  const std::vector<uint32_t> values = Iota(5, 100);
  MutateBatch in;
  in.delete_keys = dels;
  in.upsert_keys = ups;
  in.values = values;
  for (size_t max_rows : {1, 2, 3, 5, 12, 100}) {
    SCOPED_TRACE(max_rows);
    auto plan = gc::PlanMutation(in, max_rows, 1 << 20);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectCovers(*plan, in, max_rows, 1 << 20);
    EXPECT_EQ(plan->batches.size(), (dels.size() + ups.size() + max_rows - 1) / max_rows);
  }
  // 12 rows in one request: the whole input is one atomic batch.
  auto one = gc::PlanMutation(in, 12, 1 << 20);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->batches.size(), 1u);
  EXPECT_EQ(one->batches[0].delete_keys.u64()[6], 7u);
  EXPECT_EQ(one->batches[0].upsert_keys.u64()[4], 14u);
}

// Bytes bound with long payload strings: the upsert rows travel with their
// payload rows, so a request holds as many as fit.
TEST(PlanMutation, ByteBoundCutsUpsertsWithTheirPayload) {
  const std::vector<uint32_t> keys = Iota(200);
  const Column note = Strings("note", 200, 1000);
  const Column qty = Column::Of<int64_t>("qty", std::vector<int64_t>(200, 3));
  MutateBatch in;
  in.upsert_keys = keys;
  in.payload = {note.view(), qty.view()};
  for (uint64_t max_bytes : {4000u, 10000u, 65536u, 1u << 20}) {
    SCOPED_TRACE(max_bytes);
    auto plan = gc::PlanMutation(in, 1000, max_bytes);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectCovers(*plan, in, 1000, max_bytes);
    if (max_bytes < 200 * 1000) EXPECT_GT(plan->batches.size(), 1u);
  }
}

// Key columns of long strings in deletes: each request fits.
TEST(PlanMutation, KeyColumnsDeletesByBytes) {
  const Column sku = Strings("sku", 50, 300);
  const std::vector<ColumnView> keys = {sku.view()};
  MutateBatch in;
  in.delete_keys = keys;
  auto plan = gc::PlanMutation(in, 1000, 2000);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectCovers(*plan, in, 1000, 2000);
  EXPECT_GE(plan->batches.size(), 9u);
}

TEST(PlanMutation, RowLargerThanARequestIsRefused) {
  const std::vector<uint32_t> keys = Iota(3);
  const Column note = Strings("note", 3, 5000);
  MutateBatch in;
  in.upsert_keys = keys;
  in.payload = {note.view()};
  auto plan = gc::PlanMutation(in, 10, 4096);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("upsert row 0"), std::string::npos) << plan.status();

  const Column sku = Strings("sku", 2, 5000);
  const std::vector<ColumnView> big = {sku.view()};
  MutateBatch del;
  del.delete_keys = big;
  plan = gc::PlanMutation(del, 10, 4096);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("delete row 0"), std::string::npos) << plan.status();

  EXPECT_FALSE(gc::PlanMutation(in, 0, 1 << 20).ok());
}

TEST(CheckMutateBatch, ShapesOfTheInput) {
  const std::vector<uint32_t> keys = {1, 2, 3};
  const std::vector<uint32_t> two = {1, 2};
  const Column qty = Column::Of<int64_t>("qty", std::vector<int64_t>{1, 2, 3});
  const Column short_qty = Column::Of<int64_t>("qty", std::vector<int64_t>{1, 2});
  MutateBatch b;
  b.upsert_keys = keys;
  b.values = two;
  auto st = gc::CheckMutateBatch(b, "batch");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("values has 2 rows but upsert_keys has 3"), std::string::npos) << st;

  b.values = {};
  b.payload = {short_qty.view()};
  st = gc::CheckMutateBatch(b, "batch");
  EXPECT_NE(st.message().find("payload[0] ('qty') has 2 rows"), std::string::npos) << st;

  b.payload = {qty.view(), qty.view()};
  st = gc::CheckMutateBatch(b, "batch");
  EXPECT_NE(st.message().find("given twice"), std::string::npos) << st;

  ColumnView unnamed = qty.view();
  unnamed.name = "";
  b.payload = {unnamed};
  st = gc::CheckMutateBatch(b, "batch");
  EXPECT_NE(st.message().find("needs the name"), std::string::npos) << st;

  b.payload = {qty.view()};
  EXPECT_TRUE(gc::CheckMutateBatch(b, "batch").ok());
}

TEST(CheckMutateBatch, AgainstTheIndex) {
  gc::IndexInfo info;
  info.name = "dim";
  info.key_type = gc::KeyType::kUint32;
  info.explicit_values = false;
  info.next_row_id = 40;
  info.payload = {{"qty", ColumnType::kInt64, 0, 0}, {"note", ColumnType::kString, 0, 0}};
  const std::vector<uint32_t> keys = {1, 2};
  const std::vector<uint64_t> wide = {1, 2};
  const std::vector<uint32_t> values = {5, 6};
  const Column qty = Column::Of<int64_t>("qty", std::vector<int64_t>{1, 2});
  const Column qty32 = Column::Of<int32_t>("qty", std::vector<int32_t>{1, 2});
  const Column other = Column::Of<int64_t>("other", std::vector<int64_t>{1, 2});
  const Column note = Strings("note", 2, 3);

  MutateBatch b;
  b.upsert_keys = keys;
  b.payload = {qty.view(), note.view()};
  EXPECT_TRUE(gc::CheckMutateBatchFor(b, info, "upsert").ok());

  b.values = values;
  auto st = gc::CheckMutateBatchFor(b, info, "upsert");
  EXPECT_NE(st.message().find("row-ID values"), std::string::npos) << st;
  EXPECT_NE(st.message().find("from 40"), std::string::npos) << st;
  b.values = {};

  b.payload = {qty.view()};
  st = gc::CheckMutateBatchFor(b, info, "upsert");
  EXPECT_NE(st.message().find("payload column 'note' of index 'dim' is not given"),
            std::string::npos)
      << st;
  b.payload = {qty.view(), note.view(), other.view()};
  st = gc::CheckMutateBatchFor(b, info, "upsert");
  EXPECT_NE(st.message().find("has no payload column 'other' (payload: qty, note)"),
            std::string::npos)
      << st;
  b.payload = {qty32.view(), note.view()};
  st = gc::CheckMutateBatchFor(b, info, "upsert");
  EXPECT_NE(st.message().find("int32 rows for a column index 'dim' stores as int64"),
            std::string::npos)
      << st;

  // Deletes carry no payload; their keys must still fit the index.
  MutateBatch d;
  d.delete_keys = wide;
  st = gc::CheckMutateBatchFor(d, info, "delete");
  EXPECT_NE(st.message().find("uint64 keys but the index is declared with uint32"),
            std::string::npos)
      << st;
  d.delete_keys = keys;
  EXPECT_TRUE(gc::CheckMutateBatchFor(d, info, "delete").ok());

  info.explicit_values = true;
  b.payload = {qty.view(), note.view()};
  st = gc::CheckMutateBatchFor(b, info, "upsert");
  EXPECT_NE(st.message().find("has explicit values"), std::string::npos) << st;
}

TEST(MutateSummary, SumsAppliedRequestsOnly) {
  gc::MutateSummary s;
  gc::MutateRequestResult a;
  a.result.upsert_rows = 3;
  a.result.inserted_keys = 2;
  a.result.updated_keys = 1;
  a.result.mutation_sequence = 4;
  a.result.durable = true;
  a.result.rehashed = true;
  a.result.capacity = 64;
  s.Add(std::move(a));
  gc::MutateRequestResult bad;
  bad.result.error = absl::InvalidArgumentError("no");
  bad.result.mutation_sequence = 4;
  s.Add(std::move(bad));
  gc::MutateRequestResult c;
  c.result.deleted_keys = 2;
  c.result.not_found_keys = 1;
  c.result.deleted_rows = 5;
  c.result.mutation_sequence = 5;
  c.result.durable = false;
  c.result.capacity = 128;
  s.Add(std::move(c));
  EXPECT_EQ(s.requests.size(), 3u);
  EXPECT_EQ(s.applied_requests, 2u);
  EXPECT_EQ(s.upsert_rows, 3u);
  EXPECT_EQ(s.inserted_keys, 2u);
  EXPECT_EQ(s.updated_keys, 1u);
  EXPECT_EQ(s.deleted_keys, 2u);
  EXPECT_EQ(s.not_found_keys, 1u);
  EXPECT_EQ(s.deleted_rows, 5u);
  EXPECT_EQ(s.rehashes, 1u);
  EXPECT_EQ(s.mutation_sequence, 5u);
  EXPECT_EQ(s.capacity, 128u);
  EXPECT_FALSE(s.durable);
}

}  // namespace
