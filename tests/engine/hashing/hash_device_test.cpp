// Hash operation on the CUDA device (label "gpu"): the device must reproduce the
// checked-in known answers and the host's bits exactly on every shape (types,
// composites, slices at odd bit offsets, nulls, long strings, millions of rows).
// Skips visibly when the build has no CUDA backend or no device is present.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "expect_known_answers.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/testing/require_gpu.hpp"
#include "hash_test_util.hpp"
#include "known_answers.hpp"
#include "nested_test_util.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/hash/hash_device.hpp"
#endif

namespace gpujoin::engine {
namespace {

using ::gpujoin::engine::testing::HashOnHost;
using ::gpujoin::engine::testing::HashOutput;
using ::gpujoin::engine::testing::kAllTypes;
using ::gpujoin::engine::testing::NodeBuffers;
using ::gpujoin::engine::testing::OwnedColumn;
using ::gpujoin::engine::testing::RandomColumn;
using ::gpujoin::engine::testing::Views;

class HashDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(GPUJOIN_HAVE_CUDA)
    return ::gpujoin::testing::SkipOrFailWithoutGpu(
        "this build has no CUDA backend (configured without nvcc)");
#else
    if (!CudaDeviceAvailable()) {
      return ::gpujoin::testing::SkipOrFailWithoutGpu("no CUDA device is visible");
    }
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
#endif
  }
  void TearDown() override {
#if defined(GPUJOIN_HAVE_CUDA)
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
#endif
  }

  // Validates on the host (as every backend does) and hashes on the device in
  // passes of `rows_per_pass` rows.
  absl::StatusOr<HashOutput> HashOnDevice(const std::vector<HashColumn>& columns, HashBits bits,
                                          uint64_t rows_per_pass = uint64_t{1} << 24) {
    NodeBuffers b(columns, bits);
    GPUJOIN_RETURN_IF_ERROR(detail::ValidateHashNode(b.node, "hash"));
#if defined(GPUJOIN_HAVE_CUDA)
    GPUJOIN_RETURN_IF_ERROR(detail::HashRowsDevice(b.node, stream_, rows_per_pass));
#else
    (void)rows_per_pass;
#endif
    return b.Output();
  }

  // Device output equals host output bit for bit (hashes and validity bytes,
  // including the unused high bits of the last validity byte).
  void ExpectSameAsHost(const std::vector<HashColumn>& columns, HashBits bits,
                        const std::string& what, uint64_t rows_per_pass = uint64_t{1} << 24) {
    SCOPED_TRACE(what + (bits == HashBits::k32 ? " hash32" : " hash64"));
    auto host = HashOnHost(columns, bits);
    auto device = HashOnDevice(columns, bits, rows_per_pass);
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_TRUE(device.ok()) << device.status();
    ASSERT_EQ(device->rows, host->rows);
    ASSERT_EQ(device->validity, host->validity);
    for (uint64_t r = 0; r < host->rows; ++r) {
      ASSERT_EQ(device->hashes[r], host->hashes[r]) << "row " << r;
    }
  }

#if defined(GPUJOIN_HAVE_CUDA)
  cudaStream_t stream_ = nullptr;
#endif
};

TEST_F(HashDeviceTest, KnownAnswers) {
  testing::ExpectKnownAnswers([this](const std::vector<HashColumn>& columns, HashBits bits) {
    return HashOnDevice(columns, bits);
  });
}

TEST_F(HashDeviceTest, ZeroRows) {
  std::mt19937_64 rng(20);
  const OwnedColumn c = RandomColumn(ColumnType::kBinary, 0, 0.0, 0, rng);
  auto out = HashOnDevice({c.View()}, HashBits::k64);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->hashes.empty());
  EXPECT_TRUE(out->validity.empty());
}

// Only empty strings: the device gets no data buffer at all.
TEST_F(HashDeviceTest, EmptyStringsWithoutDataBuffer) {
  const OwnedColumn c = testing::BinaryColumn({"", std::nullopt, "", ""});
  for (HashBits bits : {HashBits::k32, HashBits::k64}) ExpectSameAsHost({c.View()}, bits, "empty");
}

