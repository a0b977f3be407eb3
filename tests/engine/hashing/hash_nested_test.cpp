// Hashing Arrow's nested, dictionary and narrow types on the host:
// random column trees against an independent model of docs/hashing.md, "a slice
// hashes as the slice of the hash", dictionaries as their decoded values, the
// null contract at every level, the collisions Arrow's hash32/hash64 once had
// (as regressions), and the validation of every new layout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hash_test_util.hpp"
#include "nested_test_util.hpp"

namespace gpujoin::engine {
namespace {

using testing::Bool;
using testing::EncodeOptions;
using testing::EncodeTop;
using testing::ExpectInvalid;
using testing::HashOnHost;
using testing::HashOutput;
using ::testing::HasSubstr;
using testing::ListOf;
using testing::LType;
using testing::LValue;
using testing::MapOf;
using testing::MapType;
using testing::ModelRow;
using testing::MustHash;
using testing::Null;
using testing::OwnedTree;
using testing::Scalar;
using testing::Seq;
using testing::Str;
using testing::StructOf;
using testing::T;

std::vector<HashColumn> ViewsOf(const std::vector<OwnedTree>& trees) {
  std::vector<HashColumn> v;
  for (const auto& t : trees) v.push_back(t.View());
  return v;
}

// The engine's hashes of `columns` equal the model's, row by row.
template <typename H>
void ExpectMatchesModel(const std::vector<LType>& types,
                        const std::vector<std::vector<LValue>>& values,
                        const std::vector<OwnedTree>& encoded, const std::string& what) {
  const HashBits bits = sizeof(H) == 8 ? HashBits::k64 : HashBits::k32;
  const HashOutput out = MustHash(ViewsOf(encoded), bits);
  ASSERT_EQ(out.rows, values[0].size()) << what;
  for (uint64_t r = 0; r < out.rows; ++r) {
    const std::optional<H> want = ModelRow<H>(types, values, r);
    ASSERT_EQ(out.Valid(r), want.has_value()) << what << " row " << r;
    ASSERT_EQ(out.hashes[r], want.value_or(0)) << what << " row " << r;
  }
  // Bits past the last row are 0.
  if (out.rows % 8 != 0) EXPECT_EQ(out.validity.back() >> (out.rows % 8), 0) << what;
}

// One hash of a single-column list of values.
template <typename H = uint64_t>
std::optional<uint64_t> HashOne(const LType& t, const LValue& v, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  const OwnedTree c = EncodeTop(t, {v}, rng);
  const HashOutput out = MustHash({c.View()}, sizeof(H) == 8 ? HashBits::k64 : HashBits::k32);
  if (out.rows != 1 || !out.Valid(0)) return std::nullopt;
  return out.hashes[0];
}

// ---------------------------------------------------------------------------
// Properties over random trees (depth up to 3, random nulls, random offsets).
// ---------------------------------------------------------------------------

TEST(HashNestedPropertyTest, RandomTreesMatchTheModel) {
  std::mt19937_64 rng(2201);
  for (int iter = 0; iter < 300; ++iter) {
    const size_t num_columns = 1 + rng() % 3;
    const uint64_t rows = rng() % 4 == 0 ? rng() % 3 : rng() % 70;
    const double null_p = (rng() % 4) * 0.15;
    std::vector<LType> types;
    std::vector<std::vector<LValue>> values;
    std::vector<OwnedTree> encoded;
    for (size_t c = 0; c < num_columns; ++c) {
      types.push_back(testing::RandomType(rng, 3));
      std::vector<LValue> col;
      for (uint64_t r = 0; r < rows; ++r)
        col.push_back(testing::RandomValue(types[c], rng, null_p));
      values.push_back(col);
      encoded.push_back(EncodeTop(types[c], col, rng));
    }
    const std::string what = "iteration " + std::to_string(iter);
    ExpectMatchesModel<uint64_t>(types, values, encoded, what);
    ExpectMatchesModel<uint32_t>(types, values, encoded, what);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Hashing logical rows [a, b) of a column, whatever its encoding and however
// its children are offset, gives rows [a, b) of the whole column's hashes; so do
// the row ranges the CPU backend hands its threads.
TEST(HashNestedPropertyTest, SliceEqualsSliceOfHash) {
  std::mt19937_64 rng(2202);
  for (int iter = 0; iter < 200; ++iter) {
    const LType t = testing::RandomType(rng, 3);
    const uint64_t rows = 1 + rng() % 80;
    std::vector<LValue> col;
    for (uint64_t r = 0; r < rows; ++r) col.push_back(testing::RandomValue(t, rng, 0.25));
    const OwnedTree c = EncodeTop(t, col, rng);
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      const HashOutput whole = MustHash({c.View()}, bits);
      const uint64_t a = rng() % rows;
      const uint64_t n = rng() % (rows - a + 1);
      const HashOutput part = MustHash({c.Slice(a, n)}, bits);
      for (uint64_t r = 0; r < n; ++r) {
        ASSERT_EQ(part.Valid(r), whole.Valid(a + r)) << iter << " row " << a + r;
        ASSERT_EQ(part.hashes[r], whole.hashes[a + r]) << iter << " row " << a + r;
      }
      // Ranges of 8 rows, as the backend's threads hash them.
      testing::NodeBuffers ranged({c.View()}, bits);
      for (uint64_t first = 0; first < rows; first += 8) {
        detail::HashRowsHost(ranged.node, first, std::min<uint64_t>(8, rows - first));
      }
      ASSERT_EQ(ranged.Output(), whole) << iter;
    }
  }
}

// The same logical values hash alike whatever their encoding: plain or through
// any dictionary (indices of any width, entries repeated, shuffled, extra and
// null entries, garbage under null indices), with any child offsets.
TEST(HashNestedPropertyTest, DictionaryEqualsDecoded) {
  std::mt19937_64 rng(2203);
  EncodeOptions plain;
  plain.dictionary_percent = 0;
  EncodeOptions dict;
  dict.dictionary_percent = 100;
  for (int iter = 0; iter < 150; ++iter) {
    const LType t = testing::RandomType(rng, iter % 2 == 0 ? 0 : 2);
    const uint64_t rows = 1 + rng() % 60;
    std::vector<LValue> col;
    for (uint64_t r = 0; r < rows; ++r) col.push_back(testing::RandomValue(t, rng, 0.2));
    const OwnedTree a = EncodeTop(t, col, rng, plain);
    const OwnedTree b = EncodeTop(t, col, rng, dict);
    const OwnedTree c = EncodeTop(t, col, rng, dict);
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      const HashOutput ha = MustHash({a.View()}, bits);
      ASSERT_EQ(MustHash({b.View()}, bits), ha) << iter;
      ASSERT_EQ(MustHash({c.View()}, bits), ha) << iter;
    }
  }
}

// ---------------------------------------------------------------------------
// The null contract at each level.
// ---------------------------------------------------------------------------

TEST(HashNestedNullTest, StructRowIsNullWhenAnyFieldAtAnyDepthIsNull) {
  const LType inner = StructOf({T(ColumnType::kInt32), T(ColumnType::kString)});
  const LType t = StructOf({T(ColumnType::kInt8), inner});
  EXPECT_TRUE(HashOne(t, Seq({Scalar<int8_t>(1), Seq({Scalar<int32_t>(2), Str("x")})})));
  EXPECT_FALSE(HashOne(t, Seq({Null(), Seq({Scalar<int32_t>(2), Str("x")})})));
  EXPECT_FALSE(HashOne(t, Seq({Scalar<int8_t>(1), Seq({Scalar<int32_t>(2), Null()})})));
  EXPECT_FALSE(HashOne(t, Seq({Scalar<int8_t>(1), Null()})));
  EXPECT_FALSE(HashOne(t, Null()));
}

// A NullType field has no validity bitmap at all, and every row of it is null.
TEST(HashNestedNullTest, NullTypeFieldNullsTheRow) {
  const LType t = StructOf({T(ColumnType::kInt32), T(ColumnType::kNull)});
  EXPECT_FALSE(HashOne(t, Seq({Scalar<int32_t>(1), Null()})));
  OwnedTree null_column;
  null_column.type = ColumnType::kNull;
  null_column.length = 3;
  const HashOutput out = MustHash({null_column.View()}, HashBits::k64);
  EXPECT_EQ(out.validity, std::vector<uint8_t>{0});
  EXPECT_EQ(out.hashes, (std::vector<uint64_t>{0, 0, 0}));
}

// A list (or map) row is null only through its own validity: null elements,
// and elements that are structs with a null field, are elements.
TEST(HashNestedNullTest, ListRowIsNullOnlyByItsOwnValidity) {
  const LType t = ListOf(StructOf({T(ColumnType::kInt32), T(ColumnType::kInt32)}));
  EXPECT_TRUE(HashOne(t, Seq({Null()})));
  EXPECT_TRUE(HashOne(t, Seq({Seq({Scalar<int32_t>(1), Null()})})));
  EXPECT_FALSE(HashOne(t, Null()));
  const LType m = MapType(T(ColumnType::kString), T(ColumnType::kInt32));
  EXPECT_TRUE(HashOne(m, MapOf({Str("a")}, {Null()})));
  EXPECT_FALSE(HashOne(m, Null()));
}

// A struct element whose field is null counts as a null element, as a null
// element does: the fold sees no hash for it, only its position.
TEST(HashNestedNullTest, StructWithNullFieldIsANullElement) {
  const LType t = ListOf(StructOf({T(ColumnType::kInt32)}));
  EXPECT_EQ(HashOne(t, Seq({Seq({Null()})})), HashOne(t, Seq({Null()})));
}

TEST(HashNestedNullTest, DictionaryIndexToNullEntryIsNull) {
  // Dictionary ["a", null]; indices [0, 1, null].
  OwnedTree dict;
  dict.type = ColumnType::kString;
  dict.data = {'a'};
  dict.offsets = {0, 1, 1};
  dict.validity = {0b01};
  dict.length = 2;
  OwnedTree c;
  c.type = ColumnType::kDictionary;
  c.index_type = ColumnType::kInt16;
  c.data = {0, 0, 1, 0, 0x39, 0x30};  // the null row holds index 12345: never read
  c.validity = {0b011};
  c.length = 3;
  c.children = {dict};
  const HashOutput out = MustHash({c.View()}, HashBits::k64);
  EXPECT_EQ(out.validity, std::vector<uint8_t>{0b001});
  EXPECT_EQ(out.hashes[0], *HashOne(T(ColumnType::kString), Str("a")));
  EXPECT_EQ(out.hashes[1], 0u);
  EXPECT_EQ(out.hashes[2], 0u);
}

// ---------------------------------------------------------------------------
// Regressions: the collisions and misreads Arrow's hash32/hash64 went through
// (../shared seed 004), each as the case that exposed it.
// ---------------------------------------------------------------------------

// [null] and [0] once hashed alike (a null element canonicalised to 0).
TEST(HashNestedRegressionTest, NullElementIsNotZero) {
  const LType t = ListOf(T(ColumnType::kInt32));
  for (uint64_t seed = 1; seed < 4; ++seed) {
    EXPECT_NE(HashOne(t, Seq({Null()}), seed), HashOne(t, Seq({Scalar<int32_t>(0)}), seed));
    EXPECT_NE(HashOne<uint32_t>(t, Seq({Null()}), seed),
              HashOne<uint32_t>(t, Seq({Scalar<int32_t>(0)}), seed));
  }
  EXPECT_NE(HashOne(t, Seq({Null()})), HashOne(t, Seq({})));
  EXPECT_NE(HashOne(t, Seq({Null()})), HashOne(t, Seq({Null(), Null()})));
}

// Positions keep [null, x] and [x, null] apart.
TEST(HashNestedRegressionTest, NullPositionMatters) {
  const LType t = ListOf(T(ColumnType::kInt64));
  const LValue x = Scalar<int64_t>(7);
  EXPECT_NE(HashOne(t, Seq({Null(), x})), HashOne(t, Seq({x, Null()})));
  EXPECT_NE(HashOne(t, Seq({x, Null()})), HashOne(t, Seq({x})));
  EXPECT_NE(HashOne<uint32_t>(t, Seq({Null(), x})), HashOne<uint32_t>(t, Seq({x, Null()})));
}

// list<struct<f0: int32>>: [{f0: 7}] and [null] whose f0 slot also holds 7.
TEST(HashNestedRegressionTest, NullStructElementWithValueUnderneath) {
  // Struct validity [1, 0]; f0 = [7, 7]; one list row per struct row.
  OwnedTree f0;
  f0.type = ColumnType::kInt32;
  f0.data = {7, 0, 0, 0, 7, 0, 0, 0};
  f0.length = 2;
  OwnedTree s;
  s.type = ColumnType::kStruct;
  s.validity = {0b01};
  s.length = 2;
  s.children = {f0};
  OwnedTree list;
  list.type = ColumnType::kList;
  list.offsets = {0, 1, 2};
  list.length = 2;
  list.children = {s};
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    const HashOutput out = MustHash({list.View()}, bits);
    EXPECT_EQ(out.validity, std::vector<uint8_t>{0b11});
    EXPECT_NE(out.hashes[0], out.hashes[1]);
  }
}

// map<utf8, int32>: {"a": null} and {"a": 0} once collided.
TEST(HashNestedRegressionTest, MapNullItemIsNotZero) {
  const LType m = MapType(T(ColumnType::kString), T(ColumnType::kInt32));
  EXPECT_NE(HashOne(m, MapOf({Str("a")}, {Null()})),
            HashOne(m, MapOf({Str("a")}, {Scalar<int32_t>(0)})));
}

// An entry with a null item once dropped its key: [["a", null]] == [["b", null]].
TEST(HashNestedRegressionTest, MapKeysCountWhenItemsAreNull) {
  const LType m = MapType(T(ColumnType::kString), T(ColumnType::kInt32));
  EXPECT_NE(HashOne(m, MapOf({Str("a")}, {Null()})), HashOne(m, MapOf({Str("b")}, {Null()})));
  EXPECT_NE(HashOne(m, MapOf({Str("a"), Str("b")}, {Null(), Null()})),
            HashOne(m, MapOf({Str("b"), Str("a")}, {Null(), Null()})));
  // Maps nest: a map's item may be a map.
  const LType mm = MapType(T(ColumnType::kInt8), m);
  EXPECT_NE(HashOne(mm, MapOf({Scalar<int8_t>(1)}, {MapOf({Str("a")}, {Null()})})),
            HashOne(mm, MapOf({Scalar<int8_t>(1)}, {MapOf({Str("b")}, {Null()})})));
}

// fixed_size_binary(0): every valid row holds the same empty value, in any
// slice, inside a struct, and through a dictionary (the misread bit of Arrow).
TEST(HashNestedRegressionTest, FixedSizeBinaryOfWidthZero) {
  OwnedTree c;
  c.type = ColumnType::kFixedSizeBinary;
  c.byte_width = 0;
  c.length = 20;
  c.offset = 3;
  c.validity = {0xFF, 0xF7, 0xFF};  // row 8 (physical 11) is null
  const uint64_t empty64 = 0xef46db3751d8e999ull;
  const HashOutput out = MustHash({c.View()}, HashBits::k64);
  for (uint64_t r = 0; r < 20; ++r) {
    EXPECT_EQ(out.Valid(r), r != 8) << r;
    EXPECT_EQ(out.hashes[r], r != 8 ? empty64 : 0) << r;
  }
  EXPECT_EQ(MustHash({c.Slice(5, 6)}, HashBits::k64).hashes[1], empty64);
  EXPECT_EQ(HashOne(StructOf({T(ColumnType::kFixedSizeBinary, 0)}), Seq({testing::Bytes({})})),
            HashOne(T(ColumnType::kFixedSizeBinary, 0), testing::Bytes({})));
  EncodeOptions dict;
  dict.dictionary_percent = 100;
  std::mt19937_64 rng(5);
  const OwnedTree d = EncodeTop(T(ColumnType::kFixedSizeBinary, 0),
                                {testing::Bytes({}), Null(), testing::Bytes({})}, rng, dict);
  ASSERT_EQ(d.type, ColumnType::kDictionary);
  const HashOutput dh = MustHash({d.View()}, HashBits::k64);
  EXPECT_EQ(dh.validity, std::vector<uint8_t>{0b101});
  EXPECT_EQ(dh.hashes[0], empty64);
  EXPECT_EQ(dh.hashes[2], empty64);
}

// Binary-like columns without a values buffer (only empty values) read nothing.
TEST(HashNestedRegressionTest, EmptyValuesWithoutDataBuffer) {
  for (ColumnType t : {ColumnType::kString, ColumnType::kLargeBinary, ColumnType::kLargeString}) {
    OwnedTree c;
    c.type = t;
    c.length = 3;
    if (t == ColumnType::kString) {
      c.offsets = {0, 0, 0, 0};
    } else {
      c.large_offsets = {0, 0, 0, 0};
    }
    c.validity = {0b101};
    const HashOutput out = MustHash({c.View()}, HashBits::k32);
    EXPECT_EQ(out.hashes, (std::vector<uint64_t>{0x02cc5d05u, 0, 0x02cc5d05u}));
  }
}

// ---------------------------------------------------------------------------
// Flat types: byte semantics.
// ---------------------------------------------------------------------------

TEST(HashFlatTypesTest, SmallXxhashFormsEqualTheGeneralOnes) {
  for (uint32_t v = 0; v < 256; ++v) {
    const uint8_t b = static_cast<uint8_t>(v);
    EXPECT_EQ(detail::Xxh32Of1(v), detail::Xxh32Bytes(&b, 1, 0));
    EXPECT_EQ(detail::Xxh64Of1(v), detail::Xxh64Bytes(&b, 1, 0));
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t v = static_cast<uint32_t>(rng() & 0xFFFF);
    const uint8_t b[2] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8)};
    EXPECT_EQ(detail::Xxh32Of2(v), detail::Xxh32Bytes(b, 2, 0));
    EXPECT_EQ(detail::Xxh64Of2(v), detail::Xxh64Bytes(b, 2, 0));
  }
}

