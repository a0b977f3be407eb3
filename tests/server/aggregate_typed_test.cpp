// Typed Aggregate requests through Operations and AggregateStream on
// the CPU backend: typed_values of every type, exact int64 sums over batches,
// the per-batch and stream overflow bitmaps (sticky), uint64 counts, null empty
// integer min/max groups, float64 rules, null values (validity) skipped, and
// INVALID_ARGUMENT naming the field for a wrong or mixed type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/operations.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

template <typename V>
v1::AggregateRequest Typed(v1::AggregateOp op, uint32_t groups, std::vector<uint32_t> keys,
                           std::vector<V> values, v1::ColumnType type) {
  v1::AggregateRequest r;
  r.set_op(op);
  r.set_groups(groups);
  *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  v1::Column* c = r.mutable_typed_values();
  c->set_type(type);
  c->set_length(values.size());
  c->set_data(PackColumn<V>(values));
  return r;
}

template <typename T>
std::vector<T> DataOf(const v1::Column& c) {
  return UnpackColumn<T>(c.data());
}

class AggregateTypedTest : public testing::OperationsFixture {
 protected:
  void SetUp() override { MakeOperations(); }

  // Admits and runs the batches of one stream in order; the responses.
  std::vector<v1::AggregateResponse> Stream(const std::vector<v1::AggregateRequest>& batches) {
    AggregateStream stream;
    std::vector<v1::AggregateResponse> out(batches.size());
    for (size_t i = 0; i < batches.size(); ++i) {
      absl::Status s = stream.Admit(batches[i], 1 << 20, 1 << 22);
      EXPECT_TRUE(s.ok()) << s;
      AggregatePartial p;
      s = ops_->Aggregate(batches[i], &out[i], &p);
      EXPECT_TRUE(s.ok()) << s;
      stream.Complete(batches[i], &out[i], p);
    }
    return out;
  }

  // The error of one batch: Admit's, else Aggregate's.
  absl::Status Refusal(const v1::AggregateRequest& r, AggregateStream* stream = nullptr) {
    AggregateStream own;
    AggregateStream& s = stream != nullptr ? *stream : own;
    absl::Status st = s.Admit(r, 1 << 20, 1 << 22);
    if (!st.ok()) return st;
    v1::AggregateResponse resp;
    AggregatePartial p;
    return ops_->Aggregate(r, &resp, &p);
  }
};

TEST_F(AggregateTypedTest, Int64SumsAreExactAcrossBatches) {
  // 2^53 + 1 is not a double and not a float: the sum must not pass through one.
  const int64_t big = (int64_t{1} << 53) + 1;
  auto out = Stream(
      {Typed<int64_t>(v1::AGGREGATE_OP_SUM, 3, {0, 1, 0}, {big, -7, 2}, v1::COLUMN_TYPE_INT64),
       Typed<int64_t>(v1::AGGREGATE_OP_SUM, 3, {1, 0}, {10, big}, v1::COLUMN_TYPE_INT64)});
  EXPECT_EQ(out[0].typed_result().type(), v1::COLUMN_TYPE_INT64);
  EXPECT_THAT(DataOf<int64_t>(out[0].typed_result()), ElementsAre(big + 2, -7, 0));
  EXPECT_THAT(DataOf<int64_t>(out[1].total_typed_result()), ElementsAre(2 * big + 2, 3, 0));
  EXPECT_THAT(UnpackColumn<uint64_t>(out[1].total_counts64()), ElementsAre(3, 2, 0));
  EXPECT_EQ(out[1].total_overflow_groups(), 0u);
  EXPECT_EQ(out[1].total_overflow(), std::string(1, '\0'));
  EXPECT_TRUE(out[1].total_values().empty());  // the float32 fields stay empty
}

