// Hash operation on the host: the algorithm's known answers, Arrow's null
// contract, float canonicalisation, slice and chunking properties, hash quality
// and input validation. The CUDA side is checked against the same answers in
// hash_device_test.cpp.
#include "hashing/hash_host.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "expect_known_answers.hpp"
#include "hash_test_util.hpp"
#include "hashing/row_hash.hpp"
#include "known_answers.hpp"

namespace gpujoin::engine {
namespace {

using ::gpujoin::engine::testing::BinaryColumn;
using ::gpujoin::engine::testing::ExpectInvalid;
using ::gpujoin::engine::testing::FixedColumn;
using ::gpujoin::engine::testing::HashOnHost;
using ::gpujoin::engine::testing::HashOutput;
using ::gpujoin::engine::testing::kAllTypes;
using ::gpujoin::engine::testing::MustHash;
using ::gpujoin::engine::testing::OwnedColumn;
using ::gpujoin::engine::testing::RandomColumn;
using ::gpujoin::engine::testing::Views;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Algorithm: xxHash reference vectors and checked-in known answers.
// ---------------------------------------------------------------------------

// The published XXH32/XXH64 (seed 0) test vectors: a single binary column hashes
// exactly as xxHash of its bytes, which pins the byte hash to the specification
// (including XXH64's 32-byte and XXH32's 16-byte stripe loops).
TEST(HashAlgorithmTest, SingleBinaryColumnIsXxHashOfTheBytes) {
  const OwnedColumn c = BinaryColumn({"", "a", "abc", "Nobody inspects the spammish repetition"});
  const HashOutput h32 = MustHash({c.View()}, HashBits::k32);
  const HashOutput h64 = MustHash({c.View()}, HashBits::k64);
  EXPECT_THAT(h32.hashes,
              ::testing::ElementsAre(0x02CC5D05u, 0x550D7456u, 0x32D153FFu, 0xE2293B2Fu));
  EXPECT_THAT(h64.hashes, ::testing::ElementsAre(0xEF46DB3751D8E999ull, 0xD24EC4F1A98C6E5Bull,
                                                 0x44BC2CF5AD770999ull, 0xFBCEA83C8A378BF1ull));
}

// The fixed-width fast paths must equal the general byte hash of the value's
// little-endian bytes, for every length class around them.
TEST(HashAlgorithmTest, FixedWidthFastPathsEqualTheByteHash) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = rng();
    const uint32_t v32 = static_cast<uint32_t>(v);
    uint8_t bytes[8];
    std::memcpy(bytes, &v, 8);
    ASSERT_EQ(detail::Xxh32Of4(v32), detail::Xxh32Bytes(bytes, 4, 0));
    ASSERT_EQ(detail::Xxh32Of8(v), detail::Xxh32Bytes(bytes, 8, 0));
    ASSERT_EQ(detail::Xxh64Of4(v32), detail::Xxh64Bytes(bytes, 4, 0));
    ASSERT_EQ(detail::Xxh64Of8(v), detail::Xxh64Bytes(bytes, 8, 0));
  }
}

// Every checked-in known answer (known_answers.hpp, cross-checked against
// libxxhash when they were computed) is reproduced on the host.
TEST(HashAlgorithmTest, KnownAnswers) { testing::ExpectKnownAnswers(HashOnHost); }

// Single 4-byte columns hash bijectively in both widths, and 8-byte columns in
// hash64: distinct values never collide (documented in docs/hashing.md).
TEST(HashAlgorithmTest, SingleWordColumnsAreCollisionFree) {
  std::vector<uint32_t> v32(1 << 20);
  std::vector<uint64_t> v64(1 << 20);
  for (uint32_t i = 0; i < v32.size(); ++i) {
    v32[i] = i * 2654435761u;  // distinct (odd multiplier), spread over the word
    v64[i] = uint64_t{i} << 40 | i;
  }
  const OwnedColumn c32 = FixedColumn<uint32_t>(ColumnType::kUint32, v32);
  const OwnedColumn c64 = FixedColumn<uint64_t>(ColumnType::kUint64, v64);
  for (const auto& [column, bits] : {std::pair{&c32, HashBits::k32}, std::pair{&c32, HashBits::k64},
                                     std::pair{&c64, HashBits::k64}}) {
    HashOutput out = MustHash({column->View()}, bits);
    std::sort(out.hashes.begin(), out.hashes.end());
    EXPECT_EQ(std::adjacent_find(out.hashes.begin(), out.hashes.end()), out.hashes.end());
  }
}