TEST(HashFlatTypesTest, StringsHashLikeBinaryAtEveryOffsetWidth) {
  const std::vector<LValue> v = {Str("abc"), Str(""), Null(), Str("hello world, a longer one!")};
  std::vector<HashOutput> outs;
  for (ColumnType t : {ColumnType::kBinary, ColumnType::kString, ColumnType::kLargeBinary,
                       ColumnType::kLargeString}) {
    std::mt19937_64 rng(11);
    EncodeOptions plain;
    plain.dictionary_percent = 0;
    outs.push_back(MustHash({EncodeTop(T(t), v, rng, plain).View()}, HashBits::k64));
  }
  for (const HashOutput& o : outs) EXPECT_EQ(o, outs[0]);
  EXPECT_EQ(outs[0].hashes[0], 0x44bc2cf5ad770999ull);  // binary "abc", docs/hashing.md
}

TEST(HashFlatTypesTest, Float16IsCanonicalised) {
  const LType t = T(ColumnType::kFloat16);
  EXPECT_EQ(HashOne(t, Scalar<uint16_t>(0x8000)), HashOne(t, Scalar<uint16_t>(0x0000)));
  EXPECT_EQ(HashOne(t, Scalar<uint16_t>(0xFE01)), HashOne(t, Scalar<uint16_t>(0x7E00)));
  EXPECT_EQ(HashOne(t, Scalar<uint16_t>(0x7C01)), HashOne(t, Scalar<uint16_t>(0x7E00)));
  EXPECT_NE(HashOne(t, Scalar<uint16_t>(0x7C00)), HashOne(t, Scalar<uint16_t>(0x7E00)));  // inf
  EXPECT_EQ(HashOne(t, Scalar<uint16_t>(0x3C00)),
            HashOne(T(ColumnType::kUint16), Scalar<uint16_t>(0x3C00)));
}