TEST_F(AggregateTypedTest, OverflowIsReportedPerBatchAndStaysSetForTheStream) {
  auto req = [](std::vector<uint32_t> k, std::vector<int64_t> v) {
    return Typed<int64_t>(v1::AGGREGATE_OP_SUM, 2, std::move(k), std::move(v),
                          v1::COLUMN_TYPE_INT64);
  };
  auto out = Stream({req({0, 1}, {kI64Max, 5}), req({0}, {1}), req({0}, {-1})});
  // Batch 1 fits; batch 2's total passes INT64_MAX; batch 3 brings it back, but
  // the stream's flag stays.
  EXPECT_EQ(out[0].overflow(), std::string(1, '\0'));
  EXPECT_EQ(out[0].total_overflow_groups(), 0u);
  EXPECT_EQ(out[1].overflow(), std::string(1, '\0'));  // the batch's own sum (1) fits
  EXPECT_EQ(out[1].total_overflow(), std::string(1, '\1'));
  EXPECT_EQ(out[1].total_overflow_groups(), 1u);
  EXPECT_THAT(DataOf<int64_t>(out[1].total_typed_result()),
              ElementsAre(std::numeric_limits<int64_t>::min(), 5));  // the low 64 bits
  EXPECT_EQ(out[2].total_overflow_groups(), 1u);
  // One batch overflowing on its own.
  auto one = Stream({req({0, 0}, {kI64Max, kI64Max})});
  EXPECT_EQ(one[0].overflow(), std::string(1, '\1'));
  EXPECT_EQ(one[0].total_overflow_groups(), 1u);
  // uint64: UINT64_MAX + 1 overflows; 2^63 + 2^62 does not.
  auto u = Stream({Typed<uint64_t>(v1::AGGREGATE_OP_SUM, 2, {0, 0, 1, 1},
                                   {~uint64_t{0}, 1, uint64_t{1} << 63, uint64_t{1} << 62},
                                   v1::COLUMN_TYPE_UINT64)});
  EXPECT_EQ(u[0].typed_result().type(), v1::COLUMN_TYPE_UINT64);
  EXPECT_EQ(u[0].total_overflow(), std::string(1, '\1'));
  EXPECT_THAT(DataOf<uint64_t>(u[0].total_typed_result()), ElementsAre(0, 0xc000000000000000ull));
  // Means of an overflowed group are NaN.
  auto m = Stream({Typed<int64_t>(v1::AGGREGATE_OP_MEAN, 2, {0, 0, 1, 1}, {kI64Max, 1, 3, 4},
                                  v1::COLUMN_TYPE_INT64)});
  const auto means = DataOf<double>(m[0].total_typed_result());
  EXPECT_TRUE(std::isnan(means[0]));
  EXPECT_EQ(means[1], 3.5);
  EXPECT_EQ(m[0].total_overflow_groups(), 1u);
}

TEST_F(AggregateTypedTest, MinMaxKeepTheValueTypeAndEmptyGroupsAreNull) {
  auto out =
      Stream({Typed<int32_t>(v1::AGGREGATE_OP_MIN, 3, {0, 0, 2},
                             {-5, std::numeric_limits<int32_t>::min(), 7}, v1::COLUMN_TYPE_INT32)});
  const v1::Column& c = out[0].total_typed_result();
  EXPECT_EQ(c.type(), v1::COLUMN_TYPE_INT32);
  EXPECT_THAT(DataOf<int32_t>(c), ElementsAre(std::numeric_limits<int32_t>::min(), 0, 7));
  EXPECT_EQ(c.null_count(), 1u);
  EXPECT_EQ(c.validity(), std::string(1, '\5'));  // group 1 is empty
  EXPECT_TRUE(out[0].overflow().empty());         // min reports no overflow
  // uint64 above INT64_MAX is the maximum, not a negative number.
  auto u = Stream({Typed<uint64_t>(v1::AGGREGATE_OP_MAX, 1, {0, 0}, {uint64_t{1} << 63, 1},
                                   v1::COLUMN_TYPE_UINT64)});
  EXPECT_THAT(DataOf<uint64_t>(u[0].total_typed_result()), ElementsAre(uint64_t{1} << 63));
  EXPECT_EQ(u[0].total_typed_result().null_count(), 0u);
}

TEST_F(AggregateTypedTest, Float64FollowsTheFloat32Rules) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto out = Stream({Typed<double>(v1::AGGREGATE_OP_SUM, 3, {0, 0, 0, 1}, {0.5, nan, inf, -0.0},
                                   v1::COLUMN_TYPE_FLOAT64)});
  EXPECT_EQ(out[0].total_typed_result().type(), v1::COLUMN_TYPE_FLOAT64);
  const auto sums = DataOf<uint64_t>(out[0].total_typed_result());
  EXPECT_EQ(std::bit_cast<double>(sums[0]), 0.5);
  EXPECT_EQ(sums[1], 0u);  // a sum of -0 only is +0
  EXPECT_EQ(sums[2], 0u);  // empty: +0
  EXPECT_THAT(UnpackColumn<uint64_t>(out[0].total_counts64()), ElementsAre(1, 1, 0));
  auto mn = Stream(
      {Typed<double>(v1::AGGREGATE_OP_MIN, 2, {0, 0}, {0.0, -0.0}, v1::COLUMN_TYPE_FLOAT64)});
  const auto mins = DataOf<double>(mn[0].total_typed_result());
  EXPECT_TRUE(std::signbit(mins[0]));
  EXPECT_TRUE(std::isnan(mins[1]));
  EXPECT_EQ(mn[0].total_typed_result().null_count(), 0u);  // float64 empties are NaN, not null
}