// Column order matters and a composite differs from each of its columns.
TEST(HashAlgorithmTest, CompositeIsOrderSensitive) {
  const OwnedColumn a = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{1, 2});
  const OwnedColumn b = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{2, 1});
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    const HashOutput ab = MustHash({a.View(), b.View()}, bits);
    const HashOutput ba = MustHash({b.View(), a.View()}, bits);
    const HashOutput only_a = MustHash({a.View()}, bits);
    EXPECT_NE(ab.hashes[0], ab.hashes[1]);  // (1,2) vs (2,1)
    EXPECT_EQ(ab.hashes[0], ba.hashes[1]);  // same logical row (1,2)
    EXPECT_NE(ab.hashes[0], only_a.hashes[0]);
  }
}

// ---------------------------------------------------------------------------
// Null contract.
// ---------------------------------------------------------------------------

class HashNullTest : public ::testing::TestWithParam<HashBits> {};

TEST_P(HashNullTest, AllNullRowsAreNullWithHashZero) {
  const OwnedColumn c = FixedColumn<int64_t>(
      ColumnType::kInt64, std::vector<std::optional<int64_t>>(13, std::nullopt), 0, 77);
  const HashOutput out = MustHash({c.View()}, GetParam());
  ASSERT_EQ(out.validity.size(), 2u);
  EXPECT_EQ(out.validity[0], 0);
  EXPECT_EQ(out.validity[1], 0);  // including the 3 unused high bits
  EXPECT_THAT(out.hashes, ::testing::Each(0u));
}

TEST_P(HashNullTest, NoNullsAndAllSetBitmapAgree) {
  const std::vector<uint32_t> values = {5, 0, 9, 0xFFFFFFFFu, 3, 3, 1, 2, 8, 0};
  OwnedColumn without = FixedColumn<uint32_t>(ColumnType::kUint32, values);
  OwnedColumn with = without;
  with.validity = {0xFF, 0xFF};
  const HashOutput a = MustHash({without.View()}, GetParam());
  const HashOutput b = MustHash({with.View()}, GetParam());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.validity, (std::vector<uint8_t>{0xFF, 0x03}));  // 10 rows, unused bits 0
}

// A valid row whose hash happens to be 0 is still valid: nullness lives only in
// the bitmap. No small input hashes to 0, so the check is on the bitmap.
TEST_P(HashNullTest, ValidZeroValueIsNotNull) {
  const OwnedColumn c = FixedColumn<uint64_t>(
      ColumnType::kUint64, std::vector<std::optional<uint64_t>>{0, std::nullopt});
  const HashOutput out = MustHash({c.View()}, GetParam());
  EXPECT_TRUE(out.Valid(0));
  EXPECT_FALSE(out.Valid(1));
  EXPECT_NE(out.hashes[0], 0u);
  EXPECT_EQ(out.hashes[1], 0u);
}

// Bit offsets that are not a multiple of 8: the physical bitmap starts 3 rows
// earlier, and row r's validity is bit 3 + r.
TEST_P(HashNullTest, NullsAtUnalignedBitOffsets) {
  std::vector<std::optional<uint32_t>> values;
  for (uint32_t i = 0; i < 21; ++i) {
    values.push_back(i % 3 == 1 ? std::nullopt : std::optional<uint32_t>(i));
  }
  const OwnedColumn c = FixedColumn<uint32_t>(ColumnType::kUint32, values, /*lead=*/3);
  const HashOutput out = MustHash({c.View()}, GetParam());
  for (uint32_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(out.Valid(i), values[i].has_value()) << i;
    if (values[i]) {
      const OwnedColumn single =
          FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{*values[i]});
      EXPECT_EQ(out.hashes[i], MustHash({single.View()}, GetParam()).hashes[0]) << i;
    } else {
      EXPECT_EQ(out.hashes[i], 0u) << i;
    }
  }
}