TEST(HashFlatTypesTest, BoolHashesOneByte) {
  std::mt19937_64 rng(3);
  const OwnedTree b = EncodeTop(T(ColumnType::kBool), {Bool(true), Bool(false), Null()}, rng);
  const OwnedTree u =
      EncodeTop(T(ColumnType::kUint8), {Scalar<uint8_t>(1), Scalar<uint8_t>(0), Null()}, rng);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    EXPECT_EQ(MustHash({b.View()}, bits), MustHash({u.View()}, bits));
  }
}

// Pinned values of the new types (docs/hashing.md lists them): a change here is
// a breaking change of the hash.
TEST(HashFlatTypesTest, KnownAnswers) {
  struct Case {
    std::string name;
    LType type;
    LValue value;
    uint32_t h32;
    uint64_t h64;
  };
  const std::vector<Case> cases = {
      {"int8 -1", T(ColumnType::kInt8), Scalar<int8_t>(-1), 0x96bcd8ccu, 0x95634172a60b7544ull},
      {"bool true", T(ColumnType::kBool), Bool(true), 0x3892f731u, 0x8a4127811b21e730ull},
      {"int16 1", T(ColumnType::kInt16), Scalar<int16_t>(1), 0xd8c40016u, 0xdd8f621dbf7f57f1ull},
      {"float16 -0", T(ColumnType::kFloat16), Scalar<uint16_t>(0x8000), 0xb5aa6af5u,
       0x9aaba41ffa2da101ull},
      {"list<int32> []", ListOf(T(ColumnType::kInt32)), Seq({}), 0x165667b1u,
       0x27d4eb2f165667c5ull},
      {"list<int32> [1, 2]", ListOf(T(ColumnType::kInt32)),
       Seq({Scalar<int32_t>(1), Scalar<int32_t>(2)}), 0x929b4700u, 0xb2bf9b2ca9bf3346ull},
      {"list<int32> [null]", ListOf(T(ColumnType::kInt32)), Seq({Null()}), 0x318be77fu,
       0x70b58a56c65cf751ull},
      {"struct<int32, string> {1, \"x\"}",
       StructOf({T(ColumnType::kInt32), T(ColumnType::kString)}),
       Seq({Scalar<int32_t>(1), Str("x")}), 0x312371b9u, 0xdf65db6222acac39ull},
      {"map<string, int32> {\"a\": 1}", MapType(T(ColumnType::kString), T(ColumnType::kInt32)),
       MapOf({Str("a")}, {Scalar<int32_t>(1)}), 0x3da7a529u, 0xde0138617f1c613cull},
  };
  for (const Case& c : cases) {
    const auto h32 = HashOne<uint32_t>(c.type, c.value);
    const auto h64 = HashOne<uint64_t>(c.type, c.value);
    ASSERT_TRUE(h32 && h64) << c.name;
    EXPECT_EQ(*h32, c.h32) << c.name;
    EXPECT_EQ(*h64, c.h64) << c.name;
  }
}

