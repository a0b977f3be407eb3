// Writes the seed corpus of every fuzz target: fuzz_make_corpus DIR writes
// DIR/<target>/<seed> (scripts/fuzz --corpus regenerates fuzz/corpus with it).
// Seeds are small valid requests and the edge cases each target's checks are
// about; the output is the same on every run.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "fuzz_check.hpp"
#include "fuzz_support.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

namespace fs = std::filesystem;

class Writer {
 public:
  explicit Writer(fs::path root) : root_(std::move(root)) {}

  void Put(const std::string& target, const std::string& name, const std::string& bytes) {
    const fs::path dir = root_ / target;
    fs::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FUZZ_CHECK(out.good(), "cannot write " + (dir / name).string());
    ++count_;
  }
  int count() const { return count_; }

 private:
  fs::path root_;
  int count_ = 0;
};

std::string Packed(const std::vector<uint32_t>& v) { return server::PackColumn<uint32_t>(v); }

std::string PackedF(const std::vector<float>& v) { return server::PackColumn<float>(v); }

void SetKeys64(v1::U64Column* c, const std::vector<uint64_t>& keys, bool as_values = false) {
  if (as_values) {
    for (uint64_t k : keys) c->mutable_values()->add_v(k);
  } else {
    *c->mutable_packed() = server::PackColumn<uint64_t>(keys);
  }
}

void SetKeys(v1::U32Column* c, const std::vector<uint32_t>& keys, bool as_values = false) {
  if (as_values) {
    auto* list = c->mutable_values();
    for (uint32_t k : keys) list->add_v(k);
  } else {
    *c->mutable_packed() = Packed(keys);
  }
}