// A null in the second column nullifies the composite row, however the first
// column's value looks; it must not fall back to the first column's hash.
TEST_P(HashNullTest, CompositeNullInSecondColumn) {
  const OwnedColumn a = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{7, 7, 7});
  const OwnedColumn b = BinaryColumn({"k", std::nullopt, ""});
  const HashOutput out = MustHash({a.View(), b.View()}, GetParam());
  EXPECT_TRUE(out.Valid(0));
  EXPECT_FALSE(out.Valid(1));
  EXPECT_TRUE(out.Valid(2));
  EXPECT_EQ(out.hashes[1], 0u);
  EXPECT_NE(out.hashes[0], out.hashes[2]);
}

// A valid empty string is a value ("" hashes as xxHash of zero bytes); a null
// string is null, even when its slot spans bytes.
TEST_P(HashNullTest, EmptyStringIsNotNull) {
  const OwnedColumn c = BinaryColumn({"", std::nullopt, ""}, /*null_filler=*/"junk");
  const HashOutput out = MustHash({c.View()}, GetParam());
  EXPECT_TRUE(out.Valid(0));
  EXPECT_FALSE(out.Valid(1));
  EXPECT_TRUE(out.Valid(2));
  EXPECT_EQ(out.hashes[0], out.hashes[2]);
  EXPECT_EQ(out.hashes[0], GetParam() == HashBits::k32 ? 0x02CC5D05ull : 0xEF46DB3751D8E999ull);
  EXPECT_EQ(out.hashes[1], 0u);
}

// Only empty strings: the data buffer may be empty (no allocation at all).
TEST_P(HashNullTest, EmptyStringsWithoutDataBuffer) {
  const OwnedColumn c = BinaryColumn({"", "", std::nullopt});
  ASSERT_TRUE(c.data.empty());
  const HashOutput out = MustHash({c.View()}, GetParam());
  const uint64_t empty = GetParam() == HashBits::k32 ? 0x02CC5D05ull : 0xEF46DB3751D8E999ull;
  EXPECT_THAT(out.hashes, ::testing::ElementsAre(empty, empty, 0u));
  EXPECT_EQ(out.validity, std::vector<uint8_t>{0x03});
}

// The value bytes under a null slot are never read: changing them changes nothing.
TEST_P(HashNullTest, NullSlotContentIsIgnored) {
  const std::vector<std::optional<double>> values = {1.0, std::nullopt, 2.0};
  const OwnedColumn a = FixedColumn<double>(ColumnType::kFloat64, values, 0, 0.0);
  const OwnedColumn b = FixedColumn<double>(ColumnType::kFloat64, values, 0, 123.5);
  EXPECT_EQ(MustHash({a.View()}, GetParam()), MustHash({b.View()}, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Bits, HashNullTest, ::testing::Values(HashBits::k32, HashBits::k64),
                         [](const auto& info) {
                           return info.param == HashBits::k32 ? "Hash32" : "Hash64";
                         });

// ---------------------------------------------------------------------------
// Floats.
// ---------------------------------------------------------------------------

TEST(HashFloatTest, SignedZerosAndNanPayloadsCanonicalise) {
  const std::vector<float> f32 = {0.0f,
                                  -0.0f,
                                  std::numeric_limits<float>::quiet_NaN(),
                                  -std::numeric_limits<float>::quiet_NaN(),
                                  std::bit_cast<float>(0x7F800001u),  // signalling NaN
                                  std::bit_cast<float>(0xFFFFFFFFu),
                                  1.0f,
                                  -1.0f};
  std::vector<double> f64;
  for (float f : f32) f64.push_back(static_cast<double>(f));
  f64[4] = std::bit_cast<double>(0x7FF0000000000001ull);
  f64[5] = std::bit_cast<double>(0xFFFFFFFFFFFFFFFFull);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    const HashOutput h32 = MustHash({FixedColumn<float>(ColumnType::kFloat32, f32).View()}, bits);
    const HashOutput h64 = MustHash({FixedColumn<double>(ColumnType::kFloat64, f64).View()}, bits);
    for (const HashOutput* h : {&h32, &h64}) {
      EXPECT_EQ(h->hashes[0], h->hashes[1]);  // +0 == -0
      EXPECT_EQ(h->hashes[2], h->hashes[3]);  // every NaN is one NaN
      EXPECT_EQ(h->hashes[2], h->hashes[4]);
      EXPECT_EQ(h->hashes[2], h->hashes[5]);
      EXPECT_NE(h->hashes[0], h->hashes[2]);
      EXPECT_NE(h->hashes[6], h->hashes[7]);  // other signs still matter
    }
    // Canonical values hash as their bit patterns: +0.0f as uint32 0.
    const HashOutput zero_bits = MustHash(
        {FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{0}).View()}, bits);
    EXPECT_EQ(h32.hashes[1], zero_bits.hashes[0]);
  }
}