// ---------------------------------------------------------------------------
// Validation of the new layouts: INVALID_ARGUMENT naming the path and sizes,
// never a read out of bounds.
// ---------------------------------------------------------------------------

absl::Status ValidateOnly(const std::vector<HashColumn>& columns) {
  testing::NodeBuffers b(columns, HashBits::k64);
  return detail::ValidateHashNode(b.node, "node 2 (hash)");
}

OwnedTree Int32Column(std::vector<int32_t> v) {
  OwnedTree c;
  c.type = ColumnType::kInt32;
  c.length = v.size();
  c.data.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(c.data.data(), v.data(), c.data.size());
  return c;
}

OwnedTree Wrap(ColumnType type, std::vector<OwnedTree> children, uint64_t length) {
  OwnedTree c;
  c.type = type;
  c.length = length;
  c.children = std::move(children);
  return c;
}

TEST(HashNestedValidationTest, DictionaryIndexOutOfRangeNamesThePath) {
  OwnedTree d;
  d.type = ColumnType::kDictionary;
  d.index_type = ColumnType::kUint8;
  d.data = {0, 1, 5};
  d.length = 3;
  d.children = {Int32Column({10, 20})};
  OwnedTree s = Wrap(ColumnType::kStruct, {Int32Column({1, 2, 3}), d}, 3);
  ExpectInvalid(ValidateOnly({s.View()}),
                {"node 2 (hash)", "columns[0].children[1] (dictionary)", "index 5 at row 2",
                 "columns[0].children[1].children[0] (2 rows)"});
  d.data[2] = 0xFF;  // as int8: -1
  d.index_type = ColumnType::kInt8;
  ExpectInvalid(ValidateOnly({d.View()}), {"column 0 (dictionary)", "index -1 at row 2"});
  d.validity = {0b011};  // a null row's index is never read
  EXPECT_TRUE(ValidateOnly({d.View()}).ok());
}