void ColumnCodec(Writer& w) {
  const std::string t = "fuzz_column_codec";
  v1::U32Column packed;
  SetKeys(&packed, {1, 2, 0xffffffffu, 7});
  for (int shift : {0, 1, 2, 3}) {
    w.Put(t, "packed_shift" + std::to_string(shift),
          std::string(1, static_cast<char>(shift)) + packed.SerializeAsString());
  }
  v1::U32Column values;
  SetKeys(&values, {5, 6, 7}, true);
  w.Put(t, "values", std::string(1, '\x10') + values.SerializeAsString());
  v1::U32Column both = packed;
  SetKeys(&both, {9}, true);
  w.Put(t, "both", std::string(1, '\x21') + both.SerializeAsString());
  v1::U32Column empty_values;
  empty_values.mutable_values();
  w.Put(t, "empty_values", std::string(1, '\x02') + empty_values.SerializeAsString());
  v1::U32Column ragged;
  ragged.set_packed(std::string("\x01\x02\x03\x04\x05", 5));
  w.Put(t, "ragged_packed", std::string(1, '\x03') + ragged.SerializeAsString());
  v1::F32Column floats;
  for (float f : {1.5f, -0.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    floats.mutable_values()->add_v(f);
  }
  w.Put(t, "float_values", std::string(1, '\x05') + floats.SerializeAsString());
  w.Put(t, "raw8", std::string("\x07\x01\x00\x00\x00\x02\x00\x00\x00", 9));
  w.Put(t, "raw7", std::string("\x06\x01\x00\x00\x00\x02\x00\x00", 8));
  w.Put(t, "mode_only", std::string(1, '\x00'));
  v1::U64Column wide;
  SetKeys64(&wide, {1, uint64_t{1} << 40, ~uint64_t{0}});
  w.Put(t, "u64_packed", std::string(1, '\x04') + wide.SerializeAsString());
  v1::LookupRequest both_keys;
  SetKeys(both_keys.mutable_keys(), {1, 2});
  SetKeys64(both_keys.mutable_keys64(), {3}, true);
  w.Put(t, "both_key_columns", std::string(1, '\x00') + both_keys.SerializeAsString());
  v1::LookupRequest keys64_only;
  SetKeys64(keys64_only.mutable_keys64(), {3, 4});
  w.Put(t, "keys64_only", std::string(1, '\x01') + keys64_only.SerializeAsString());
}

v1::LookupRequest Lookup(const std::string& index, const std::vector<uint32_t>& keys,
                         bool probes = false, uint64_t max_probes = 0) {
  v1::LookupRequest r;
  r.set_index(index);
  SetKeys(r.mutable_keys(), keys);
  r.set_want_probes(probes);
  r.set_max_probe_count(max_probes);
  r.set_batch_id(17);
  return r;
}

void LookupWire(Writer& w) {
  const std::string t = "fuzz_lookup_wire";
  const std::string plain = Lookup("x", {3, 1000, 77}, true).SerializeAsString();
  w.Put(t, "plain", std::string(1, '\0') + plain);
  w.Put(t, "plain_cut3", std::string("\x03\x02\x05\x00", 4) + plain);
  w.Put(t, "plain_cut7", std::string("\x07\x01\x01\x01\x09\x00\x03\x04", 8) + plain);
  v1::LookupRequest as_values = Lookup("x", {});
  as_values.clear_keys();
  SetKeys(as_values.mutable_keys(), {1, 2}, true);
  w.Put(t, "values",
        std::string(1, '\x01') + std::string(1, '\x03') + as_values.SerializeAsString());
  // The keys field twice (protobuf merges them; the scan leaves it to protobuf).
  const std::string keys_field = v1::LookupRequest(Lookup("", {4})).SerializeAsString();
  w.Put(t, "keys_twice", std::string(1, '\0') + plain + keys_field);
  // Unknown fields of every wire type, before and after the keys.
  std::string unknown;
  unknown += std::string("\x48\x96\x01", 3);                   // field 9, varint
  unknown += std::string("\x51", 1) + std::string(8, '\x11');  // field 10, fixed64
  unknown += std::string("\x5d", 1) + std::string(4, '\x22');  // field 11, fixed32
  unknown += std::string(
      "\x62\x03"
      "abc",
      5);  // field 12, bytes
  w.Put(t, "unknown_fields", std::string(1, '\x02') + std::string("\x01\x04", 2) + unknown + plain);
  w.Put(t, "group", std::string(1, '\0') + plain + std::string("\x6b\x08\x01\x6c", 4));
  w.Put(t, "truncated", std::string(1, '\0') + plain.substr(0, plain.size() - 3));
  v1::LookupRequest ragged = Lookup("x", {});
  ragged.mutable_keys()->set_packed("\x01\x02\x03\x04\x05\x06");
  w.Put(t, "ragged_keys", std::string(1, '\0') + ragged.SerializeAsString());
  // Every tag and length in 5 bytes: protobuf reads them, so the scan must too.
  const std::string five("\x80\x80\x80\x00", 4);
  w.Put(t, "five_byte_varints",
        std::string(1, '\0') + "\x0a\x01x" + "\x92" + five + "\x8e" + five + "\x8a" + five +
            "\x84" + five + Packed({9}));
  // An unknown field inside keys.
  w.Put(t, "keys_unknown_inner",
        std::string(1, '\0') + "\x0a\x01x" + "\x12\x08" + "\x0a\x04" + Packed({9}) + "\x18\x01");
  v1::LookupRequest wide = Lookup("x64", {});
  wide.clear_keys();
  SetKeys64(wide.mutable_keys64(), {7, uint64_t{5} << 32 | 3});
  w.Put(t, "keys64", std::string("\x02\x03\x07", 3) + wide.SerializeAsString());
  v1::LookupRequest both = Lookup("x", {1});
  SetKeys64(both.mutable_keys64(), {1});
  w.Put(t, "keys_and_keys64", std::string(1, '\0') + both.SerializeAsString());
  v1::LookupRequest ragged64 = Lookup("x64", {});
  ragged64.clear_keys();
  ragged64.mutable_keys64()->set_packed(Packed({1, 2, 3}));
  w.Put(t, "keys64_ragged", std::string(1, '\0') + ragged64.SerializeAsString());
  w.Put(t, "invalid_utf8_index",
        std::string(1, '\0') + "\x0a\x02\xc3\x28" + "\x12\x06\x0a\x04" + Packed({1}));
}

void LookupTarget(Writer& w) {
  const std::string t = "fuzz_lookup";
  const std::vector<uint32_t> keys = QueryFixtureKeys();
  w.Put(t, "x_all_keys", Lookup("x", keys, true).SerializeAsString());
  w.Put(t, "x_missing", Lookup("x", {33, 999, 0xffffffffu, 5}, true).SerializeAsString());
  w.Put(t, "x_bound1", Lookup("x", {0, 1, 2, 3, 1000, 1007}, true, 1).SerializeAsString());
  w.Put(t, "x_bound_over_capacity", Lookup("x", {1}, false, 65).SerializeAsString());
  w.Put(t, "tight", Lookup("tight", {1, 4, 7, 10, 13, 16, 46, 2}, true).SerializeAsString());
  w.Put(t, "tight_bound16", Lookup("tight", {1, 4, 7, 46}, true, 16).SerializeAsString());
  v1::LookupRequest listed = Lookup("x", {});
  listed.clear_keys();
  SetKeys(listed.mutable_keys(), {20, 21, 1001}, true);
  w.Put(t, "x_values_list", listed.SerializeAsString());
  v1::LookupRequest empty = Lookup("x", {});
  empty.clear_keys();
  empty.mutable_keys()->mutable_values();
  w.Put(t, "x_zero_rows", empty.SerializeAsString());
  auto lookup64 = [](const std::vector<uint64_t>& keys, bool values_list) {
    v1::LookupRequest r = Lookup("x64", {}, true);
    r.clear_keys();
    SetKeys64(r.mutable_keys64(), keys, values_list);
    return r.SerializeAsString();
  };
  w.Put(t, "x64_all_keys", lookup64(QueryFixtureKeys64(), false));
  w.Put(t, "x64_missing_and_reserved",
        lookup64({17, uint64_t{9} << 32 | 3, 3, ~uint64_t{0}, 0xfffffffeu}, true));
  w.Put(t, "x64_with_uint32_keys", Lookup("x64", {1, 2}).SerializeAsString());
  v1::LookupRequest narrow_wide = Lookup("x", {});
  narrow_wide.clear_keys();
  SetKeys64(narrow_wide.mutable_keys64(), {1});
  w.Put(t, "x_with_uint64_keys", narrow_wide.SerializeAsString());
  w.Put(t, "not_found", Lookup("nope", {1}).SerializeAsString());
  w.Put(t, "dotdot", Lookup("..", {1}).SerializeAsString());
  w.Put(t, "bad_name", Lookup("a/b", {1}).SerializeAsString());
  v1::LookupRequest no_keys = Lookup("x", {});
  no_keys.clear_keys();
  w.Put(t, "no_keys", no_keys.SerializeAsString());
  std::vector<uint32_t> many(900);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<uint32_t>(i % 50);
  w.Put(t, "x_over_response_limit", Lookup("x", many).SerializeAsString());
  // Match counts on the keep_all index and on a lowest_row one (1 / 0).
  v1::LookupRequest counts = Lookup("xm", {3, 1000, 5, 17, 0xfffffffeu, 33, 0xffffffffu}, true);
  counts.set_want_match_counts(true);
  w.Put(t, "xm_match_counts", counts.SerializeAsString());
  v1::LookupRequest counts_x = Lookup("x", {3, 33, 5}, false);
  counts_x.set_want_match_counts(true);
  counts_x.set_want_probes(true);
  w.Put(t, "x_match_counts_and_probes", counts_x.SerializeAsString());
}

void JoinTarget(Writer& w) {
  const std::string t = "fuzz_join";
  auto join = [](const std::string& index) {
    v1::JoinRequest r;
    r.set_index(index);
    r.set_batch_id(3);
    return r;
  };
  v1::JoinRequest two = join("x");
  auto* b0 = two.add_batches();
  SetKeys(b0->mutable_keys(), {30, 5, 10, 30, 999});
  b0->set_first_left_row(7);
  b0->set_want_found(true);
  auto* b1 = two.add_batches();
  SetKeys(b1->mutable_keys(), {20, 20, 20}, true);
  b1->set_capacity(2);
  b1->set_want_probes(true);
  w.Put(t, "x_two_batches", two.SerializeAsString());
  v1::JoinRequest counted = two;
  counted.mutable_batches(0)->set_count_only(true);
  w.Put(t, "x_count_only", counted.SerializeAsString());
  v1::JoinRequest selected = two;
  selected.add_select("n");
  w.Put(t, "x_select_without_payload", selected.SerializeAsString());
  v1::JoinRequest rows = join("x");
  auto* b = rows.add_batches();
  SetKeys(b->mutable_keys(), {1, 2, 3, 0xffffffffu});
  SetKeys(b->mutable_left_rows(), {40, 41, 42, 43});
  w.Put(t, "x_left_rows", rows.SerializeAsString());
  v1::JoinRequest wrap = join("x");
  b = wrap.add_batches();
  SetKeys(b->mutable_keys(), {1, 2, 3});
  b->set_first_left_row(0xfffffffeu);
  w.Put(t, "x_first_left_row_near_max", wrap.SerializeAsString());
  v1::JoinRequest huge = join("x");
  b = huge.add_batches();
  SetKeys(b->mutable_keys(), {1});
  b->set_capacity((uint64_t{1} << 31) + 1);
  w.Put(t, "x_capacity_over_2_31", huge.SerializeAsString());
  v1::JoinRequest wide = join("x");
  b = wide.add_batches();
  SetKeys(b->mutable_keys(), {1});
  b->set_first_left_row(uint64_t{1} << 32);
  w.Put(t, "x_first_left_row_2_32", wide.SerializeAsString());
  v1::JoinRequest tight = join("tight");
  tight.set_max_probe_count(1);
  b = tight.add_batches();
  SetKeys(b->mutable_keys(), {1, 4, 7, 10, 13, 46});
  b->set_want_found(true);
  b->set_want_probes(true);
  w.Put(t, "tight", tight.SerializeAsString());
  w.Put(t, "no_batches", join("x").SerializeAsString());
  v1::JoinRequest both = join("x");
  b = both.add_batches();
  SetKeys(b->mutable_keys(), {1});
  SetKeys(b->mutable_left_rows(), {1});
  b->set_first_left_row(4);
  w.Put(t, "left_rows_and_first_left_row", both.SerializeAsString());
  v1::JoinRequest join64 = join("x64");
  b = join64.add_batches();
  SetKeys64(b->mutable_keys64(), {7, 8, uint64_t{2} << 32 | 3, 99, ~uint64_t{0}});
  b->set_capacity(3);
  b->set_want_found(true);
  b = join64.add_batches();
  SetKeys64(b->mutable_keys64(), {0xffffffffu, 1}, true);
  SetKeys(b->mutable_left_rows(), {70, 71});
  b->set_want_probes(true);
  w.Put(t, "x64_two_batches", join64.SerializeAsString());
  v1::JoinRequest mixed = join("x64");
  b = mixed.add_batches();
  SetKeys(b->mutable_keys(), {1});
  w.Put(t, "x64_with_uint32_keys", mixed.SerializeAsString());
  w.Put(t, "not_found", join("missing").SerializeAsString());
  // Every kind on the keep_all index (groups of 1 to 4 rows) and on "x".
  for (const v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                                  v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
    v1::JoinRequest multi = join("xm");
    multi.set_kind(kind);
    b = multi.add_batches();
    SetKeys(b->mutable_keys(), {3, 999, 1000, 0xffffffffu, 17, 3});
    b->set_want_found(true);
    b->set_capacity(5);
    b = multi.add_batches();
    SetKeys(b->mutable_keys(), {1000, 2}, true);
    b->set_count_only(true);
    const std::string name = absl::AsciiStrToLower(v1::JoinKind_Name(kind));
    w.Put(t, "xm_" + name, multi.SerializeAsString());
    v1::JoinRequest plain = two;
    plain.set_kind(kind);
    w.Put(t, "x_" + name, plain.SerializeAsString());
  }
  v1::JoinRequest no_kind = two;
  no_kind.set_kind(static_cast<v1::JoinKind>(9));
  w.Put(t, "kind_that_is_none", no_kind.SerializeAsString());
}

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

std::string Frames(const std::vector<std::string>& messages) {
  std::string out;
  for (const std::string& m : messages) AppendFrame(m, &out);
  return out;
}

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

void HashTarget(Writer& w) {
  const std::string t = "fuzz_hash";
  auto column = [](v1::ColumnType type, const std::string& data, uint64_t offset, uint64_t length) {
    v1::HashColumn c;
    c.set_type(type);
    c.set_data(data);
    c.set_offset(offset);
    c.set_length(length);
    return c;
  };
  const std::string bytes32 = Packed({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const std::string bytes64 = bytes32 + bytes32;
  int n = 0;
  for (v1::ColumnType type :
       {v1::COLUMN_TYPE_UINT32, v1::COLUMN_TYPE_INT32, v1::COLUMN_TYPE_FLOAT32,
        v1::COLUMN_TYPE_UINT64, v1::COLUMN_TYPE_INT64, v1::COLUMN_TYPE_FLOAT64}) {
    v1::HashRequest r;
    const bool wide = type == v1::COLUMN_TYPE_UINT64 || type == v1::COLUMN_TYPE_INT64 ||
                      type == v1::COLUMN_TYPE_FLOAT64;
    *r.add_columns() = column(type, wide ? bytes64 : bytes32, 1, 9);
    r.mutable_columns(0)->set_validity(std::string("\xfb\x03", 2));
    r.set_bits(n % 2 == 0 ? 64 : 32);
    w.Put(t, "fixed_" + std::to_string(n++), r.SerializeAsString());
  }
  v1::HashRequest binary;
  v1::HashColumn b = column(v1::COLUMN_TYPE_BINARY, "helloworldgpujoin", 1, 3);
  b.set_offsets(Packed({0, 5, 10, 13, 17}));
  *binary.add_columns() = b;
  *binary.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 6, 3);
  binary.mutable_columns(1)->set_validity(std::string("\xbf\x02", 2));
  w.Put(t, "binary_and_u32", binary.SerializeAsString());
  v1::HashRequest decreasing = binary;
  decreasing.mutable_columns(0)->set_offsets(Packed({0, 9, 4, 13, 17}));
  w.Put(t, "binary_offsets_decrease", decreasing.SerializeAsString());
  v1::HashRequest past = binary;
  past.mutable_columns(0)->set_offsets(Packed({0, 5, 10, 13, 99}));
  w.Put(t, "binary_offsets_past_data", past.SerializeAsString());
  v1::HashRequest short_data;
  *short_data.add_columns() = column(v1::COLUMN_TYPE_UINT64, bytes32, 0, 6);
  w.Put(t, "data_too_short", short_data.SerializeAsString());
  v1::HashRequest lengths;
  *lengths.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 0, 3);
  *lengths.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 0, 4);
  w.Put(t, "lengths_differ", lengths.SerializeAsString());
  v1::HashRequest bits;
  *bits.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, 0, 3);
  bits.set_bits(16);
  w.Put(t, "bits_16", bits.SerializeAsString());
  v1::HashRequest far;
  *far.add_columns() = column(v1::COLUMN_TYPE_UINT32, bytes32, uint64_t{1} << 41, 1);
  w.Put(t, "offset_2_41", far.SerializeAsString());
  w.Put(t, "no_columns", v1::HashRequest().SerializeAsString());

  // Nested and dictionary columns: list<struct<int32, string>>, a
  // map, a dictionary with a null entry, and one index outside the dictionary.
  v1::HashColumn ids = column(v1::COLUMN_TYPE_INT32, bytes32, 1, 4);
  v1::HashColumn words = column(v1::COLUMN_TYPE_STRING, "abcdef", 0, 5);
  words.set_offsets(Packed({0, 1, 2, 3, 4, 6}));
  words.set_validity(std::string("\x1d", 1));
  v1::HashColumn elems = column(v1::COLUMN_TYPE_STRUCT, "", 0, 4);
  *elems.add_children() = ids;
  *elems.add_children() = words;
  v1::HashColumn list = column(v1::COLUMN_TYPE_LIST, "", 1, 3);
  list.set_offsets(Packed({0, 0, 2, 2, 4}));
  list.set_validity(std::string("\x0b", 1));
  *list.add_children() = elems;
  v1::HashColumn map = column(v1::COLUMN_TYPE_MAP, "", 0, 3);
  map.set_offsets(Packed({0, 1, 3, 4}));
  *map.add_children() = words;
  map.mutable_children(0)->set_validity("");
  *map.add_children() = column(v1::COLUMN_TYPE_INT8, "\x01\x02\x03\x04", 0, 4);
  v1::HashColumn dict = column(v1::COLUMN_TYPE_DICTIONARY, std::string("\x00\x01\x04", 3), 0, 3);
  dict.set_index_type(v1::COLUMN_TYPE_UINT8);
  *dict.add_children() = words;
  v1::HashRequest nested;
  *nested.add_columns() = list;
  *nested.add_columns() = map;
  *nested.add_columns() = dict;
  w.Put(t, "nested_list_map_dictionary", nested.SerializeAsString());
  v1::HashRequest outside = nested;
  outside.mutable_columns(2)->set_data(std::string("\x00\x05\x04", 3));
  w.Put(t, "dictionary_index_outside", outside.SerializeAsString());
}

