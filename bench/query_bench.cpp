// gpujoin-query-bench: what a plan saves a feature-serving path, end to end
// against a running gpujoind. Builds three uint32 indexes of --index-rows keys
// (qb_a, qb_b, qb_c; each with one int64 payload column) and then, over one
// open stream per mode and one request in flight, measures the latency of
//   lookup1   one Lookup of --keys keys on qb_a selecting its payload column,
//   lookup3   three Lookups, one per index, one after the other,
//   query3    one Query batch of --keys keys whose plan looks all three up
//             (left outer, each selecting its payload column);
// and prints p50 / p99 per mode and the ratios the issue names.
//
//   gpujoin-query-bench [--target HOST:PORT] [--keys N] [--index-rows N] [--repeat R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

namespace v1 = gpujoin::v1;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpujoin-query-bench: %s\n", what.c_str());
  std::exit(1);
}

std::string Packed(const std::vector<uint32_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

void BuildIndex(v1::GpuJoin::Stub& stub, const std::string& name, uint32_t rows) {
  grpc::ClientContext ctx;
  v1::BuildIndexResponse response;
  auto writer = stub.BuildIndex(&ctx, &response);
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name(name);
  spec.mutable_spec()->set_expected_rows(rows);
  spec.mutable_spec()->set_replace(true);
  auto* p = spec.mutable_spec()->add_payload();
  p->set_name(name + "_v");
  p->set_type(v1::COLUMN_TYPE_INT64);
  writer->Write(spec);
  const uint32_t chunk = 1u << 18;
  for (uint32_t first = 0; first < rows; first += chunk) {
    const uint32_t n = std::min(chunk, rows - first);
    std::vector<uint32_t> keys(n);
    std::vector<int64_t> values(n);
    for (uint32_t i = 0; i < n; ++i) {
      keys[i] = first + i;
      values[i] = int64_t{first + i} * 3;
    }
    v1::BuildIndexRequest r;
    r.mutable_chunk()->mutable_keys()->set_packed(Packed(keys));
    v1::Column* c = r.mutable_chunk()->add_payload();
    c->set_name(name + "_v");
    c->set_type(v1::COLUMN_TYPE_INT64);
    c->set_length(n);
    c->set_data(std::string(reinterpret_cast<const char*>(values.data()), n * 8));
    writer->Write(r);
  }
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  if (!s.ok()) Die("BuildIndex " + name + ": " + s.error_message());
}

struct Stats {
  double p50 = 0, p99 = 0;
};
Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:50051";
  uint32_t keys = 256, index_rows = 1u << 20;
  int repeat = 2000;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) -> const char* {
      if (std::strcmp(argv[i], flag) == 0 && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (const char* v = next("--target")) {
      target = v;
    } else if (const char* v = next("--keys")) {
      keys = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (const char* v = next("--index-rows")) {
      index_rows = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (const char* v = next("--repeat")) {
      repeat = std::atoi(v);
    } else {
      std::fprintf(stderr,
                   "usage: gpujoin-query-bench [--target HOST:PORT] [--keys N] "
                   "[--index-rows N] [--repeat R]\n");
      return 2;
    }
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::GpuJoin::NewStub(channel);
  const std::vector<std::string> names = {"qb_a", "qb_b", "qb_c"};
  for (const auto& n : names) BuildIndex(*stub, n, index_rows);

  std::mt19937 rng(7);
  auto random_keys = [&] {
    std::vector<uint32_t> k(keys);
    for (auto& x : k) x = rng() % (index_rows + index_rows / 10);  // ~9% miss
    return k;
  };

  // Lookup streams (one per index), kept open.
  grpc::ClientContext lookup_ctx;
  auto lookup_stream = stub->Lookup(&lookup_ctx);
  auto lookup = [&](const std::string& index, const std::vector<uint32_t>& k) {
    v1::LookupRequest r;
    r.set_index(index);
    r.mutable_keys()->set_packed(Packed(k));
    r.add_select(index + "_v");
    if (!lookup_stream->Write(r)) Die("Lookup write failed");
    v1::LookupResponse out;
    if (!lookup_stream->Read(&out)) Die("Lookup read failed");
    if (out.has_error()) Die("Lookup: " + out.error().message());
  };

  grpc::ClientContext query_ctx;
  auto query_stream = stub->Query(&query_ctx);
  bool first = true;
  auto query = [&](const std::vector<uint32_t>& k) {
    v1::QueryRequest r;
    if (first) {
      for (const auto& n : names) {
        auto* step = r.mutable_plan()->add_steps()->mutable_lookup();
        step->set_index(n);
        step->add_key("id");
        step->add_select(n + "_v");
        step->set_kind(v1::JOIN_KIND_LEFT_OUTER);
      }
      first = false;
    }
    v1::Column* c = r.add_columns();
    c->set_name("id");
    c->set_type(v1::COLUMN_TYPE_UINT32);
    c->set_length(k.size());
    c->set_data(Packed(k));
    if (!query_stream->Write(r)) Die("Query write failed");
    v1::QueryResponse out;
    if (!query_stream->Read(&out)) Die("Query read failed");
    if (out.has_error()) Die("Query: " + out.error().message());
    if (out.rows() != k.size()) Die("Query answered a wrong number of rows");
  };

  std::vector<double> t1, t3, tq;
  auto time_us = [](auto&& f) {
    const auto a = Clock::now();
    f();
    return std::chrono::duration<double, std::micro>(Clock::now() - a).count();
  };
  for (int warm = 0; warm < 200; ++warm) {
    const auto k = random_keys();
    lookup(names[0], k);
    query(k);
  }
  for (int i = 0; i < repeat; ++i) {
    // Interleaved so that all modes see the same machine state.
    const auto k = random_keys();
    t1.push_back(time_us([&] { lookup(names[0], k); }));
    t3.push_back(time_us([&] {
      for (const auto& n : names) lookup(n, k);
    }));
    tq.push_back(time_us([&] { query(k); }));
  }
  lookup_stream->WritesDone();
  query_stream->WritesDone();
  const Stats s1 = Summarize(t1), s3 = Summarize(t3), sq = Summarize(tq);
  std::printf("mode     keys  p50_us   p99_us\n");
  std::printf("lookup1  %4u  %7.1f  %7.1f\n", keys, s1.p50, s1.p99);
  std::printf("lookup3  %4u  %7.1f  %7.1f\n", keys, s3.p50, s3.p99);
  std::printf("query3   %4u  %7.1f  %7.1f\n", keys, sq.p50, sq.p99);
  std::printf("query3 p50 / lookup1 p50 = %.2f (target <= 1.3)\n", sq.p50 / s1.p50);
  std::printf("lookup3 p50 / query3 p50 = %.2f (target >= 2)\n", s3.p50 / sq.p50);
  return 0;
}