TEST(HashNestedValidationTest, UnsupportedDictionaryValuesAndIndexTypes) {
  OwnedTree d;
  d.type = ColumnType::kDictionary;
  d.index_type = ColumnType::kInt32;
  d.data.assign(4, 0);
  d.length = 1;
  d.children = {Wrap(ColumnType::kStruct, {Int32Column({1})}, 1)};
  ExpectInvalid(ValidateOnly({d.View()}),
                {"column 0 (dictionary)",
                 "dictionary values (columns[0].children[0]) of type struct", "not supported"});
  // Also below a supported type (Arrow's unsupported nested child).
  OwnedTree s = Wrap(ColumnType::kStruct, {d}, 1);
  ExpectInvalid(ValidateOnly({s.View()}), {"columns[0].children[0] (dictionary)", "not supported"});
  d.children = {Int32Column({1})};
  d.index_type = ColumnType::kFloat32;
  ExpectInvalid(ValidateOnly({d.View()}), {"index_type float32 is not an integer type"});
  d.index_type = ColumnType::kInt64;  // 8 bytes per index, 4 given
  ExpectInvalid(ValidateOnly({d.View()}), {"data has 4 bytes", "needs at least 8"});
}

TEST(HashNestedValidationTest, UnknownTypeInsideAStruct) {
  OwnedTree bad = Int32Column({1});
  bad.type = static_cast<ColumnType>(200);
  OwnedTree s = Wrap(ColumnType::kStruct, {Int32Column({1}), bad}, 1);
  ExpectInvalid(ValidateOnly({s.View()}), {"columns[0].children[1]", "unknown column type 200"});
}

