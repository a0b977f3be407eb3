// JoinTraits (server/src/rpc_traits.hpp) on the CPU backend, without gRPC: a join
// whose result is split into several messages is copied and serialised by
// Process, on the executor; Seal, on the reactor thread, only hands out the
// buffers (review of issue 20: Seal built and serialised each continuation part
// on the reactor).
#include "rpc_traits.hpp"

#include <gtest/gtest.h>

#include "build_messages.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

class JoinTraitsTest : public testing::OperationsFixture {};

TEST_F(JoinTraitsTest, ProcessSerialisesEveryPartAndSealOnlyHandsThemOut) {
  ServerConfig config;
  config.max_message_bytes = 4096;
  MakeOperations(std::move(config));
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("x");
  spec.mutable_spec()->set_capacity(4096);
  ASSERT_TRUE(Build({spec, testing::ChunkMsg(testing::Iota(2000))}).ok());

  v1::JoinRequest request;
  request.set_index("x");
  request.set_batch_id(77);
  *request.add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(testing::Iota(1500));  // 12000 bytes of pairs: four messages
  detail::JoinTraits::Response out;
  ASSERT_TRUE(detail::JoinTraits::Process(*ops_, request, &out, nullptr).ok());
  ASSERT_GE(out.parts.size(), 3u);
  EXPECT_EQ(out.message.ByteSizeLong(), 0u);  // the whole result is not kept beside its parts

  grpc::ByteBuffer unused;
  uint64_t pairs = 0;
  for (size_t k = 0; k < out.parts.size(); ++k) {
    ASSERT_TRUE(detail::JoinTraits::More(out));
    grpc::ByteBuffer* wire = detail::JoinTraits::Seal(request, &out, &unused);
    EXPECT_EQ(wire, &out.parts[k]) << "Seal must hand out the buffer Process serialised";
    EXPECT_LE(wire->Length(), 4096u);
    grpc::ByteBuffer copy(*wire);
    v1::JoinResponse m;
    ASSERT_TRUE(grpc::SerializationTraits<v1::JoinResponse>::Deserialize(&copy, &m).ok());
    EXPECT_EQ(m.batch_id(), 77u);
    EXPECT_EQ(m.more(), k + 1 < out.parts.size());
    ASSERT_EQ(m.results_size(), 1);
    EXPECT_EQ(m.results(0).first_pair(), pairs);
    const auto right = UnpackColumn<uint32_t>(m.results(0).right_rows());
    for (size_t i = 0; i < right.size(); ++i) EXPECT_EQ(right[i], pairs + i);
    pairs += right.size();
  }
  EXPECT_FALSE(detail::JoinTraits::More(out));
  EXPECT_EQ(pairs, 1500u);
  EXPECT_EQ(unused.Length(), 0u);

  // An in-band error is the one message.
  detail::JoinTraits::SetBatchError(&out, absl::InvalidArgumentError("bad"));
  EXPECT_FALSE(detail::JoinTraits::More(out));
  grpc::ByteBuffer* wire = detail::JoinTraits::Seal(request, &out, &unused);
  EXPECT_EQ(wire, &unused);
  v1::JoinResponse m;
  ASSERT_TRUE(grpc::SerializationTraits<v1::JoinResponse>::Deserialize(wire, &m).ok());
  EXPECT_EQ(m.batch_id(), 77u);
  EXPECT_EQ(m.error().message(), "bad");
}

}  // namespace
}  // namespace gpujoin::server