// ---------------------------------------------------------------------------
// Slice and chunking properties on random data.
// ---------------------------------------------------------------------------

// Hashing rows [first, first + n) of a column (via its offset) equals rows
// [first, first + n) of hashing the whole column, validity bits included.
TEST(HashPropertyTest, SliceOfHashEqualsHashOfSlice) {
  std::mt19937_64 rng(11);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    for (ColumnType type : kAllTypes) {
      const uint64_t rows = 300;
      const OwnedColumn a = RandomColumn(type, rows, 0.2, /*lead=*/5, rng);
      const OwnedColumn b = RandomColumn(ColumnType::kUint64, rows, 0.1, /*lead=*/0, rng);
      const HashOutput whole = MustHash({a.View(), b.View()}, bits);
      for (int trial = 0; trial < 20; ++trial) {
        const uint64_t first = rng() % rows;
        const uint64_t n = rng() % (rows - first + 1);
        const HashOutput part = MustHash({a.Slice(first, n), b.Slice(first, n)}, bits);
        ASSERT_EQ(part.rows, n);
        for (uint64_t r = 0; r < n; ++r) {
          ASSERT_EQ(part.Valid(r), whole.Valid(first + r)) << first << "+" << r;
          ASSERT_EQ(part.hashes[r], whole.hashes[first + r]) << first << "+" << r;
        }
      }
    }
  }
}

// Hashing a column in consecutive chunks of random sizes and concatenating the
// results equals hashing it at once.
TEST(HashPropertyTest, ChunkedHashEqualsWholeHash) {
  std::mt19937_64 rng(12);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    const uint64_t rows = 2000;
    std::vector<OwnedColumn> columns;
    for (ColumnType type : kAllTypes) columns.push_back(RandomColumn(type, rows, 0.05, 3, rng));
    const HashOutput whole = MustHash(Views(columns), bits);
    std::vector<uint64_t> hashes;
    std::vector<bool> valid;
    for (uint64_t first = 0; first < rows;) {
      const uint64_t n = std::min<uint64_t>(rows - first, rng() % 97);
      std::vector<HashColumn> chunk;
      for (const auto& c : columns) chunk.push_back(c.Slice(first, n));
      const HashOutput part = MustHash(chunk, bits);
      for (uint64_t r = 0; r < n; ++r) {
        hashes.push_back(part.hashes[r]);
        valid.push_back(part.Valid(r));
      }
      first += n;
    }
    ASSERT_EQ(hashes, whole.hashes);
    for (uint64_t r = 0; r < rows; ++r) ASSERT_EQ(valid[r], whole.Valid(r)) << r;
  }
}

