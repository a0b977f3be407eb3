// Stream integrity through the real gpujoind (CPU backend) over loopback gRPC:
// a stream message that cannot be parsed ends the stream
// with INVALID_ARGUMENT naming its position, after the responses to the messages
// before it, and never with OK; a BuildIndex stream that ends with an error (an
// unparseable message, a rejected chunk, a cancel, a deadline) installs nothing
// and the previous version keeps serving.
//
// Regression: before the streams were read as raw byte buffers, gRPC reported a
// message it could not parse like the client's half-close, so a Lookup, Join,
// Aggregate or Hash stream ended OK without answering the rest of its batches,
// and a build stream with a bad message after chunk 5 of 10 installed an index
// of 5 chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "build_messages.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::Iota;
using gpujoin::server::testing::SpecMsg;

using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr uint32_t kMissing = 0xffffffffu;

// Field 15 (in none of the request messages) announcing 100 bytes of which 2
// follow: corrupted bytes that no message type parses.
const std::string kTruncated("\x7a\x64\x01\x02", 4);

// Field 1 (`index`, a proto3 string in LookupRequest and JoinRequest) holding
// "\xc3\x28", which is not valid UTF-8; protobuf refuses to parse it.
const std::string kBadUtf8Index("\x0a\x02\xc3\x28", 4);

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes;
}

// A stream of raw messages on any method, so that a test can send bytes the
// generated stub would never produce. (grpc::GenericStub offers the same on a
// completion queue; the synchronous form keeps the tests short.)
class RawStream {
 public:
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
            grpc::ClientContext* context)
      : method_(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING),
        stream_(
            grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
                channel.get(), method_, context)) {}

  bool Write(const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    return stream_->Write(buffer);
  }
  bool Read(std::string* bytes) {
    grpc::ByteBuffer buffer;
    if (!stream_->Read(&buffer)) return false;
    *bytes = Flatten(buffer);
    return true;
  }
  void WritesDone() { stream_->WritesDone(); }
  grpc::Status Finish() { return stream_->Finish(); }

 private:
  grpc::internal::RpcMethod method_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
};

// One streaming RPC: a valid serialised request for a batch ID (without the
// `index` field where the RPC has one, so that a test can prepend its own), and
// the check of a response to it.
struct RpcCase {
  std::string rpc;
  std::string method;
  bool has_index;
  std::function<std::string(uint64_t batch_id)> request;
  // Parses `bytes` and checks it answers `batch_id` without an in-band error.
  std::function<void(const std::string& bytes, uint64_t batch_id)> check;
};

template <typename Response>
void CheckAnswered(const std::string& bytes, uint64_t batch_id) {
  Response r;
  ASSERT_TRUE(r.ParseFromString(bytes));
  EXPECT_EQ(r.batch_id(), batch_id);
  EXPECT_FALSE(r.has_error()) << r.error().message();
}

std::vector<RpcCase> RpcCases() {
  const std::string index_field = std::string("\x0a\x01", 2) + "t";
  std::vector<RpcCase> cases;
  cases.push_back(
      {"Lookup", "/gpujoin.v1.GpuJoin/Lookup", true,
       [](uint64_t id) {
         v1::LookupRequest r;
         *r.mutable_keys()->mutable_packed() =
             PackColumn<uint32_t>(std::vector<uint32_t>{1, 2, 500});
         r.set_batch_id(id);
         return r.SerializeAsString();
       },
       [](const std::string& bytes, uint64_t id) {
         v1::LookupResponse r;
         ASSERT_TRUE(r.ParseFromString(bytes));
         EXPECT_EQ(r.batch_id(), id);
         EXPECT_FALSE(r.has_error()) << r.error().message();
         EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), (std::vector<uint32_t>{1, 2, kMissing}));
       }});
  cases.push_back({"Join", "/gpujoin.v1.GpuJoin/Join", true,
                   [](uint64_t id) {
                     v1::JoinRequest r;
                     auto* b = r.add_batches();
                     *b->mutable_keys()->mutable_packed() =
                         PackColumn<uint32_t>(std::vector<uint32_t>{3, 500, 4});
                     r.set_batch_id(id);
                     return r.SerializeAsString();
                   },
                   [](const std::string& bytes, uint64_t id) {
                     v1::JoinResponse r;
                     ASSERT_TRUE(r.ParseFromString(bytes));
                     EXPECT_EQ(r.batch_id(), id);
                     EXPECT_FALSE(r.has_error()) << r.error().message();
                     ASSERT_EQ(r.results_size(), 1);
                     EXPECT_EQ(r.results(0).count(), 2u);
                   }});
  cases.push_back({"Aggregate", "/gpujoin.v1.GpuJoin/Aggregate", false,
                   [](uint64_t id) {
                     v1::AggregateRequest r;
                     r.set_op(v1::AGGREGATE_OP_COUNT);
                     r.set_groups(4);
                     *r.mutable_keys()->mutable_packed() =
                         PackColumn<uint32_t>(std::vector<uint32_t>{0, 1, 1, 3});
                     r.set_batch_id(id);
                     return r.SerializeAsString();
                   },
                   CheckAnswered<v1::AggregateResponse>});
  cases.push_back({"Hash", "/gpujoin.v1.GpuJoin/Hash", false,
                   [](uint64_t id) {
                     v1::HashRequest r;
                     auto* c = r.add_columns();
                     c->set_type(v1::COLUMN_TYPE_UINT32);
                     c->set_data(PackColumn<uint32_t>(std::vector<uint32_t>{7, 8}));
                     c->set_length(2);
                     r.set_bits(32);
                     r.set_batch_id(id);
                     return r.SerializeAsString();
                   },
                   CheckAnswered<v1::HashResponse>});
  for (auto& c : cases) {
    if (!c.has_index) continue;
    auto request = c.request;
    c.request = [request, index_field](uint64_t id) { return index_field + request(id); };
  }
  return cases;
}

class StreamIntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    channel_ = grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials());
    stub_ = v1::GpuJoin::NewStub(channel_);
    // Version 1 of "t": keys 0..99, the value of key k is k.
    v1::BuildIndexResponse built;
    const grpc::Status s = Build({SpecMsg("t", 256), ChunkMsg(Iota(100, 0))}, &built);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(built.index().version(), 1u);
  }

  grpc::Status Build(const std::vector<v1::BuildIndexRequest>& messages,
                     v1::BuildIndexResponse* response) {
    return gpujoin::server::testing::Build(*stub_, messages, response);
  }

  // Sends `messages` as they are on `method`, half-closes, and returns every
  // response and the final status.
  std::pair<std::vector<std::string>, grpc::Status> RunRaw(
      const std::string& method, const std::vector<std::string>& messages) {
    grpc::ClientContext ctx;
    RawStream stream(channel_, method, &ctx);
    // Writes from another thread so that neither side's flow control can stall.
    std::thread writer([&] {
      for (const auto& m : messages) {
        if (!stream.Write(m)) break;
      }
      stream.WritesDone();
    });
    std::vector<std::string> responses;
    std::string bytes;
    while (stream.Read(&bytes)) responses.push_back(bytes);
    writer.join();
    return {responses, stream.Finish()};
  }

  // The value "t" answers for `key` (kMissing when absent) and the version that answered.
  std::pair<uint32_t, uint64_t> LookupOne(uint32_t key) {
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    v1::LookupRequest req;
    req.set_index("t");
    *req.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{key});
    EXPECT_TRUE(stream->Write(req));
    stream->WritesDone();
    v1::LookupResponse resp;
    EXPECT_TRUE(stream->Read(&resp));
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(resp.has_error()) << resp.error().message();
    const auto values = UnpackColumn<uint32_t>(resp.values());
    return {values.size() == 1 ? values[0] : 0xdeadbeefu, resp.index_version()};
  }

  // "t" is still version 1 (100 rows, keys 0..99) and answers from it.
  void ExpectVersionOneServes() {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest req;
    req.set_name("t");
    v1::DescribeIndexResponse described;
    const grpc::Status s = stub_->DescribeIndex(&ctx, req, &described);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(described.index().version(), 1u);
    EXPECT_EQ(described.index().rows(), 100u);
    EXPECT_EQ(LookupOne(5), std::make_pair(5u, uint64_t{1}));
    EXPECT_EQ(LookupOne(99), std::make_pair(99u, uint64_t{1}));
    // A key of the refused rebuild (chunks 1000..1099) is not there.
    EXPECT_EQ(LookupOne(1000), std::make_pair(kMissing, uint64_t{1}));
  }

  // A rebuild of "t" (replace) with ten chunks of ten keys from 1000.
  static std::vector<v1::BuildIndexRequest> Rebuild() {
    std::vector<v1::BuildIndexRequest> m = {SpecMsg("t", 256, {.replace = true})};
    for (uint32_t i = 0; i < 10; ++i) m.push_back(ChunkMsg(Iota(10, 1000 + 10 * i)));
    return m;
  }

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

// For every streaming RPC and both kinds of garbage: two good batches, the bad
// message, one more good batch. The two are answered in order, the stream ends
// with INVALID_ARGUMENT naming message 3, and the server goes on serving.
TEST_F(StreamIntegrityTest, GarbageMidStreamEndsWithInvalidArgumentAfterEarlierResponses) {
  for (const RpcCase& c : RpcCases()) {
    std::vector<std::string> garbage = {kTruncated};
    if (c.has_index) garbage.push_back(kBadUtf8Index + c.request(3).substr(3));
    for (size_t g = 0; g < garbage.size(); ++g) {
      SCOPED_TRACE(c.rpc + (g == 0 ? ": truncated bytes" : ": invalid UTF-8 in index"));
      auto [responses, status] =
          RunRaw(c.method, {c.request(1), c.request(2), garbage[g], c.request(4)});
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << status.error_code() << " " << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr("message 3 could not be parsed"));
      EXPECT_THAT(status.error_message(), HasSubstr(c.rpc + "Request"));
      ASSERT_EQ(responses.size(), 2u);
      c.check(responses[0], 1);
      c.check(responses[1], 2);

      // The server is unharmed: a good stream on the same RPC is answered in full.
      auto [after, ok] = RunRaw(c.method, {c.request(5)});
      EXPECT_TRUE(ok.ok()) << ok.error_message();
      ASSERT_EQ(after.size(), 1u);
      c.check(after[0], 5);
    }
  }
}