// Every type alone, at row counts around the warp and validity-byte boundaries,
// with physical offsets that are and are not multiples of 8, without nulls, with
// some and with all rows null.
TEST_F(HashDeviceTest, EveryTypeMatchesHost) {
  std::mt19937_64 rng(21);
  for (ColumnType type : kAllTypes) {
    for (uint64_t rows : {1u, 7u, 31u, 32u, 33u, 257u, 4099u}) {
      for (uint64_t lead : {0u, 3u, 8u, 13u}) {
        for (double nulls : {0.0, 0.3, 1.0}) {
          const OwnedColumn c = RandomColumn(type, rows, nulls, lead, rng);
          for (HashBits bits : {HashBits::k32, HashBits::k64}) {
            ExpectSameAsHost({c.View()}, bits,
                             "type " + std::to_string(static_cast<int>(type)) + " rows " +
                                 std::to_string(rows) + " lead " + std::to_string(lead) +
                                 " nulls " + std::to_string(nulls));
          }
        }
      }
    }
  }
}

// All seven types in one composite key, each column at its own physical offset,
// sliced at random positions.
TEST_F(HashDeviceTest, CompositeSlicesMatchHost) {
  std::mt19937_64 rng(22);
  const uint64_t rows = 20000;
  std::vector<OwnedColumn> columns;
  uint64_t lead = 0;
  for (ColumnType type : kAllTypes) columns.push_back(RandomColumn(type, rows, 0.02, lead++, rng));
  for (int trial = 0; trial < 6; ++trial) {
    const uint64_t first = rng() % rows;
    const uint64_t n = rng() % (rows - first + 1);
    std::vector<HashColumn> slice;
    for (const auto& c : columns) slice.push_back(c.Slice(first, n));
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      ExpectSameAsHost(slice, bits, "slice " + std::to_string(first) + "+" + std::to_string(n));
    }
  }
}

// Strings far longer than a stripe (up to 5000 bytes) exercise the stripe loops.
TEST_F(HashDeviceTest, LongStringsMatchHost) {
  std::mt19937_64 rng(23);
  const OwnedColumn c = RandomColumn(ColumnType::kBinary, 3000, 0.1, 5, rng, /*max_len=*/5000);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) ExpectSameAsHost({c.View()}, bits, "long");
}

// Several device passes (the chunking property on the device): pass sizes that
// are and are not multiples of 32 (rounded down to one), and a single-row tail.
TEST_F(HashDeviceTest, PassesMatchHost) {
  std::mt19937_64 rng(25);
  const uint64_t rows = 10'017;
  const OwnedColumn a = RandomColumn(ColumnType::kFloat64, rows, 0.2, 5, rng);
  const OwnedColumn s = RandomColumn(ColumnType::kBinary, rows, 0.2, 11, rng);
  for (uint64_t pass : {1u, 32u, 33u, 1000u, 10'016u}) {
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      ExpectSameAsHost({a.View(), s.View()}, bits, "pass " + std::to_string(pass), pass);
    }
  }
}

// Millions of rows: more rows than the grid covers in one pass (grid-stride loop).
TEST_F(HashDeviceTest, MillionsOfRowsMatchHost) {
  std::mt19937_64 rng(24);
  const uint64_t rows = 3'000'001;
  const OwnedColumn a = RandomColumn(ColumnType::kUint32, rows, 0.01, 0, rng);
  const OwnedColumn b = RandomColumn(ColumnType::kInt64, rows, 0.0, 0, rng);
  const OwnedColumn s = RandomColumn(ColumnType::kBinary, rows, 0.01, 3, rng, /*max_len=*/12);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    ExpectSameAsHost({a.View(), b.View(), s.View()}, bits, "3M rows");
  }
}