TEST(HashNestedValidationTest, NestingDeeperThanTheLimit) {
  OwnedTree c = Int32Column({1});
  for (uint32_t d = 1; d < kMaxHashNestingDepth; ++d) c = Wrap(ColumnType::kStruct, {c}, 1);
  EXPECT_TRUE(ValidateOnly({c.View()}).ok());  // exactly the limit
  EXPECT_EQ(MustHash({c.View()}, HashBits::k64).rows, 1u);
  c = Wrap(ColumnType::kStruct, {c}, 1);
  ExpectInvalid(ValidateOnly({c.View()}), {"nesting is deeper than 64 levels"});
}

TEST(HashNestedValidationTest, ChildrenCountsAndStrayBuffers) {
  ExpectInvalid(ValidateOnly({Wrap(ColumnType::kList, {}, 0).View()}),
                {"column 0 (list)", "has 0 children, list takes 1"});
  ExpectInvalid(ValidateOnly({Wrap(ColumnType::kMap, {Int32Column({})}, 0).View()}),
                {"has 1 children, map takes 2"});
  OwnedTree leaf = Int32Column({1});
  leaf.children = {Int32Column({1})};
  ExpectInvalid(ValidateOnly({leaf.View()}), {"column 0 (int32)", "has 1 children, int32 takes 0"});
  OwnedTree s = Wrap(ColumnType::kStruct, {Int32Column({1})}, 1);
  s.data = {1};
  ExpectInvalid(ValidateOnly({s.View()}), {"column 0 (struct)", "data must be empty"});
  OwnedTree w = Int32Column({1});
  w.byte_width = 4;
  ExpectInvalid(ValidateOnly({w.View()}), {"byte_width is 4", "only fixed_size_binary"});
  OwnedTree l = Int32Column({1});
  l.large_offsets = {0, 1};
  ExpectInvalid(ValidateOnly({l.View()}), {"large_offsets must be empty"});
}