// The range entry point (for multi-threaded backends) writes exactly what the
// whole-node call writes, for ranges starting on validity-byte boundaries.
TEST(HashPropertyTest, RowRangesEqualWholeNode) {
  std::mt19937_64 rng(13);
  const uint64_t rows = 1001;
  const OwnedColumn a = RandomColumn(ColumnType::kInt32, rows, 0.1, 6, rng);
  const OwnedColumn s = RandomColumn(ColumnType::kBinary, rows, 0.1, 1, rng);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    testing::NodeBuffers whole({a.View(), s.View()}, bits);
    detail::HashRowsHost(whole.node);
    testing::NodeBuffers ranged({a.View(), s.View()}, bits);
    for (uint64_t first = 0; first < rows; first += 96) {
      detail::HashRowsHost(ranged.node, first, std::min<uint64_t>(96, rows - first));
    }
    EXPECT_EQ(ranged.Output(), whole.Output());
  }
}

// ---------------------------------------------------------------------------
// Quality.
// ---------------------------------------------------------------------------

// Number of colliding pairs in `hashes` (a value seen k times contributes k(k-1)/2).
uint64_t CollidingPairs(std::vector<uint64_t> hashes) {
  std::sort(hashes.begin(), hashes.end());
  uint64_t pairs = 0;
  for (size_t i = 0, j; i < hashes.size(); i = j) {
    for (j = i + 1; j < hashes.size() && hashes[j] == hashes[i]; ++j) {
    }
    pairs += (j - i) * (j - i - 1) / 2;
  }
  return pairs;
}

// Unique composite keys (tenant, object) over a 2048 x 2048 grid: 4M rows, no
// 64-bit collision (expected 4.7e-7 pairs for an ideal hash).
TEST(HashQualityTest, UniqueCompositeKeysHaveUnique64BitHashes) {
  const uint32_t side = 2048;
  std::vector<uint32_t> tenant(uint64_t{side} * side);
  std::vector<int64_t> object(tenant.size());
  for (uint64_t i = 0; i < tenant.size(); ++i) {
    tenant[i] = static_cast<uint32_t>(i / side);
    object[i] = static_cast<int64_t>(i % side);
  }
  const OwnedColumn a = FixedColumn<uint32_t>(ColumnType::kUint32, tenant);
  const OwnedColumn b = FixedColumn<int64_t>(ColumnType::kInt64, object);
  EXPECT_EQ(CollidingPairs(MustHash({a.View(), b.View()}, HashBits::k64).hashes), 0u);
}

// 2M distinct strings ("key-<i>"): no 64-bit collision.
TEST(HashQualityTest, UniqueStringsHaveUnique64BitHashes) {
  std::vector<std::optional<std::string>> keys;
  for (uint32_t i = 0; i < (2u << 20); ++i) keys.push_back("key-" + std::to_string(i));
  EXPECT_EQ(CollidingPairs(MustHash({BinaryColumn(keys).View()}, HashBits::k64).hashes), 0u);
}