// The position counts every message of the stream, beyond the flow-control window
// (--max-inflight-per-stream) too; a bad first message gets no response at all.
TEST_F(StreamIntegrityTest, TheErrorNamesThePositionOfTheBadMessage) {
  for (const RpcCase& c : RpcCases()) {
    SCOPED_TRACE(c.rpc);
    auto [none, first] = RunRaw(c.method, {kTruncated, c.request(1)});
    EXPECT_EQ(first.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << first.error_message();
    EXPECT_THAT(first.error_message(), HasSubstr("message 1 could not be parsed"));
    EXPECT_TRUE(none.empty());

    std::vector<std::string> messages;
    for (uint64_t id = 1; id <= 40; ++id) messages.push_back(c.request(id));
    messages.push_back(kTruncated);
    auto [responses, late] = RunRaw(c.method, messages);
    EXPECT_EQ(late.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << late.error_message();
    EXPECT_THAT(late.error_message(), HasSubstr("message 41 could not be parsed"));
    ASSERT_EQ(responses.size(), 40u);
    for (uint64_t i = 0; i < 40; ++i) c.check(responses[i], i + 1);
  }
}

// A rebuild whose message 7 (after the spec and chunk 5 of 10) does not parse is
// refused as a whole: nothing of it is installed.
TEST_F(StreamIntegrityTest, BuildWithAnUnparseableMessageAfterChunkFiveInstallsNothing) {
  std::vector<std::string> messages;
  const auto rebuild = Rebuild();
  for (size_t i = 0; i < rebuild.size(); ++i) {
    if (i == 6) messages.push_back(kTruncated);
    messages.push_back(rebuild[i].SerializeAsString());
  }
  auto [responses, status] = RunRaw("/gpujoin.v1.GpuJoin/BuildIndex", messages);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("message 7 could not be parsed"));
  EXPECT_THAT(status.error_message(), HasSubstr("BuildIndexRequest"));
  EXPECT_TRUE(responses.empty());
  ExpectVersionOneServes();

  // The same rebuild without the bad message installs version 2: the check above
  // would have seen an install.
  v1::BuildIndexResponse built;
  const grpc::Status s = Build(Rebuild(), &built);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(built.index().version(), 2u);
  EXPECT_EQ(built.index().rows(), 100u);
  EXPECT_EQ(LookupOne(1000), std::make_pair(0u, uint64_t{2}));
}

// A chunk that parses but is invalid (6 packed bytes: not whole rows) after chunk 5
// ends the build with INVALID_ARGUMENT; nothing is installed.
TEST_F(StreamIntegrityTest, BuildWithAnInvalidChunkAfterChunkFiveInstallsNothing) {
  auto messages = Rebuild();
  v1::BuildIndexRequest bad;
  bad.mutable_chunk()->mutable_keys()->set_packed(std::string(6, '\1'));
  messages.insert(messages.begin() + 6, bad);
  v1::BuildIndexResponse built;
  const grpc::Status s = Build(messages, &built);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  ExpectVersionOneServes();
}

// A rebuild cut mid-way by the client (5 of 10 chunks sent, then cancelled)
// installs nothing.
TEST_F(StreamIntegrityTest, BuildCancelledMidwayInstallsNothing) {
  const auto messages = Rebuild();
  grpc::ClientContext ctx;
  v1::BuildIndexResponse built;
  auto writer = stub_->BuildIndex(&ctx, &built);
  for (size_t i = 0; i < 6; ++i) ASSERT_TRUE(writer->Write(messages[i]));
  // Let the server read what was sent, so the cancel cuts a stream in progress.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ctx.TryCancel();
  const grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  // Give a wrongly started build time to install before looking.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ExpectVersionOneServes();
}

// A rebuild whose deadline passes after 5 of 10 chunks installs nothing.
TEST_F(StreamIntegrityTest, BuildPastItsDeadlineInstallsNothing) {
  const auto messages = Rebuild();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  v1::BuildIndexResponse built;
  auto writer = stub_->BuildIndex(&ctx, &built);
  // On a loaded machine the deadline may pass while writing: that is the same case.
  for (size_t i = 0; i < 6; ++i) {
    if (!writer->Write(messages[i])) break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ExpectVersionOneServes();
}

}  // namespace
}  // namespace gpujoin::server