TEST(HashNestedValidationTest, StructFieldShorterThanTheStruct) {
  OwnedTree s = Wrap(ColumnType::kStruct, {Int32Column({1, 2, 3}), Int32Column({1, 2})}, 2);
  s.offset = 1;  // rows 1..2 need fields of 3 rows
  ExpectInvalid(ValidateOnly({s.View()}),
                {"column 0 (struct)", "field columns[0].children[1] has 2 rows", "at least 3"});
}

TEST(HashNestedValidationTest, ListOffsetsAreChecked) {
  OwnedTree l = Wrap(ColumnType::kList, {Int32Column({1, 2, 3})}, 2);
  l.offsets = {0, 2, 4};
  ExpectInvalid(ValidateOnly({l.View()}), {"column 0 (list)", "offsets[2] = 4",
                                           "past the end of columns[0].children[0] (3 rows)"});
  l.offsets = {0, 2, 1};
  ExpectInvalid(ValidateOnly({l.View()}), {"offsets decrease at row 1"});
  l.offsets = {-1, 2, 3};
  ExpectInvalid(ValidateOnly({l.View()}), {"offsets[0] is negative (-1)"});
  l.offsets = {0, 2};
  ExpectInvalid(ValidateOnly({l.View()}), {"offsets has 2 entries, needs at least 3"});
  OwnedTree ll = Wrap(ColumnType::kLargeList, {Int32Column({1, 2, 3})}, 1);
  ll.large_offsets = {0, 9};
  ExpectInvalid(ValidateOnly({ll.View()}), {"column 0 (large_list)", "large_offsets[1] = 9"});
  OwnedTree m = Wrap(ColumnType::kMap, {Int32Column({1, 2}), Int32Column({1})}, 1);
  m.offsets = {0, 2};  // the items have one row
  ExpectInvalid(ValidateOnly({m.View()}), {"column 0 (map)", "keys and items"});
  OwnedTree lb;
  lb.type = ColumnType::kLargeString;
  lb.data = {'a'};
  lb.large_offsets = {0, 2};
  lb.length = 1;
  ExpectInvalid(ValidateOnly({lb.View()}),
                {"large_offsets[1] = 2", "past the end of data (1 bytes)"});
}

// Arrow once read past a fixed-size list's missing child; here it is refused.
TEST(HashNestedValidationTest, FixedSizeListChildTooShort) {
  OwnedTree f = Wrap(ColumnType::kFixedSizeList, {Int32Column({})}, 1);
  f.byte_width = 8;
  f.validity = {0};  // even a null row's elements must exist
  ExpectInvalid(ValidateOnly({f.View()}),
                {"column 0 (fixed_size_list)", "has 0 rows", "list size 8"});
  f.byte_width = 0;  // size 0 needs no child rows
  EXPECT_TRUE(ValidateOnly({f.View()}).ok());
}

