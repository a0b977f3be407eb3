// The snapshot tests' fixture (snapshot_integration_test.cpp,
// snapshot_fault_test.cpp): real gpujoind processes with --data-dir on a
// per-test directory, build messages for every kind of index, the answers of
// lookups and every join kind, and the server's log.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "build_messages.hpp"
#include "gpujoin/engine/column.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::snapshot_testing {

namespace fs = std::filesystem;
using gpujoin::testing::HttpGet;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;

// How one test index is built.
struct Kind {
  std::string name;
  v1::KeyType key_type = v1::KEY_TYPE_UINT32;
  v1::DuplicatePolicy duplicates = v1::DUPLICATE_POLICY_LOWEST_ROW;
  uint64_t rows = 500;
  uint64_t key_range = 400;  // distinct keys drawn from
  uint64_t capacity = 0;     // 0 = sized by the server
  uint64_t max_probe_count = 0;
  bool payload = false;
  bool explicit_values = false;
  uint64_t first_value = 0;
  uint64_t seed = 1;
};

inline uint64_t KeyOf(const Kind& k, uint64_t draw) {
  return k.key_type == v1::KEY_TYPE_UINT64 ? (draw * 0x9e3779b97f4a7c15ull) | 1
                                           : uint32_t(draw * 2654435761u + 7);
}

// The build messages of `k`: spec, then two chunks.
inline std::vector<v1::BuildIndexRequest> Messages(const Kind& k) {
  std::mt19937_64 rng(k.seed);
  std::vector<v1::BuildIndexRequest> out(1);
  v1::IndexSpec* spec = out[0].mutable_spec();
  spec->set_name(k.name);
  spec->set_key_type(k.key_type);
  spec->set_duplicates(k.duplicates);
  spec->set_capacity(k.capacity);
  spec->set_max_probe_count(k.max_probe_count);
  spec->set_explicit_values(k.explicit_values);
  spec->set_first_value(k.first_value);
  spec->set_replace(true);
  if (k.payload) {
    const std::pair<const char*, v1::ColumnType> cols[] = {{"i64", v1::COLUMN_TYPE_INT64},
                                                           {"s", v1::COLUMN_TYPE_STRING},
                                                           {"b", v1::COLUMN_TYPE_BOOL},
                                                           {"f", v1::COLUMN_TYPE_FLOAT64}};
    for (const auto& [name, type] : cols) {
      auto* p = spec->add_payload();
      p->set_name(name);
      p->set_type(type);
    }
  }
  const uint64_t half = k.rows / 2;
  for (auto [begin, end] : {std::pair<uint64_t, uint64_t>{0, half}, {half, k.rows}}) {
    v1::BuildIndexRequest m;
    v1::BuildChunk* c = m.mutable_chunk();
    std::vector<uint32_t> k32, values;
    std::vector<uint64_t> k64;
    for (uint64_t r = begin; r < end; ++r) {
      const uint64_t key = KeyOf(k, rng() % k.key_range);
      if (k.key_type == v1::KEY_TYPE_UINT64) {
        k64.push_back(key);
      } else {
        k32.push_back(uint32_t(key));
      }
      values.push_back(uint32_t(rng() % 1000000));
    }
    if (k.key_type == v1::KEY_TYPE_UINT64) {
      *c->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(k64);
    } else {
      *c->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(k32);
    }
    if (k.explicit_values) *c->mutable_values()->mutable_packed() = PackColumn<uint32_t>(values);
    if (k.payload) {
      const uint64_t n = end - begin;
      std::vector<int64_t> i64(n);
      std::string valid(engine::BitmapBytes(n), '\0'), svalid(engine::BitmapBytes(n), '\0'),
          bools(engine::BitmapBytes(n), '\0');
      std::string sbytes;
      std::vector<int32_t> soff{0};
      std::vector<double> f(n);
      for (uint64_t r = 0; r < n; ++r) {
        i64[r] = int64_t(rng());
        if (rng() % 5) valid[r / 8] |= char(1 << (r % 8));
        if (rng() % 4) svalid[r / 8] |= char(1 << (r % 8));
        if (rng() % 2) bools[r / 8] |= char(1 << (r % 8));
        const size_t len = rng() % 9;
        for (size_t i = 0; i < len; ++i) sbytes.push_back(char('a' + rng() % 26));
        soff.push_back(int32_t(sbytes.size()));
        f[r] = double(rng() % 1000) / 3.0;
      }
      auto* a = c->add_payload();
      a->set_name("i64");
      a->set_type(v1::COLUMN_TYPE_INT64);
      a->set_length(n);
      a->set_data(PackColumn<int64_t>(i64));
      a->set_validity(valid);
      auto* s = c->add_payload();
      s->set_name("s");
      s->set_type(v1::COLUMN_TYPE_STRING);
      s->set_length(n);
      s->set_data(sbytes);
      s->set_offsets(PackColumn<int32_t>(soff));
      s->set_validity(svalid);
      auto* b = c->add_payload();
      b->set_name("b");
      b->set_type(v1::COLUMN_TYPE_BOOL);
      b->set_length(n);
      b->set_data(bools);
      auto* fc = c->add_payload();
      fc->set_name("f");
      fc->set_type(v1::COLUMN_TYPE_FLOAT64);
      fc->set_length(n);
      fc->set_data(PackColumn<double>(f));
    }
    out.push_back(std::move(m));
  }
  return out;
}

class SnapshotIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpujoin_snapshots_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  void Start(std::vector<std::string> extra = {}, bool data_dir = true) {
    server_.reset();
    ServerOptions o;
    o.metrics = true;
    if (data_dir) o.extra_args.push_back("--data-dir=" + dir_.string());
    for (auto& e : extra) o.extra_args.push_back(std::move(e));
    server_ = std::make_unique<ServerProcess>(o);
    ASSERT_TRUE(server_->ready()) << server_->log();
    stub_ = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }
  // kill -9: no drain, no chance to finish anything.
  void Kill() { server_->StopWith(SIGKILL); }

  void BuildOk(const Kind& k, v1::IndexInfo* info = nullptr) {
    v1::BuildIndexResponse r;
    const grpc::Status s = testing::Build(*stub_, Messages(k), &r);
    ASSERT_TRUE(s.ok()) << k.name << ": " << s.error_message();
    if (info != nullptr) *info = r.index();
  }

  // Waits (bounded) until the server logged `text`.
  bool WaitForLog(const std::string& text, std::chrono::seconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (server_->log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  static std::string Written(const std::string& name, uint64_t version) {
    return "snapshot of index \"" + name + "\" version " + std::to_string(version) + " written";
  }

  std::string Metrics() { return HttpGet(server_->metrics_address(), "/metrics"); }

  // Everything a lookup and the four join kinds answer for random keys
  // (gathering every payload column), serialised, index versions cleared.
  std::string Answers(const Kind& k, const v1::IndexInfo& info) {
    std::mt19937_64 rng(k.seed + 1000);
    std::vector<uint32_t> q32;
    std::vector<uint64_t> q64;
    for (int i = 0; i < 300; ++i) {
      const uint64_t key = KeyOf(k, rng() % (k.key_range * 2));
      q64.push_back(key);
      q32.push_back(uint32_t(key));
    }
    std::string out;
    {
      grpc::ClientContext ctx;
      auto stream = stub_->Lookup(&ctx);
      v1::LookupRequest r;
      r.set_index(k.name);
      r.set_want_probes(true);
      r.set_want_match_counts(true);
      for (const auto& p : info.payload()) r.add_select(p.name());
      if (k.key_type == v1::KEY_TYPE_UINT64) {
        *r.mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(q64);
      } else {
        *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(q32);
      }
      EXPECT_TRUE(stream->Write(r));
      stream->WritesDone();
      v1::LookupResponse resp;
      while (stream->Read(&resp)) {
        EXPECT_FALSE(resp.has_error()) << resp.error().message();
        resp.clear_index_version();
        out += resp.SerializeAsString();
      }
      EXPECT_TRUE(stream->Finish().ok());
    }
    for (v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                              v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
      grpc::ClientContext ctx;
      auto stream = stub_->Join(&ctx);
      v1::JoinRequest j;
      j.set_index(k.name);
      j.set_kind(kind);
      for (const auto& p : info.payload()) j.add_select(p.name());
      v1::LeftBatch* b = j.add_batches();
      b->set_capacity(300 * 8);
      b->set_want_found(true);
      if (k.key_type == v1::KEY_TYPE_UINT64) {
        *b->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(q64);
      } else {
        *b->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(q32);
      }
      EXPECT_TRUE(stream->Write(j));
      stream->WritesDone();
      v1::JoinResponse resp;
      while (stream->Read(&resp)) {
        resp.clear_index_version();
        out += resp.SerializeAsString();
      }
      const grpc::Status s = stream->Finish();
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return out;
  }

  absl::StatusOr<v1::IndexInfo> Describe(const std::string& name) {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest r;
    r.set_name(name);
    v1::DescribeIndexResponse resp;
    const grpc::Status s = stub_->DescribeIndex(&ctx, r, &resp);
    if (!s.ok()) return absl::Status(absl::StatusCode(s.error_code()), s.error_message());
    return resp.index();
  }

  // What must survive a restart: IndexInfo without versions, times and backend.
  static std::string Durable(v1::IndexInfo info) {
    info.clear_version();
    info.clear_backend();
    info.clear_durable_version();
    return info.SerializeAsString();
  }

  fs::path dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

}  // namespace gpujoin::server::snapshot_testing
