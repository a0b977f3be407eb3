// Partitioning keys over shards (gpujoin/engine/partition.hpp): jump consistent
// hash's balance and its minimal movement from N to N + 1 parts, key words
// partitioned as the one-column key schema of their width, null key rows on
// part 0, and the --shard I/N parser.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/partition.hpp"

namespace gpujoin::engine {
namespace {

TEST(PartitionTest, JumpHashIsBalancedAndMovesOnlyToTheNewPart) {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> keys(200000);
  for (uint64_t& k : keys) k = rng();
  for (uint32_t n : {1u, 2u, 3u, 7u, 16u}) {
    std::vector<uint64_t> count(n, 0);
    uint64_t moved = 0;
    for (uint64_t k : keys) {
      const uint32_t p = JumpHash(k, n);
      ASSERT_LT(p, n);
      ++count[p];
      const uint32_t q = JumpHash(k, n + 1);
      if (q != p) {
        ++moved;
        EXPECT_EQ(q, n) << "a key moved between old parts";
      }
    }
    for (uint32_t p = 0; p < n; ++p) {
      EXPECT_NEAR(double(count[p]) / keys.size(), 1.0 / n, 0.01) << n << " parts, part " << p;
    }
    EXPECT_NEAR(double(moved) / keys.size(), 1.0 / (n + 1), 0.01) << n << " -> " << n + 1;
  }
}

TEST(PartitionTest, AWordPartitionsAsTheOneColumnKeyOfItsWidth) {
  std::vector<uint32_t> w32 = {0, 1, 2, 17, 4242, 0xfffffffe};
  std::vector<uint64_t> w64 = {0, 1, 2, 17, 4242, uint64_t{1} << 40};
  for (uint32_t n : {2u, 3u, 5u}) {
    std::vector<uint32_t> a(w32.size()), b(w32.size());
    PartitionsOf(std::span<const uint32_t>(w32), n, a);
    KeyColumns cols;
    HashColumn c;
    c.type = ColumnType::kUint32;
    c.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w32.data()), w32.size() * 4);
    c.length = w32.size();
    cols.columns.push_back(c);
    PartitionsOf(cols, n, b);
    EXPECT_EQ(a, b) << n;
    std::vector<uint32_t> c64(w64.size()), d64(w64.size());
    PartitionsOf(std::span<const uint64_t>(w64), n, c64);
    KeyColumns cols64;
    HashColumn h;
    h.type = ColumnType::kUint64;
    h.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w64.data()), w64.size() * 8);
    h.length = w64.size();
    cols64.columns.push_back(h);
    PartitionsOf(cols64, n, d64);
    EXPECT_EQ(c64, d64) << n;
  }
}

TEST(PartitionTest, StringKeysSpreadAndNullRowsGoToPartZero) {
  std::string bytes;
  std::vector<int32_t> offsets = {0};
  const int rows = 3000;
  for (int i = 0; i < rows; ++i) {
    bytes += "key-" + std::to_string(i);
    offsets.push_back(static_cast<int32_t>(bytes.size()));
  }
  std::vector<uint8_t> validity((rows + 7) / 8, 0xff);
  validity[0] = 0xfe;  // row 0 is null
  HashColumn c;
  c.type = ColumnType::kString;
  c.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  c.offsets = offsets;
  c.validity = validity;
  c.length = rows;
  KeyColumns keys;
  keys.columns.push_back(c);
  std::vector<uint32_t> parts(rows);
  PartitionsOf(keys, 3, parts);
  EXPECT_EQ(parts[0], 0u);
  std::vector<int> count(3, 0);
  for (uint32_t p : parts) ++count[p];
  for (int p = 0; p < 3; ++p) EXPECT_GT(count[p], rows / 4) << p;
  // Strings equal but for one byte land independently; the same string alike.
  std::vector<uint32_t> again(rows);
  PartitionsOf(keys, 3, again);
  EXPECT_EQ(parts, again);
}

TEST(PartitionTest, ShardIdentityParses) {
  auto ok = ParseShardIdentity("1/3", "--shard");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->index, 1u);
  EXPECT_EQ(ok->count, 3u);
  EXPECT_TRUE(ok->sharded());
  for (const char* bad : {"", "/2", "2", "3/3", "1/0", "a/2", "1/2x", "0/70000", "-1/2"}) {
    auto s = ParseShardIdentity(bad, "--shard");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find("--shard"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace gpujoin::engine
