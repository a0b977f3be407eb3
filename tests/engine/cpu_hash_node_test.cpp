// The CPU backend hashes large HashNodes in parallel ranges; the result must be
// identical to one single-threaded pass (detail::HashRowsHost), including the
// output validity bitmap across range boundaries.
#include <gtest/gtest.h>

#include <random>

#include "gpujoin/engine/backend.hpp"
#include "hashing/hash_host.hpp"

namespace gpujoin::engine {
namespace {

TEST(CpuHashNodeTest, ParallelRangesEqualASingleThreadedPass) {
  std::mt19937_64 rng(7);
  // Not a multiple of 8 nor of any task count. Regression: with 4 tasks the range
  // size was rounded down (4 * 25000 < 100003) and the last 3 rows were never hashed.
  const size_t rows = 100003;
  std::vector<uint64_t> data(rows);
  for (auto& v : data) v = rng();
  std::vector<uint8_t> validity((rows + 7) / 8);
  for (auto& b : validity) b = static_cast<uint8_t>(rng());
  HashColumn col;
  col.type = ColumnType::kUint64;
  col.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), rows * 8);
  col.validity = validity;
  col.length = rows;

  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    HashNode expected_node;
    expected_node.columns = {col};
    expected_node.bits = bits;
    std::vector<uint32_t> e32(bits == HashBits::k32 ? rows : 0);
    std::vector<uint64_t> e64(bits == HashBits::k64 ? rows : 0);
    std::vector<uint8_t> ev((rows + 7) / 8);
    expected_node.out32 = e32;
    expected_node.out64 = e64;
    expected_node.out_validity = ev;
    detail::HashRowsHost(expected_node);

    for (uint32_t threads : {1u, 3u}) {
      auto backend = CreateBackend(BackendKind::kCpu, BackendOptions{threads});
      ASSERT_TRUE(backend.ok());
      HashNode node = expected_node;
      std::vector<uint32_t> o32(e32.size(), 1);
      std::vector<uint64_t> o64(e64.size(), 1);
      std::vector<uint8_t> ov(ev.size(), 0xaa);
      node.out32 = o32;
      node.out64 = o64;
      node.out_validity = ov;
      CommandGraph graph;
      graph.Add(node);
      const absl::Status status = (*backend)->Run(graph);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(o32, e32) << "threads " << threads;
      EXPECT_EQ(o64, e64) << "threads " << threads;
      EXPECT_EQ(ov, ev) << "threads " << threads;
    }
  }
}

}  // namespace
}  // namespace gpujoin::engine
