// fuzz_make_corpus: the seeds of fuzz_aggregate.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "make_corpus/seeds.hpp"

namespace gpujoin::fuzz::corpus {
namespace {

v1::AggregateRequest Aggregate(v1::AggregateOp op, uint64_t groups,
                               const std::vector<uint32_t>& keys,
                               const std::vector<float>& values = {}) {
  v1::AggregateRequest r;
  r.set_op(op);
  r.set_groups(groups);
  SetKeys(r.mutable_keys(), keys);
  if (op != v1::AGGREGATE_OP_COUNT) *r.mutable_values()->mutable_packed() = PackedF(values);
  return r;
}

// An aggregate request with `typed_values` of wire type `type`: `words` as
// little-endian values of the type's width (4 or 8 bytes).
v1::AggregateRequest TypedAggregate(v1::AggregateOp op, uint64_t groups,
                                    const std::vector<uint32_t>& keys, v1::ColumnType type,
                                    const std::vector<uint64_t>& words) {
  v1::AggregateRequest r;
  r.set_op(op);
  r.set_groups(groups);
  SetKeys(r.mutable_keys(), keys);
  v1::Column* c = r.mutable_typed_values();
  c->set_type(type);
  c->set_length(words.size());
  const bool wide = type == v1::COLUMN_TYPE_INT64 || type == v1::COLUMN_TYPE_UINT64 ||
                    type == v1::COLUMN_TYPE_FLOAT64;
  if (wide) {
    c->set_data(server::PackColumn<uint64_t>(words));
  } else {
    c->set_data(server::PackColumn<uint32_t>(std::vector<uint32_t>(words.begin(), words.end())));
  }
  return r;
}

}  // namespace

void AggregateTarget(Writer& w) {
  const std::string t = "fuzz_aggregate";
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  v1::AggregateRequest c1 = Aggregate(v1::AGGREGATE_OP_COUNT, 8, {0, 1, 1, 7, 8, 3});
  v1::AggregateRequest c2 = Aggregate(v1::AGGREGATE_OP_COUNT, 8, {1, 2, 2});
  SetKeys(c2.mutable_mask(), {1, 0, 5});
  c2.set_accumulate_only(true);
  w.Put(t, "count_stream", Frames({c1.SerializeAsString(), c2.SerializeAsString()}));
  for (auto [op, name] :
       {std::pair{v1::AGGREGATE_OP_SUM, "sum"}, std::pair{v1::AGGREGATE_OP_MIN, "min"},
        std::pair{v1::AGGREGATE_OP_MAX, "max"}, std::pair{v1::AGGREGATE_OP_MEAN, "mean"}}) {
    v1::AggregateRequest a =
        Aggregate(op, 4, {0, 0, 1, 1, 2, 3, 9}, {-0.0f, 0.0f, 2.5f, nan, inf, -1e30f, 4});
    v1::AggregateRequest b = Aggregate(op, 4, {3, 2}, {1e30f, -7});
    w.Put(t, std::string(name) + "_stream", Frames({a.SerializeAsString(), b.SerializeAsString()}));
  }
  w.Put(t, "groups_over_limit",
        Frames({Aggregate(v1::AGGREGATE_OP_COUNT, 2000, {1}).SerializeAsString()}));
  w.Put(t, "groups_over_message",
        Frames({Aggregate(v1::AGGREGATE_OP_COUNT, 700, {1}).SerializeAsString()}));
  w.Put(t, "groups_zero", Frames({Aggregate(v1::AGGREGATE_OP_COUNT, 0, {1}).SerializeAsString()}));
  w.Put(t, "op_unspecified",
        Frames({Aggregate(v1::AGGREGATE_OP_UNSPECIFIED, 4, {1}).SerializeAsString()}));
  w.Put(t, "groups_change",
        Frames({Aggregate(v1::AGGREGATE_OP_COUNT, 4, {1}).SerializeAsString(),
                Aggregate(v1::AGGREGATE_OP_COUNT, 5, {1}).SerializeAsString(),
                Aggregate(v1::AGGREGATE_OP_SUM, 4, {1}, {2}).SerializeAsString()}));
  v1::AggregateRequest count_values = Aggregate(v1::AGGREGATE_OP_COUNT, 4, {1});
  *count_values.mutable_values()->mutable_packed() = PackedF({1});
  w.Put(t, "count_with_values", Frames({count_values.SerializeAsString()}));
  v1::AggregateRequest short_values = Aggregate(v1::AGGREGATE_OP_SUM, 4, {1, 2}, {1});
  w.Put(t, "values_short", Frames({short_values.SerializeAsString()}));

  // Typed values: exact integer sums with overflow, float64, the
  // typed errors, and want_counts64.
  constexpr int64_t kBig = int64_t{1} << 62;
  auto i64 = [](std::vector<int64_t> v) { return std::vector<uint64_t>(v.begin(), v.end()); };
  auto f64 = [](std::vector<double> v) {
    std::vector<uint64_t> out;
    for (double d : v) out.push_back(std::bit_cast<uint64_t>(d));
    return out;
  };
  for (auto [op, name] :
       {std::pair{v1::AGGREGATE_OP_SUM, "sum"}, std::pair{v1::AGGREGATE_OP_MIN, "min"},
        std::pair{v1::AGGREGATE_OP_MAX, "max"}, std::pair{v1::AGGREGATE_OP_MEAN, "mean"}}) {
    // Group 0 overflows int64 in the first batch and comes back in range in the
    // second (the flag stays); group 3 stays empty.
    v1::AggregateRequest a =
        TypedAggregate(op, 4, {0, 0, 1, 2, 9}, v1::COLUMN_TYPE_INT64, i64({kBig, kBig, -5, 7, 1}));
    v1::AggregateRequest b =
        TypedAggregate(op, 4, {0, 1}, v1::COLUMN_TYPE_INT64, i64({-kBig, INT64_MIN}));
    w.Put(t, std::string("int64_") + name, Frames({a.SerializeAsString(), b.SerializeAsString()}));
    v1::AggregateRequest u =
        TypedAggregate(op, 3, {0, 0, 1}, v1::COLUMN_TYPE_UINT64, {~uint64_t{0}, 2, 3});
    v1::AggregateRequest u32 =
        TypedAggregate(op, 3, {0, 2, 2}, v1::COLUMN_TYPE_UINT32, {0xffffffffu, 0, 5});
    v1::AggregateRequest i32 = TypedAggregate(op, 3, {1, 1, 0}, v1::COLUMN_TYPE_INT32,
                                              {0x80000000u, 0x7fffffffu, 0xffffffffu});
    SetKeys(i32.mutable_mask(), {1, 1, 0});
    w.Put(t, std::string("uint64_") + name, Frames({u.SerializeAsString()}));
    w.Put(t, std::string("int32_uint32_") + name,
          Frames({i32.SerializeAsString(), u32.SerializeAsString()}));
    const double inf = std::numeric_limits<double>::infinity();
    v1::AggregateRequest d = TypedAggregate(op, 4, {0, 0, 1, 1, 2, 3}, v1::COLUMN_TYPE_FLOAT64,
                                            f64({-0.0, 0.0, std::nan(""), 1e300, -inf, 0.1}));
    d.set_accumulate_only(true);
    w.Put(t, std::string("float64_") + name, Frames({d.SerializeAsString()}));
  }
  v1::AggregateRequest typed_count =
      TypedAggregate(v1::AGGREGATE_OP_SUM, 4, {1}, v1::COLUMN_TYPE_INT64, {1});
  typed_count.set_op(v1::AGGREGATE_OP_COUNT);
  w.Put(t, "typed_count", Frames({typed_count.SerializeAsString()}));
  w.Put(t, "typed_float32",
        Frames({TypedAggregate(v1::AGGREGATE_OP_SUM, 4, {1}, v1::COLUMN_TYPE_FLOAT32, {1})
                    .SerializeAsString()}));
  // Null values: row 2 (a value that would overflow the int64 sum) is null; then
  // a bitmap of the wrong size.
  v1::AggregateRequest typed_validity = TypedAggregate(
      v1::AGGREGATE_OP_SUM, 4, {0, 1, 0, 2}, v1::COLUMN_TYPE_INT64,
      {uint64_t{1} << 62, 6, uint64_t{3} << 61, uint64_t{1} << 63});
  typed_validity.mutable_typed_values()->set_validity(std::string(1, '\x0b'));
  v1::AggregateRequest typed_validity_size =
      TypedAggregate(v1::AGGREGATE_OP_SUM, 4, {1}, v1::COLUMN_TYPE_INT64, {1});
  typed_validity_size.mutable_typed_values()->set_validity(std::string(2, '\1'));
  w.Put(t, "typed_validity", Frames({typed_validity.SerializeAsString(),
                                     typed_validity_size.SerializeAsString()}));
  v1::AggregateRequest typed_both =
      TypedAggregate(v1::AGGREGATE_OP_SUM, 4, {1}, v1::COLUMN_TYPE_UINT32, {1});
  *typed_both.mutable_values()->mutable_packed() = PackedF({1});
  w.Put(t, "typed_and_values", Frames({typed_both.SerializeAsString()}));
  w.Put(t, "typed_type_change",
        Frames({Aggregate(v1::AGGREGATE_OP_MAX, 4, {1}, {2}).SerializeAsString(),
                TypedAggregate(v1::AGGREGATE_OP_MAX, 4, {1}, v1::COLUMN_TYPE_INT64, {3})
                    .SerializeAsString(),
                TypedAggregate(v1::AGGREGATE_OP_MAX, 300, {1}, v1::COLUMN_TYPE_INT64, {3})
                    .SerializeAsString()}));
  v1::AggregateRequest c64 = Aggregate(v1::AGGREGATE_OP_COUNT, 4, {0, 3, 3});
  c64.set_want_counts64(true);
  v1::AggregateRequest s64 = Aggregate(v1::AGGREGATE_OP_SUM, 400, {0, 3, 3}, {1, 2, 3});
  s64.set_want_counts64(true);
  w.Put(t, "want_counts64", Frames({c64.SerializeAsString(), s64.SerializeAsString()}));
}

}  // namespace gpujoin::fuzz::corpus