// hash32 of n distinct random keys wider than 32 bits must collide like a random
// function: expected pairs n(n-1)/2^33 (~128 for n = 2^20), Poisson sd ~11.3.
// The inputs come from a fixed seed, so the count is deterministic; the band is
// 5 sd. Structured inputs (sequences, common prefixes) must do no worse: xxHash32
// keeps much of their structure apart and collides less than a random function
// there (0 to ~130 pairs measured), so they get only the upper bound.
TEST(HashQualityTest, Hash32CollisionsMatchTheBirthdayBound) {
  const uint64_t n = 1u << 20;
  const double expected = static_cast<double>(n) * (n - 1) / 2 / 4294967296.0;
  const double band = 5 * std::sqrt(expected);
  std::mt19937_64 rng(2024);
  std::vector<uint64_t> random_wide(n), sequence_wide(n);
  std::vector<std::optional<std::string>> random_strings, prefixed_strings;
  std::vector<uint32_t> random_a(n), random_b(n), grid_hi(n), grid_lo(n);
  for (uint64_t i = 0; i < n; ++i) {
    random_wide[i] = rng();
    sequence_wide[i] = (i << 32) | (i * 7);
    std::string s(1 + rng() % 24, '\0');
    for (char& ch : s) ch = static_cast<char>(rng());
    random_strings.push_back(s + std::to_string(i));  // the suffix makes them distinct
    prefixed_strings.push_back("customer-" + std::to_string(i));
    random_a[i] = static_cast<uint32_t>(rng());
    random_b[i] = static_cast<uint32_t>(i);  // (random, i) pairs are distinct
    grid_hi[i] = static_cast<uint32_t>(i >> 10);
    grid_lo[i] = static_cast<uint32_t>(i & 1023);
  }
  std::sort(random_wide.begin(), random_wide.end());
  ASSERT_EQ(std::adjacent_find(random_wide.begin(), random_wide.end()), random_wide.end());
  struct Input {
    std::string name;
    std::vector<OwnedColumn> columns;
    bool random;
  };
  const std::vector<Input> inputs = {
      {"random uint64", {FixedColumn<uint64_t>(ColumnType::kUint64, random_wide)}, true},
      {"random binary", {BinaryColumn(random_strings)}, true},
      {"(random uint32, uint32)",
       {FixedColumn<uint32_t>(ColumnType::kUint32, random_a),
        FixedColumn<uint32_t>(ColumnType::kUint32, random_b)},
       true},
      {"uint64 sequence", {FixedColumn<uint64_t>(ColumnType::kUint64, sequence_wide)}, false},
      {"prefixed strings", {BinaryColumn(prefixed_strings)}, false},
      {"uint32 x uint32 grid",
       {FixedColumn<uint32_t>(ColumnType::kUint32, grid_hi),
        FixedColumn<uint32_t>(ColumnType::kUint32, grid_lo)},
       false},
  };
  for (const auto& input : inputs) {
    const uint64_t pairs = CollidingPairs(MustHash(Views(input.columns), HashBits::k32).hashes);
    if (input.random) {
      EXPECT_NEAR(static_cast<double>(pairs), expected, band) << input.name;
    } else {
      EXPECT_LE(static_cast<double>(pairs), expected + band) << input.name;
    }
  }
}

// Flipping one input bit flips about half of the output bits (avalanche), for
// both widths, on the byte path and the fixed-width path.
TEST(HashQualityTest, SingleBitFlipsAvalanche) {
  std::mt19937_64 rng(5);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    const int width = bits == HashBits::k32 ? 32 : 64;
    uint64_t flipped = 0, trials = 0;
    for (int t = 0; t < 2000; ++t) {
      const uint64_t v = rng();
      const int bit = static_cast<int>(rng() % 64);
      const OwnedColumn c = FixedColumn<uint64_t>(
          ColumnType::kUint64, std::vector<uint64_t>{v, v ^ (uint64_t{1} << bit)});
      const HashOutput out = MustHash({c.View()}, bits);
      flipped += std::popcount(out.hashes[0] ^ out.hashes[1]);
      trials += width;
    }
    const double fraction = static_cast<double>(flipped) / trials;
    EXPECT_NEAR(fraction, 0.5, 0.01) << width;
  }
}

// ---------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------

absl::Status ValidateOnly(const std::vector<HashColumn>& columns, HashBits bits) {
  testing::NodeBuffers b(columns, bits);
  return detail::ValidateHashNode(b.node, "node 3 (hash)");
}

TEST(HashValidationTest, ZeroRowsAreValid) {
  const OwnedColumn c = BinaryColumn({});
  EXPECT_TRUE(ValidateOnly({c.View()}, HashBits::k64).ok());
  OwnedColumn bare;  // no offsets at all: fine for zero rows
  bare.type = ColumnType::kBinary;
  EXPECT_TRUE(ValidateOnly({bare.View()}, HashBits::k32).ok());
  EXPECT_TRUE(MustHash({bare.View()}, HashBits::k32).hashes.empty());
}

TEST(HashValidationTest, NoColumns) {
  ExpectInvalid(ValidateOnly({}, HashBits::k64), {"node 3 (hash)", "at least one column"});
}