TEST_F(AggregateTypedTest, Counts64OnRequestForFloat32AndCount) {
  v1::AggregateRequest r;
  r.set_op(v1::AGGREGATE_OP_COUNT);
  r.set_groups(2);
  *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{0, 0, 1});
  auto plain = Stream({r});
  EXPECT_TRUE(plain[0].total_counts64().empty());  // the reference response, unchanged
  r.set_want_counts64(true);
  auto with = Stream({r});
  EXPECT_THAT(UnpackColumn<uint64_t>(with[0].total_counts64()), ElementsAre(2, 1));
  EXPECT_EQ(with[0].total_counts(), plain[0].total_counts());
}

// A null value (validity bit 0) does not contribute, as a masked-out row does:
// not to the sum, min, max or mean, nor to the counts. The nulls' data would
// change every answer (and overflow the int64 sum) if it were read.
TEST_F(AggregateTypedTest, NullValuesDoNotContribute) {
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  // Rows:       0   1(null)  2   3(null)  4   5(masked)  6(null) ; group 2 is all null.
  const std::vector<uint32_t> keys = {0, 0, 1, 1, 0, 1, 2};
  const std::vector<int64_t> values = {kI64Max - 10, kI64Max, 5, kI64Min, 7, 100, 9};
  const std::string validity(1, char(0b0110101));  // rows 0, 2, 4, 5 valid
  const std::vector<uint32_t> mask = {1, 1, 1, 1, 1, 0, 1};
  for (v1::AggregateOp op : {v1::AGGREGATE_OP_SUM, v1::AGGREGATE_OP_MIN, v1::AGGREGATE_OP_MAX,
                             v1::AGGREGATE_OP_MEAN}) {
    SCOPED_TRACE(v1::AggregateOp_Name(op));
    auto first = Typed<int64_t>(op, 3, keys, values, v1::COLUMN_TYPE_INT64);
    first.mutable_typed_values()->set_validity(validity);
    *first.mutable_mask()->mutable_packed() = PackColumn<uint32_t>(mask);
    // A second batch, every value null: nothing changes.
    auto second = Typed<int64_t>(op, 3, {0, 1, 2}, {kI64Max, kI64Max, kI64Max},
                                 v1::COLUMN_TYPE_INT64);
    second.mutable_typed_values()->set_validity(std::string(1, '\0'));
    auto out = Stream({first, second});
    EXPECT_THAT(UnpackColumn<uint32_t>(out[0].contributing_rows()), ElementsAre(2, 1, 0));
    EXPECT_THAT(UnpackColumn<uint32_t>(out[1].contributing_rows()), ElementsAre(0, 0, 0));
    EXPECT_THAT(UnpackColumn<uint64_t>(out[1].total_counts64()), ElementsAre(2, 1, 0));
    const v1::Column& total = out[1].total_typed_result();
    switch (op) {
      case v1::AGGREGATE_OP_SUM:
        EXPECT_THAT(DataOf<int64_t>(total), ElementsAre(kI64Max - 3, 5, 0));
        EXPECT_EQ(out[1].total_overflow_groups(), 0u);  // the null kI64Max was never added
        break;
      case v1::AGGREGATE_OP_MIN:
        EXPECT_THAT(DataOf<int64_t>(total), ElementsAre(7, 5, 0));
        EXPECT_EQ(total.validity(), std::string(1, '\3'));  // group 2: only nulls, so null
        break;
      case v1::AGGREGATE_OP_MAX:
        EXPECT_THAT(DataOf<int64_t>(total), ElementsAre(kI64Max - 10, 5, 0));
        EXPECT_EQ(total.null_count(), 1u);
        break;
      default: {
        const auto means = DataOf<double>(total);
        EXPECT_EQ(means[0], double(kI64Max - 3) / 2.0);  // exact sum / count
        EXPECT_EQ(means[1], 5.0);
        EXPECT_TRUE(std::isnan(means[2]));
        break;
      }
    }
  }
  // float64: a null NaN or infinity is skipped like any null; a valid one by the
  // float rules.
  auto f = Typed<double>(v1::AGGREGATE_OP_SUM, 1, {0, 0, 0},
                         {1.5, -std::numeric_limits<double>::infinity(), 2.25},
                         v1::COLUMN_TYPE_FLOAT64);
  f.mutable_typed_values()->set_validity(std::string(1, '\5'));
  auto fo = Stream({f});
  EXPECT_THAT(DataOf<double>(fo[0].total_typed_result()), ElementsAre(3.75));
  EXPECT_THAT(UnpackColumn<uint64_t>(fo[0].total_counts64()), ElementsAre(2));
  // uint32: a null 0xffffffff is not summed (nor read as -1 by a narrower signed view).
  auto u = Typed<uint32_t>(v1::AGGREGATE_OP_SUM, 1, {0, 0}, {0xffffffffu, 0xfffffffeu},
                           v1::COLUMN_TYPE_UINT32);
  u.mutable_typed_values()->set_validity(std::string(1, '\2'));
  EXPECT_THAT(DataOf<uint64_t>(Stream({u})[0].total_typed_result()), ElementsAre(0xfffffffeu));
}