#if defined(GPUJOIN_HAVE_CUDA)
// A device copy of `bytes` in a buffer rounded up to 8 bytes (LaunchHashRows'
// requirement), freed with the object.
class DeviceCopy {
 public:
  explicit DeviceCopy(const void* src, size_t bytes) {
    if (bytes == 0) return;
    EXPECT_EQ(cudaMalloc(&p_, (bytes + 7) & ~size_t{7}), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceCopy() { cudaFree(p_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(p_);
  }

 private:
  void* p_ = nullptr;
};
#endif

// LaunchHashRows on resident columns whose rows start anywhere in their buffers
// (value and validity offsets not multiples of 4 or 8, so that the fixed-width
// kernel's vector loads do not apply and its per-row loads do), and at row counts
// around its 128-row warp step; the output is poisoned first and then compared
// with the host's bits, validity bytes included.
TEST_F(HashDeviceTest, ResidentColumnsAtAnyOffsetMatchHost) {
#if defined(GPUJOIN_HAVE_CUDA)
  std::mt19937_64 rng(2207);
  // Strings of up to 20 bytes fit the binary kernel's shared-memory window (a
  // warp step's bytes are staged), of up to 70 bytes mostly not (read directly).
  const std::pair<ColumnType, uint32_t> types[] = {
      {ColumnType::kInt8, 0},    {ColumnType::kUint16, 0},  {ColumnType::kFloat16, 0},
      {ColumnType::kUint32, 0},  {ColumnType::kFloat32, 0}, {ColumnType::kInt64, 0},
      {ColumnType::kFloat64, 0}, {ColumnType::kBinary, 20}, {ColumnType::kBinary, 70}};
  for (const auto& [type, max_len] : types) {
    for (uint64_t rows : {1u, 127u, 128u, 129u, 1000u, 4099u}) {
      for (uint64_t lead : {0u, 1u, 2u, 3u, 5u, 8u}) {
        const OwnedColumn c =
            RandomColumn(type, rows, lead % 3 == 0 ? 0.0 : 0.25, lead, rng, max_len);
        DeviceCopy data(c.data.data(), c.data.size());
        DeviceCopy offsets(c.offsets.data(), c.offsets.size() * sizeof(int32_t));
        DeviceCopy validity(c.validity.data(), c.validity.size());
        detail::HashView v;
        v.type = type;
        v.data = data.as<uint8_t>();
        v.offsets = c.offsets.empty() ? nullptr : offsets.as<int32_t>();
        v.validity = c.validity.empty() ? nullptr : validity.as<uint8_t>();
        v.value_offset = lead;
        v.validity_bit_offset = lead;
        DeviceCopy device_view(&v, sizeof(v));
        for (HashBits bits : {HashBits::k32, HashBits::k64}) {
          SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + " max_len " +
                       std::to_string(max_len) + " rows " + std::to_string(rows) + " lead " +
                       std::to_string(lead) + (bits == HashBits::k32 ? " hash32" : " hash64"));
          auto host = HashOnHost({c.View()}, bits);
          ASSERT_TRUE(host.ok()) << host.status();
          const size_t width = bits == HashBits::k32 ? 4 : 8;
          const size_t validity_bytes = (rows + 7) / 8;
          uint8_t* out = nullptr;
          uint8_t* out_validity = nullptr;
          ASSERT_EQ(cudaMalloc(&out, rows * width), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&out_validity, validity_bytes), cudaSuccess);
          ASSERT_EQ(cudaMemset(out, 0xa5, rows * width), cudaSuccess);
          ASSERT_EQ(cudaMemset(out_validity, 0xa5, validity_bytes), cudaSuccess);
          const detail::HashView* views = device_view.as<detail::HashView>();
          const cudaError_t e = bits == HashBits::k32
                                    ? detail::LaunchHashRows<uint32_t>(
                                          {&v, 1}, views, rows, reinterpret_cast<uint32_t*>(out),
                                          out_validity, stream_)
                                    : detail::LaunchHashRows<uint64_t>(
                                          {&v, 1}, views, rows, reinterpret_cast<uint64_t*>(out),
                                          out_validity, stream_);
          ASSERT_EQ(e, cudaSuccess);
          ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
          std::vector<uint64_t> got(rows);
          std::vector<uint8_t> got_validity(validity_bytes);
          if (width == 4) {
            std::vector<uint32_t> g32(rows);
            ASSERT_EQ(cudaMemcpy(g32.data(), out, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
            for (uint64_t r = 0; r < rows; ++r) got[r] = g32[r];
          } else {
            ASSERT_EQ(cudaMemcpy(got.data(), out, rows * 8, cudaMemcpyDeviceToHost), cudaSuccess);
          }
          ASSERT_EQ(
              cudaMemcpy(got_validity.data(), out_validity, validity_bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
          cudaFree(out);
          cudaFree(out_validity);
          EXPECT_EQ(got_validity, host->validity);
          for (uint64_t r = 0; r < rows; ++r) ASSERT_EQ(got[r], host->hashes[r]) << "row " << r;
        }
      }
    }
  }
#endif
}

// ---------------------------------------------------------------------------
// Arrow's narrow, fixed-size, large, dictionary and nested types.
// ---------------------------------------------------------------------------

std::vector<HashColumn> TreeViews(const std::vector<testing::OwnedTree>& trees) {
  std::vector<HashColumn> v;
  for (const auto& t : trees) v.push_back(t.View());
  return v;
}

// Every flat type Hash takes (int8/16, uint8/16, float16, bool, decimal128,
// fixed_size_binary of widths 0, 3 and 16, string, large binary/string) alone and
// dictionary-encoded (indices of every width, repeated, null and extra entries,
// garbage under null indices), at row counts around warp and byte boundaries,
// in one pass and in passes of 64 rows (the dictionary is hashed once for all).
TEST_F(HashDeviceTest, Issue22FlatTypesAndDictionariesMatchHost) {
  std::mt19937_64 rng(2204);
  for (const testing::LType& t : testing::FlatTypes()) {
    for (int dictionary_percent : {0, 100}) {
      testing::EncodeOptions o;
      o.dictionary_percent = dictionary_percent;
      for (uint64_t rows : {1u, 31u, 33u, 257u, 3001u}) {
        for (double null_p : {0.0, 0.3, 1.0}) {
          std::vector<testing::LValue> values;
          for (uint64_t r = 0; r < rows; ++r)
            values.push_back(testing::RandomValue(t, rng, null_p));
          const testing::OwnedTree c = testing::EncodeTop(t, values, rng, o);
          const std::string what = std::string(ColumnTypeName(t.type)) + "(" +
                                   std::to_string(t.width) + ") dict " +
                                   std::to_string(dictionary_percent) + " rows " +
                                   std::to_string(rows) + " nulls " + std::to_string(null_p);
          for (HashBits bits : {HashBits::k32, HashBits::k64}) {
            ExpectSameAsHost({c.View()}, bits, what);
            ExpectSameAsHost({c.View()}, bits, what + " passes of 64", 64);
          }
        }
      }
    }
  }
}

// Random composites of flat and dictionary columns, sliced.
TEST_F(HashDeviceTest, Issue22CompositesMatchHost) {
  std::mt19937_64 rng(2205);
  for (int iter = 0; iter < 60; ++iter) {
    const uint64_t rows = 1 + rng() % 5000;
    std::vector<testing::OwnedTree> columns;
    for (uint64_t c = 0, n = 1 + rng() % 4; c < n; ++c) {
      const testing::LType t = testing::RandomType(rng, 0);
      std::vector<testing::LValue> values;
      for (uint64_t r = 0; r < rows; ++r) values.push_back(testing::RandomValue(t, rng, 0.1));
      testing::EncodeOptions o;
      o.dictionary_percent = 50;
      columns.push_back(testing::EncodeTop(t, values, rng, o));
    }
    const uint64_t first = rng() % rows;
    const uint64_t n = rng() % (rows - first + 1);
    std::vector<HashColumn> slice;
    for (const auto& c : columns) slice.push_back(c.Slice(first, n));
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      ExpectSameAsHost(TreeViews(columns), bits, "composite " + std::to_string(iter));
      ExpectSameAsHost(slice, bits, "composite slice " + std::to_string(iter), 96);
    }
  }
}

// A large dictionary (50k string entries) under 400k indices, in several passes.
TEST_F(HashDeviceTest, Issue22LargeDictionaryMatchesHost) {
  std::mt19937_64 rng(2206);
  const OwnedColumn values = RandomColumn(ColumnType::kBinary, 50'000, 0.05, 3, rng, 24);
  testing::OwnedTree dict;
  dict.type = ColumnType::kBinary;
  dict.data = values.data;
  dict.offsets = values.offsets;
  dict.validity = values.validity;
  dict.offset = values.offset;
  dict.length = values.length;
  testing::OwnedTree c;
  c.type = ColumnType::kDictionary;
  c.index_type = ColumnType::kUint32;
  c.length = 400'000;
  c.offset = 5;
  c.data.resize((c.offset + c.length) * 4);
  for (uint64_t r = 0; r < c.offset + c.length; ++r) {
    const uint32_t index = static_cast<uint32_t>(rng() % dict.length);
    std::memcpy(&c.data[r * 4], &index, 4);
  }
  c.children = {dict};
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    ExpectSameAsHost({c.View()}, bits, "large dictionary");
    ExpectSameAsHost({c.View()}, bits, "large dictionary, passes", 65'536);
  }
}

// Lists, large lists and fixed-size lists of flat values run on the device (one
// thread per row folds its elements): every flat value type, null elements and
// rows, garbage under null rows, independent child offsets, in passes of 96 rows.
TEST_F(HashDeviceTest, Issue22ListsOfFlatValuesMatchHost) {
  std::mt19937_64 rng(2209);
  for (const testing::LType& value : testing::FlatTypes()) {
    for (ColumnType list :
         {ColumnType::kList, ColumnType::kLargeList, ColumnType::kFixedSizeList}) {
      const testing::LType t =
          testing::ListOf(value, list, list == ColumnType::kFixedSizeList ? 1 + rng() % 5 : 0);
      for (uint64_t rows : {1u, 33u, 1000u}) {
        std::vector<testing::LValue> values;
        for (uint64_t r = 0; r < rows; ++r) values.push_back(testing::RandomValue(t, rng, 0.2));
        const testing::OwnedTree c = testing::EncodeTop(t, values, rng);
        const std::string what = std::string(ColumnTypeName(list)) + "<" +
                                 std::string(ColumnTypeName(value.type)) + "> rows " +
                                 std::to_string(rows);
        for (HashBits bits : {HashBits::k32, HashBits::k64}) {
          ExpectSameAsHost({c.View()}, bits, what);
          ExpectSameAsHost({c.View()}, bits, what + " passes of 96", 96);
        }
      }
    }
  }
  // One long list (100k elements) beside short ones.
  std::vector<testing::LValue> values(3);
  for (int i = 0; i < 100'000; ++i) values[1].elems.push_back(testing::Scalar<int64_t>(i));
  values[2] = testing::Null();
  const testing::OwnedTree c =
      testing::EncodeTop(testing::ListOf(testing::T(ColumnType::kInt64)), values, rng);
  for (HashBits bits : {HashBits::k32, HashBits::k64}) ExpectSameAsHost({c.View()}, bits, "long");
}

// Nested trees (struct, list, large list, fixed-size list, map; depth up to 3)
// go through the CUDA backend's host path unless they are lists of flat values
// (docs/hashing.md "Execution"), alone and beside flat and dictionary columns:
// the same bits as the CPU backend.
TEST_F(HashDeviceTest, Issue22NestedMatchHost) {
  std::mt19937_64 rng(2207);
  for (int iter = 0; iter < 80; ++iter) {
    const uint64_t rows = rng() % 300;
    std::vector<testing::OwnedTree> columns;
    for (uint64_t c = 0, n = 1 + rng() % 3; c < n; ++c) {
      const testing::LType t = testing::RandomType(rng, 3);
      std::vector<testing::LValue> values;
      for (uint64_t r = 0; r < rows; ++r) values.push_back(testing::RandomValue(t, rng, 0.2));
      columns.push_back(testing::EncodeTop(t, values, rng));
    }
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      ExpectSameAsHost(TreeViews(columns), bits, "nested " + std::to_string(iter));
    }
  }
}

}  // namespace
}  // namespace gpujoin::engine
