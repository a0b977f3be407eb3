// Hash nodes run through the public backend API (CreateBackend(...)->Run(graph)),
// on the CPU backend and, when a device is present, the CUDA backend: known
// answers, equality with the host reference on random composites, graph-level
// validation (node index in the message) and a hash node after another node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "expect_known_answers.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/testing/require_gpu.hpp"
#include "hash_test_util.hpp"
#include "known_answers.hpp"
#include "nested_test_util.hpp"

namespace gpujoin::engine {

// Readable test names in ctest instead of the enum's bytes.
void PrintTo(BackendKind kind, std::ostream* os) { *os << BackendKindName(kind); }

namespace {

using ::gpujoin::engine::testing::HashOnHost;
using ::gpujoin::engine::testing::HashOutput;
using ::gpujoin::engine::testing::kAllTypes;
using ::gpujoin::engine::testing::NodeBuffers;
using ::gpujoin::engine::testing::OwnedColumn;
using ::gpujoin::engine::testing::RandomColumn;
using ::gpujoin::engine::testing::Views;
using ::testing::HasSubstr;

class HashBackendTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BackendKind::kCuda && !CudaDeviceAvailable()) {
      return ::gpujoin::testing::SkipOrFailWithoutGpu(
          "no CUDA device is visible (or this build has no CUDA backend)");
    }
    BackendOptions options;
    options.cpu_threads = 2;
    auto backend = CreateBackend(GetParam(), options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }

  absl::StatusOr<HashOutput> Run(const std::vector<HashColumn>& columns, HashBits bits) {
    NodeBuffers b(columns, bits);
    CommandGraph graph;
    graph.Add(b.node);
    GPUJOIN_RETURN_IF_ERROR(backend_->Run(graph));
    return b.Output();
  }

  std::unique_ptr<Backend> backend_;
};

TEST_P(HashBackendTest, KnownAnswers) {
  testing::ExpectKnownAnswers(
      [this](const std::vector<HashColumn>& columns, HashBits bits) { return Run(columns, bits); });
}

// Arrow's narrow, dictionary and nested types through the backend (graph
// validation of child buffers, the CPU backend's thread ranges, the CUDA backend's device and host paths): random
// nested, dictionary and narrow-type composites of 20000 rows equal the host
// reference; an out-of-range dictionary index is refused with the node and path.
TEST_P(HashBackendTest, NestedAndDictionaryCompositesMatchHostReference) {
  std::mt19937_64 rng(2208);
  for (int iter = 0; iter < 6; ++iter) {
    std::vector<testing::OwnedTree> trees;
    std::vector<HashColumn> views;
    for (int c = 0; c < 3; ++c) {
      const testing::LType t = testing::RandomType(rng, iter % 2 == 0 ? 0 : 3);
      std::vector<testing::LValue> values;
      for (int r = 0; r < 20000; ++r) values.push_back(testing::RandomValue(t, rng, 0.05));
      trees.push_back(testing::EncodeTop(t, values, rng));
    }
    for (const auto& t : trees) views.push_back(t.View());
    for (HashBits bits : {HashBits::k32, HashBits::k64}) {
      auto expected = HashOnHost(views, bits);
      auto actual = Run(views, bits);
      ASSERT_TRUE(expected.ok()) << expected.status();
      ASSERT_TRUE(actual.ok()) << actual.status();
      EXPECT_EQ(*actual, *expected) << iter;
    }
  }
  testing::OwnedTree d;
  d.type = ColumnType::kDictionary;
  d.index_type = ColumnType::kInt32;
  d.data = {3, 0, 0, 0};
  d.length = 1;
  d.children.resize(1);
  d.children[0].type = ColumnType::kNull;
  d.children[0].length = 3;
  auto bad = Run({d.View()}, HashBits::k64);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("node 0 (hash): column 0 (dictionary): index 3 at row 0"));
}

TEST_P(HashBackendTest, RandomCompositeMatchesHostReference) {
  std::mt19937_64 rng(31);
  std::vector<OwnedColumn> columns;
  uint64_t lead = 0;
  for (ColumnType type : kAllTypes) columns.push_back(RandomColumn(type, 5000, 0.03, lead++, rng));
  for (HashBits bits : {HashBits::k32, HashBits::k64}) {
    auto expected = HashOnHost(Views(columns), bits);
    auto actual = Run(Views(columns), bits);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(actual.ok()) << actual.status();
    EXPECT_EQ(*actual, *expected);
  }
}

TEST_P(HashBackendTest, ZeroRows) {
  const OwnedColumn c = testing::BinaryColumn({});
  auto out = Run({c.View()}, HashBits::k32);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->hashes.empty());
}

// The graph validates hash nodes before running anything and names the node.
TEST_P(HashBackendTest, InvalidNodeIsRejectedWithItsIndex) {
  const OwnedColumn a =
      testing::FixedColumn<uint32_t>(ColumnType::kUint32, std::vector<uint32_t>{1, 2});
  OwnedColumn b = testing::BinaryColumn({"x", "y"});
  b.offsets.back() = 50;  // past the end of data
  NodeBuffers ok({a.View()}, HashBits::k64);
  NodeBuffers bad({a.View(), b.View()}, HashBits::k64);
  CommandGraph graph;
  graph.Add(ok.node);
  graph.Add(bad.node);
  const absl::Status status = backend_->Run(graph);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("node 1 (hash)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("column 1 (binary)"));
  // Nothing ran: the first node's outputs still hold their fill pattern.
  EXPECT_EQ(ok.out64[0], 0xDEADBEEFDEADBEEFull);
}

// Two hash nodes in one graph (hash64 and hash32 of the same columns).
TEST_P(HashBackendTest, SeveralHashNodesInOneGraph) {
  std::mt19937_64 rng(32);
  const OwnedColumn a = RandomColumn(ColumnType::kInt64, 777, 0.1, 2, rng);
  const OwnedColumn s = RandomColumn(ColumnType::kBinary, 777, 0.1, 0, rng);
  NodeBuffers n64({a.View(), s.View()}, HashBits::k64);
  NodeBuffers n32({a.View(), s.View()}, HashBits::k32);
  CommandGraph graph;
  graph.Add(n64.node);
  graph.Add(n32.node);
  ASSERT_TRUE(backend_->Run(graph).ok());
  EXPECT_EQ(n64.Output(), *HashOnHost({a.View(), s.View()}, HashBits::k64));
  EXPECT_EQ(n32.Output(), *HashOnHost({a.View(), s.View()}, HashBits::k32));
}

INSTANTIATE_TEST_SUITE_P(Backends, HashBackendTest,
                         ::testing::Values(BackendKind::kCpu, BackendKind::kCuda),
                         [](const auto& info) { return std::string(BackendKindName(info.param)); });

}  // namespace
}  // namespace gpujoin::engine
