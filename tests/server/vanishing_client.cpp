// A gRPC client that is killed mid-stream (used by server_fault_tests):
//   gpujoin_vanishing_client ADDRESS LOOKUP_INDEX BUILD_NAME
// Starts a BuildIndex stream for BUILD_NAME and sends its spec and five chunks of
// 10,000 keys without ending the input, starts a Lookup stream on LOOKUP_INDEX and
// writes eight batches without reading any answer, prints "ready" and waits to be
// killed. Everything the server holds for it must go when the connection dies.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "wire/column_codec.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ADDRESS LOOKUP_INDEX BUILD_NAME\n", argv[0]);
    return 2;
  }
  namespace v1 = gpujoin::v1;
  auto stub = v1::GpuJoin::NewStub(grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));

  grpc::ClientContext build_ctx;
  v1::BuildIndexResponse build_response;
  auto build = stub->BuildIndex(&build_ctx, &build_response);
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name(argv[3]);
  if (!build->Write(spec)) return 3;
  for (uint32_t c = 0; c < 5; ++c) {
    std::vector<uint32_t> keys(10000);
    for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = c * 10000 + i + 1;
    v1::BuildIndexRequest chunk;
    *chunk.mutable_chunk()->mutable_keys()->mutable_packed() =
        gpujoin::server::PackColumn<uint32_t>(keys);
    if (!build->Write(chunk)) return 3;
  }

  grpc::ClientContext lookup_ctx;
  auto lookup = stub->Lookup(&lookup_ctx);
  v1::LookupRequest batch;
  batch.set_index(argv[2]);
  std::vector<uint32_t> keys(50000);
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i + 1;
  *batch.mutable_keys()->mutable_packed() = gpujoin::server::PackColumn<uint32_t>(keys);
  for (uint64_t b = 0; b < 8; ++b) {
    batch.set_batch_id(b);
    if (!lookup->Write(batch)) return 4;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}