std::string Spec(const std::string& name, uint64_t capacity, bool replace = false) {
  v1::BuildIndexRequest r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_capacity(capacity);
  r.mutable_spec()->set_replace(replace);
  return r.SerializeAsString();
}

std::string Chunk(const std::vector<uint32_t>& keys, const std::vector<uint32_t>& values = {},
                  uint64_t row_base = 0, const std::vector<uint32_t>& validity = {}) {
  v1::BuildIndexRequest r;
  SetKeys(r.mutable_chunk()->mutable_keys(), keys);
  if (!values.empty()) SetKeys(r.mutable_chunk()->mutable_values(), values);
  r.mutable_chunk()->set_row_base(row_base);
  if (!validity.empty()) SetKeys(r.mutable_chunk()->mutable_validity(), validity);
  return r.SerializeAsString();
}

void BuildTarget(Writer& w) {
  const std::string t = "fuzz_build_session";
  w.Put(t, "two_chunks", Frames({Spec("a", 16), Chunk({1, 2, 3, 2}), Chunk({9, 0xffffffffu, 1})}));
  w.Put(t, "auto_sized", Frames({Spec("a", 0), Chunk({5, 6, 7, 8, 9, 10, 11})}));
  // A self-sized table's probe bound against its final capacity (16 for 7 rows),
  // not the 2 slots of the first chunk's row; then one above it.
  v1::BuildIndexRequest auto_bound;
  auto_bound.mutable_spec()->set_name("a");
  auto_bound.mutable_spec()->set_max_probe_count(4);
  w.Put(t, "auto_sized_probe_bound",
        Frames({auto_bound.SerializeAsString(), Chunk({5}), Chunk({6, 7, 8}), Chunk({9, 10, 11})}));
  auto_bound.mutable_spec()->set_max_probe_count(17);
  w.Put(t, "auto_sized_probe_bound_above_capacity",
        Frames({auto_bound.SerializeAsString(), Chunk({5}), Chunk({6, 7, 8}), Chunk({9, 10, 11})}));
  v1::BuildIndexRequest expected;
  expected.mutable_spec()->set_name("e");
  expected.mutable_spec()->set_expected_rows(20);
  expected.mutable_spec()->set_target_load_factor(0.9);
  expected.mutable_spec()->set_first_value(1000);
  w.Put(t, "expected_rows", Frames({expected.SerializeAsString(), Chunk({1, 2, 3})}));
  v1::BuildIndexRequest explicit_spec;
  explicit_spec.mutable_spec()->set_name("v");
  explicit_spec.mutable_spec()->set_explicit_values(true);
  w.Put(t, "explicit_values",
        Frames(
            {explicit_spec.SerializeAsString(), Chunk({4, 5, 4}, {40, 50, 41}), Chunk({6}, {60})}));
  v1::BuildIndexRequest batch_spec;
  batch_spec.mutable_spec()->set_name("b");
  batch_spec.mutable_spec()->set_batch_mode(true);
  batch_spec.mutable_spec()->set_capacity(32);
  w.Put(t, "batch_mode",
        Frames({batch_spec.SerializeAsString(), Chunk({1, 2, 3}, {}, 100, {1, 0, 1}),
                Chunk({2, 4}, {}, 7)}));
  w.Put(t, "replace_old", Frames({Spec("old", 8, true), Chunk({1, 7})}));
  w.Put(t, "old_without_replace", Frames({Spec("old", 8), Chunk({1})}));
  v1::BuildIndexRequest bound;
  bound.mutable_spec()->set_name("o");
  bound.mutable_spec()->set_capacity(4);
  bound.mutable_spec()->set_max_probe_count(1);
  w.Put(t, "overflow", Frames({bound.SerializeAsString(), Chunk({1, 2, 3, 4, 5, 6, 7, 8})}));
  v1::BuildIndexRequest high;
  high.mutable_spec()->set_name("h");
  high.mutable_spec()->set_first_value(0xfffffffcu);
  w.Put(t, "first_value_near_max", Frames({high.SerializeAsString(), Chunk({1, 2, 3, 4})}));
  w.Put(t, "chunk_before_spec", Frames({Chunk({1}), Spec("a", 8)}));
  w.Put(t, "spec_twice", Frames({Spec("a", 8), Spec("a", 8)}));
  w.Put(t, "capacity_not_power_of_two", Frames({Spec("a", 12), Chunk({1})}));
  w.Put(t, "capacity_over_budget", Frames({Spec("a", 1 << 14), Chunk({1})}));
  std::vector<uint32_t> many(800);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<uint32_t>(i * 7);
  w.Put(t, "over_staging_limit", Frames({Spec("a", 0), Chunk(many)}));
  w.Put(t, "over_staging_limit_odd", Frames({Spec("a", 0), Chunk(many)}) + "\x00");
  w.Put(t, "table_fills_budget", Frames({Spec("a", 8192), Chunk({1})}));
  w.Put(t, "values_without_explicit", Frames({Spec("a", 8), Chunk({1}, {2})}));
  v1::BuildIndexRequest keep_all;
  keep_all.mutable_spec()->set_name("k");
  keep_all.mutable_spec()->set_capacity(16);
  keep_all.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  w.Put(t, "keep_all",
        Frames({keep_all.SerializeAsString(), Chunk({1, 2, 1, 0xffffffffu}), Chunk({2, 1, 5})}));
  v1::BuildIndexRequest keep_all_auto = keep_all;
  keep_all_auto.mutable_spec()->set_capacity(0);
  keep_all_auto.mutable_spec()->set_expected_rows(40);
  w.Put(t, "keep_all_expected_rows",
        Frames({keep_all_auto.SerializeAsString(), Chunk({7, 7, 7, 7, 8})}));
  v1::BuildIndexRequest no_policy = keep_all;
  no_policy.mutable_spec()->set_duplicates(static_cast<v1::DuplicatePolicy>(3));
  w.Put(t, "duplicate_policy_that_is_none", Frames({no_policy.SerializeAsString(), Chunk({1})}));
  v1::BuildIndexRequest wide_spec;
  wide_spec.mutable_spec()->set_name("w");
  wide_spec.mutable_spec()->set_key_type(v1::KEY_TYPE_UINT64);
  v1::BuildIndexRequest wide_chunk;
  SetKeys64(wide_chunk.mutable_chunk()->mutable_keys64(),
            {1, uint64_t{1} << 32 | 1, 0xffffffffu, ~uint64_t{0}, 1});
  v1::BuildIndexRequest wide_chunk2;
  SetKeys64(wide_chunk2.mutable_chunk()->mutable_keys64(), {5, 6}, true);
  w.Put(t, "uint64_keys",
        Frames({wide_spec.SerializeAsString(), wide_chunk.SerializeAsString(),
                wide_chunk2.SerializeAsString()}));
  v1::BuildIndexRequest wide_batch = wide_spec;
  wide_batch.mutable_spec()->set_batch_mode(true);
  wide_batch.mutable_spec()->set_replace(true);
  wide_batch.mutable_spec()->set_name("old");
  v1::BuildIndexRequest wide_batch_chunk = wide_chunk;
  wide_batch_chunk.mutable_chunk()->set_row_base(40);
  SetKeys(wide_batch_chunk.mutable_chunk()->mutable_validity(), {1, 1, 0, 1, 1});
  w.Put(t, "uint64_batch_replacing_old",
        Frames({wide_batch.SerializeAsString(), wide_batch_chunk.SerializeAsString()}));
  // Payload columns: an int64, a string and a bool column in chunks
  // of their own boundaries (one payload-only), and the same with a column short.
  v1::BuildIndexRequest payload_spec;
  payload_spec.mutable_spec()->set_name("p");
  payload_spec.mutable_spec()->set_capacity(16);
  for (const auto& [name, type] :
       std::vector<std::pair<std::string, v1::ColumnType>>{{"n", v1::COLUMN_TYPE_INT64},
                                                           {"s", v1::COLUMN_TYPE_STRING},
                                                           {"b", v1::COLUMN_TYPE_BOOL}}) {
    auto* p = payload_spec.mutable_spec()->add_payload();
    p->set_name(name);
    p->set_type(type);
  }
  auto payload_column = [](const std::string& name, v1::ColumnType type, uint64_t rows) {
    v1::Column c;
    c.set_name(name);
    c.set_type(type);
    c.set_length(rows);
    if (type == v1::COLUMN_TYPE_INT64) c.set_data(std::string(rows * 8, '\x07'));
    if (type == v1::COLUMN_TYPE_BOOL) c.set_data(std::string((rows + 7) / 8, '\x05'));
    if (type == v1::COLUMN_TYPE_STRING) {
      std::string offsets;
      for (uint32_t i = 0; i <= rows; ++i) offsets.append(reinterpret_cast<const char*>(&i), 4);
      c.set_offsets(offsets);
      c.set_data(std::string(rows, 'a'));
    }
    c.set_validity(std::string((rows + 7) / 8, '\x06'));
    return c;
  };
  v1::BuildIndexRequest payload_chunk;
  SetKeys(payload_chunk.mutable_chunk()->mutable_keys(), {1, 2, 3, 2});
  *payload_chunk.mutable_chunk()->add_payload() = payload_column("n", v1::COLUMN_TYPE_INT64, 5);
  *payload_chunk.mutable_chunk()->add_payload() = payload_column("s", v1::COLUMN_TYPE_STRING, 3);
  v1::BuildIndexRequest payload_rest;
  SetKeys(payload_rest.mutable_chunk()->mutable_keys(), {9});
  *payload_rest.mutable_chunk()->add_payload() = payload_column("s", v1::COLUMN_TYPE_STRING, 2);
  v1::BuildIndexRequest payload_only;
  *payload_only.mutable_chunk()->add_payload() = payload_column("b", v1::COLUMN_TYPE_BOOL, 5);
  w.Put(t, "payload",
        Frames({payload_spec.SerializeAsString(), payload_chunk.SerializeAsString(),
                payload_rest.SerializeAsString(), payload_only.SerializeAsString()}));
  w.Put(t, "payload_column_short",
        Frames({payload_spec.SerializeAsString(), payload_chunk.SerializeAsString(),
                payload_only.SerializeAsString()}));
  w.Put(t, "uint64_spec_uint32_keys", Frames({wide_spec.SerializeAsString(), Chunk({1})}));
  w.Put(t, "uint32_spec_uint64_keys", Frames({Spec("a", 8), wide_chunk.SerializeAsString()}));
  v1::BuildIndexRequest bad_type = wide_spec;
  bad_type.mutable_spec()->set_key_type(static_cast<v1::KeyType>(7));
  w.Put(t, "key_type_7", Frames({bad_type.SerializeAsString(), wide_chunk.SerializeAsString()}));
}