TEST(HashNestedValidationTest, FlatNewTypesNeedTheirBytes) {
  OwnedTree d;
  d.type = ColumnType::kDecimal128;
  d.data.assign(16, 0);
  d.length = 2;
  ExpectInvalid(ValidateOnly({d.View()}), {"column 0 (decimal128)", "data has 16 bytes", "32"});
  OwnedTree f;
  f.type = ColumnType::kFixedSizeBinary;
  f.byte_width = 3;
  f.data.assign(5, 0);
  f.length = 2;
  ExpectInvalid(ValidateOnly({f.View()}), {"column 0 (fixed_size_binary)", "needs at least 6"});
  OwnedTree b;
  b.type = ColumnType::kBool;
  b.data = {0xFF};
  b.length = 9;
  ExpectInvalid(ValidateOnly({b.View()}), {"column 0 (bool)", "data has 1 bytes", "at least 2"});
  f.byte_width = 0xFFFFFFFFu;
  f.offset = uint64_t{1} << 40;
  ExpectInvalid(ValidateOnly({f.View()}), {"overflows"});
}

// Buffer-less children cannot make a request arbitrarily expensive.
TEST(HashNestedValidationTest, ChildRowsAreBounded) {
  OwnedTree n;
  n.type = ColumnType::kNull;
  n.length = kMaxHashChildRows + 1;
  OwnedTree l = Wrap(ColumnType::kLargeList, {n}, 1);
  l.large_offsets = {0, static_cast<int64_t>(kMaxHashChildRows + 1)};
  ExpectInvalid(ValidateOnly({l.View()}), {"more than 2147483648 rows in all"});
}

// Random corruptions of valid trees (a length, an offset, a width, a buffer cut
// short, an offset or index entry, a type, a child dropped or added, anywhere in
// the tree): each is either refused with INVALID_ARGUMENT or hashes without
// reading out of bounds (run under ASan by the fuzz build; here it must not crash
// and a hash must equal its own slices).
testing::OwnedTree* RandomNode(testing::OwnedTree& t, std::mt19937_64& rng) {
  testing::OwnedTree* node = &t;
  while (!node->children.empty() && rng() % 3 != 0) {
    node = &node->children[rng() % node->children.size()];
  }
  return node;
}

void Corrupt(testing::OwnedTree& t, std::mt19937_64& rng) {
  testing::OwnedTree& n = *RandomNode(t, rng);
  auto shrink = [&](auto& v) {
    if (!v.empty()) v.resize(rng() % v.size());
  };
  switch (rng() % 12) {
    case 0:
      n.length += 1 + rng() % 3;
      break;
    case 1:
      n.offset += 1 + rng() % 9;
      break;
    case 2:
      n.byte_width = static_cast<uint32_t>(rng() % 5 == 0 ? rng() : rng() % 20);
      break;
    case 3:
      shrink(n.data);
      break;
    case 4:
      shrink(n.validity);
      break;
    case 5:
      if (!n.offsets.empty())
        n.offsets[rng() % n.offsets.size()] += static_cast<int32_t>(rng() % 7) - 3;
      if (!n.large_offsets.empty())
        n.large_offsets[rng() % n.large_offsets.size()] += static_cast<int64_t>(rng() % 7) - 3;
      break;
    case 6:
      shrink(n.offsets);
      shrink(n.large_offsets);
      break;
    case 7:
      if (!n.data.empty()) n.data[rng() % n.data.size()] = static_cast<uint8_t>(rng());
      break;
    case 8:
      n.type = static_cast<ColumnType>(rng() % 26);
      break;
    case 9:
      if (!n.children.empty()) n.children.pop_back();
      break;
    case 10:
      n.children.push_back(Int32Column({1, 2}));
      break;
    default:
      n.index_type = static_cast<ColumnType>(rng() % 26);
      break;
  }
}

TEST(HashNestedValidationTest, CorruptedTreesAreRefusedOrHashedSafely) {
  std::mt19937_64 rng(2210);
  int refused = 0, hashed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const LType t = testing::RandomType(rng, 3);
    const uint64_t rows = rng() % 20;
    std::vector<LValue> col;
    for (uint64_t r = 0; r < rows; ++r) col.push_back(testing::RandomValue(t, rng, 0.2));
    OwnedTree c = EncodeTop(t, col, rng);
    for (int k = 0, m = 1 + static_cast<int>(rng() % 3); k < m; ++k) Corrupt(c, rng);
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      auto out = HashOnHost({c.View()}, bits);
      if (!out.ok()) {
        ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
        ++refused;
        continue;
      }
      ++hashed;
      if (c.length > 1) {
        auto tail = HashOnHost({c.Slice(1, c.length - 1)}, bits);
        ASSERT_TRUE(tail.ok()) << tail.status();
        for (uint64_t r = 1; r < c.length; ++r) ASSERT_EQ(tail->hashes[r - 1], out->hashes[r]);
      }
    }
  }
  // Both outcomes occur often enough for the test to mean something.
  EXPECT_GT(refused, 1000);
  EXPECT_GT(hashed, 1000);
}

}  // namespace
}  // namespace gpujoin::engine