TEST_F(AggregateTypedTest, WrongOrMixedTypesNameTheField) {
  auto sum64 = Typed<int64_t>(v1::AGGREGATE_OP_SUM, 2, {0, 1}, {1, 2}, v1::COLUMN_TYPE_INT64);
  {
    auto r = sum64;
    r.set_op(v1::AGGREGATE_OP_COUNT);
    EXPECT_THAT(Refusal(r).message(), HasSubstr("typed_values: must not be set"));
  }
  {
    auto r = sum64;
    *r.mutable_values()->mutable_packed() = PackColumn<float>(std::vector<float>{1.0f, 2.0f});
    const absl::Status s = Refusal(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("values: set together with typed_values"));
  }
  for (v1::ColumnType t :
       {v1::COLUMN_TYPE_FLOAT32, v1::COLUMN_TYPE_BINARY, v1::COLUMN_TYPE_UNSPECIFIED}) {
    auto r = sum64;
    r.mutable_typed_values()->set_type(t);
    const absl::Status s = Refusal(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t;
    EXPECT_THAT(s.message(), HasSubstr("typed_values.type")) << t;
  }
  {
    auto r = sum64;
    r.mutable_typed_values()->set_length(3);
    EXPECT_THAT(Refusal(r).message(), HasSubstr("typed_values: length 3"));
  }
  {
    auto r = Typed<int32_t>(v1::AGGREGATE_OP_SUM, 2, {0, 1}, {1, 2}, v1::COLUMN_TYPE_INT64);
    EXPECT_THAT(Refusal(r).message(), HasSubstr("8 bytes per int64 value"));  // 4-byte data
  }
  {
    auto r = sum64;  // 2 rows take 1 byte of bitmap
    r.mutable_typed_values()->set_validity(std::string(2, '\3'));
    const absl::Status s = Refusal(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("typed_values.validity: 2 bytes, but a bitmap of 2 rows"));
  }
  {
    auto r = sum64;
    r.mutable_typed_values()->set_offsets(std::string(12, '\0'));
    EXPECT_THAT(Refusal(r).message(), HasSubstr("typed_values.offsets: 12 bytes"));
  }
  // Mixed within a stream: the first batch's type holds.
  AggregateStream stream;
  ASSERT_TRUE(Refusal(sum64, &stream).ok());
  auto u = Typed<uint64_t>(v1::AGGREGATE_OP_SUM, 2, {0, 1}, {1, 2}, v1::COLUMN_TYPE_UINT64);
  const absl::Status mixed = Refusal(u, &stream);
  EXPECT_EQ(mixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.message(), HasSubstr("typed_values.type: this stream aggregates int64"));
  v1::AggregateRequest f;
  f.set_op(v1::AGGREGATE_OP_SUM);
  f.set_groups(2);
  *f.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{0});
  *f.mutable_values()->mutable_packed() = PackColumn<float>(std::vector<float>{1.0f});
  EXPECT_THAT(Refusal(f, &stream).message(), HasSubstr("values: this stream aggregates int64"));
}

}  // namespace
}  // namespace gpujoin::server