void GraphTarget(Writer& w) {
  // FuzzedDataProvider input has no structure to seed: fixed pseudo-random bytes
  // of a few lengths (and all-zero and all-one inputs) start the search.
  const std::string t = "fuzz_graph_validate";
  std::mt19937 rng(20240601);
  for (size_t length : {24, 64, 128, 256, 400, 700, 1200, 2600}) {
    std::string bytes(length, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    w.Put(t, "random_" + std::to_string(length), bytes);
  }
  w.Put(t, "zeros_256", std::string(256, '\0'));
  w.Put(t, "ones_256", std::string(256, '\xff'));
}

// fuzz_data_files: calls on the --data-dir files (fuzz_data_files.cpp: the
// first byte is the call in its low 3 bits, the index a/b/c/named-by-the-file in
// the next 2, bit 5 LoadIndex's replace; the rest is the file name).
void DataFilesTarget(Writer& w) {
  const std::string t = "fuzz_data_files";
  enum : uint8_t { kBuild = 0, kSave = 2, kLoad = 3, kDelete = 5, kDrop = 6, kList = 7 };
  enum : uint8_t { kA = 0 << 3, kB = 1 << 3, kNamed = 3 << 3, kReplace = 0x20 };
  auto calls = [](std::initializer_list<std::pair<uint8_t, std::string>> list) {
    std::string out;
    for (const auto& [op, file] : list) AppendFrame(std::string(1, char(op)) + file, &out);
    return out;
  };
  w.Put(t, "copy_round_trip",
        calls({{kBuild | kA, ""}, {kSave | kA, "a-copy.bin"}, {kList, ""},
               {kLoad | kB, "a-copy.bin"}, {kDelete, "a-copy.bin"}, {kDrop | kA, ""}}));
  w.Put(t, "save_into_other_snapshot",
        calls({{kBuild | kA, ""}, {kSave | kA, "b.gjsnap"}, {kBuild | kB, ""},
               {kSave | kA, "b.gjsnap"}, {kSave | kA, "a.gjsnap"}, {kDelete, "b.gjsnap"}}));
  w.Put(t, "load_own_and_other",
        calls({{kBuild | kA, ""}, {kBuild | kB, ""}, {kLoad | kA | kReplace, ""},
               {kLoad | kA | kReplace, "b.gjsnap"}, {kBuild | kA, ""}, {kLoad | kA, ""}}));
  w.Put(t, "reserved_names",
        calls({{kBuild | kA, ""}, {kSave | kA, ".hidden"}, {kSave | kA, "x.gjsnap.tmp-1"},
               {kSave | kA, ".."}, {kSave | kA, "a/b"}, {kDelete, ".a.gjsnap.gjsnap.tmp-1-0"},
               {kLoad | kB, "../a.gjsnap"}}));
  w.Put(t, "dropped_then_missing",
        calls({{kBuild | kA, ""}, {kDrop | kA, ""}, {kLoad | kA, ""}, {kDelete, "a.gjsnap"},
               {kDrop | kA, ""}}));
  w.Put(t, "odd_index_names",
        calls({{kBuild | kNamed, ".y.gjsnap.tmp-3"}, {kBuild | kNamed, "x.gjsnap"},
               {kSave | kNamed, "x.gjsnap"}, {kList, ""}, {kDrop | kNamed, ".y.gjsnap.tmp-3"}}));
}

}  // namespace
}  // namespace gpujoin::fuzz

int main(int argc, char** argv) {
  using namespace gpujoin::fuzz;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR (writes OUTPUT_DIR/<target>/<seed>)\n", argv[0]);
    return 2;
  }
  Writer w(argv[1]);
  ColumnCodec(w);
  LookupWire(w);
  LookupTarget(w);
  JoinTarget(w);
  AggregateTarget(w);
  HashTarget(w);
  BuildTarget(w);
  GraphTarget(w);
  DataFilesTarget(w);
  std::printf("wrote %d seeds under %s\n", w.count(), argv[1]);
  return 0;
}