TEST(HashValidationTest, MismatchedLengths) {
  const OwnedColumn a = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{1, 2, 3});
  const OwnedColumn b = BinaryColumn({"x", "y"});
  ExpectInvalid(ValidateOnly({a.View(), b.View()}, HashBits::k64),
                {"node 3 (hash)", "column 1 (binary)", "2 rows", "column 0 has 3"});
}

TEST(HashValidationTest, FixedWidthDataTooShort) {
  OwnedColumn c = FixedColumn<int64_t>(ColumnType::kInt64, std::vector<int64_t>{1, 2, 3});
  c.offset = 1;  // rows 1..3 need 32 bytes, there are 24
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64),
                {"column 0 (int64)", "data has 24 bytes", "at least 32"});
}

TEST(HashValidationTest, FixedWidthWithOffsets) {
  OwnedColumn c = FixedColumn<float>(ColumnType::kFloat32, std::vector<float>{1.0f});
  c.offsets = {0, 4};
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64),
                {"column 0 (float32)", "offsets must be empty"});
}

TEST(HashValidationTest, BinaryOffsetsTooShort) {
  OwnedColumn c = BinaryColumn({"ab", "c"});
  c.offsets.pop_back();
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64),
                {"column 0 (binary)", "offsets has 2 entries", "at least 3"});
}

TEST(HashValidationTest, BinaryOffsetsDecreasing) {
  const OwnedColumn a = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{1, 2, 3});
  OwnedColumn b = BinaryColumn({"ab", "c", "de"});  // offsets 0 2 3 5
  b.offsets[2] = 1;
  ExpectInvalid(ValidateOnly({a.View(), b.View()}, HashBits::k32),
                {"column 1 (binary)", "offsets decrease at row 1", "offsets[2] = 1"});
}

TEST(HashValidationTest, BinaryOffsetsPastData) {
  OwnedColumn c = BinaryColumn({"ab", "c"});
  c.offsets.back() = 9;
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64),
                {"column 0 (binary)", "offsets[2] = 9", "past the end of data (3 bytes)"});
}

TEST(HashValidationTest, BinaryNegativeOffset) {
  OwnedColumn c = BinaryColumn({"ab", "c"});
  c.offsets[0] = -1;
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64), {"column 0 (binary)", "negative (-1)"});
}

// Offsets outside the addressed rows are not read and need not be valid.
TEST(HashValidationTest, OffsetsOutsideTheSliceAreNotChecked) {
  OwnedColumn c = BinaryColumn({"ab", "c", "de"});
  c.offsets[0] = 100;  // row 0 is outside rows [1, 3)
  EXPECT_TRUE(ValidateOnly({c.Slice(1, 2)}, HashBits::k64).ok());
}

TEST(HashValidationTest, ValidityTooShort) {
  OwnedColumn c = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>(9, 1));
  c.validity = {0xFF};  // 9 rows need 2 bytes
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64),
                {"column 0 (uint32)", "validity has 1 bytes", "at least 2"});
}

TEST(HashValidationTest, OutputsMissingOrMisSized) {
  const OwnedColumn c = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{1, 2});
  testing::NodeBuffers b({c.View()}, HashBits::k64);
  b.node.out64 = b.node.out64.subspan(0, 1);
  ExpectInvalid(detail::ValidateHashNode(b.node, "hash"), {"out64 has 1 elements", "(2)"});
  b.node.bits = HashBits::k32;  // out32 was never provided
  ExpectInvalid(detail::ValidateHashNode(b.node, "hash"), {"out32 has 0 elements"});
  testing::NodeBuffers v({c.View()}, HashBits::k64);
  v.node.out_validity = {};
  ExpectInvalid(detail::ValidateHashNode(v.node, "hash"), {"out_validity has 0 bytes", "= 1"});
}

TEST(HashValidationTest, OffsetOverflowIsRejected) {
  OwnedColumn c = FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{1});
  c.offset = std::numeric_limits<uint64_t>::max();
  ExpectInvalid(ValidateOnly({c.View()}, HashBits::k64), {"column 0 (uint32)", "exceeds"});
}

}  // namespace
}  // namespace gpujoin::engine
