// Durable mutations through a real gpujoind with --data-dir: batches
// acknowledged durable survive a restart (replayed from the write-ahead log
// onto the snapshot), also across growth and under every --wal-sync mode; the
// log is compacted past --wal-compact-bytes; a torn tail is dropped; a record
// damaged in the middle keeps the index from being served and leaves its files;
// kill -9 at random moments under mutation load keeps every acknowledged batch
// and never half of one (a few runs here; GPUJOIN_MUTATE_KILL_RUNS sets how
// many, the slow suite runs 50).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "build_messages.hpp"
#include "raw_stub_test.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class MutateDurabilityTest : public RawStubTest {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("gpujoin_mutate_durability_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> extra = {}) {
    extra.push_back("--data-dir=" + dir_.string());
    server_.reset();
    StartServer(std::move(extra), false);
  }

  // Index "m": uint32 keys, explicit values, capacity 16 (it grows), built
  // durable with keys 1..4 -> 10..40.
  void BuildIndex() {
    v1::BuildIndexRequest spec = testing::SpecMsg("m", 16);
    spec.mutable_spec()->set_explicit_values(true);
    spec.mutable_spec()->set_wait_durable(true);
    v1::BuildIndexRequest chunk = testing::ChunkMsg({1, 2, 3, 4});
    *chunk.mutable_chunk()->mutable_values()->mutable_packed() =
        PackColumn<uint32_t>(std::vector<uint32_t>{10, 20, 30, 40});
    const grpc::Status s = Build({spec, chunk});
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  static v1::MutateRequest Upsert(const std::vector<uint32_t>& keys,
                                  const std::vector<uint32_t>& values) {
    v1::MutateRequest r;
    r.set_index("m");
    *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
    *r.mutable_values()->mutable_packed() = PackColumn<uint32_t>(values);
    return r;
  }
  static v1::MutateRequest Delete(const std::vector<uint32_t>& keys) {
    v1::MutateRequest r;
    r.set_index("m");
    *r.mutable_delete_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
    return r;
  }

  static v1::MutateResponse MutateOn(v1::GpuJoin::Stub& stub, const v1::MutateRequest& r) {
    grpc::ClientContext ctx;
    auto stream = stub.Mutate(&ctx);
    v1::MutateResponse resp;
    if (!stream->Write(r) || !stream->WritesDone() || !stream->Read(&resp)) {
      resp.mutable_error()->set_code(14);
      resp.mutable_error()->set_message("stream broken");
    }
    (void)stream->Finish();
    return resp;
  }
  v1::MutateResponse MutateOne(const v1::MutateRequest& r) { return MutateOn(*stub_, r); }

  // The values of `keys` in "m" (0xffffffff where missing).
  std::vector<uint32_t> ValuesOf(const std::vector<uint32_t>& keys) {
    const auto out = Lookups({testing::LookupMsg("m", keys)});
    if (out.size() != 1 || out[0].has_error()) return {};
    return UnpackColumn<uint32_t>(out[0].values());
  }

  fs::path dir_;
};

TEST_F(MutateDurabilityTest, AcknowledgedBatchesSurviveARestartAcrossGrowth) {
  for (const char* sync : {"always", "batch-ms:5", "off"}) {
    SCOPED_TRACE(sync);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Start({absl::StrCat("--wal-sync=", sync)});
    BuildIndex();
    std::vector<uint32_t> keys, want;
    for (uint32_t k = 100; k < 160; ++k) {
      const v1::MutateResponse r = MutateOne(Upsert({k, 1}, {k * 3, k}));
      ASSERT_FALSE(r.has_error()) << r.error().message();
      EXPECT_EQ(r.durable(), std::string(sync) != "off");
      keys.push_back(k);
      want.push_back(k * 3);
    }
    ASSERT_FALSE(MutateOne(Delete({2, 101})).has_error());
    want[1] = 0xffffffffu;
    keys.insert(keys.end(), {1, 2, 3});
    want.insert(want.end(), {159, 0xffffffffu, 30});
    const v1::IndexInfo before = Describe("m");
    EXPECT_EQ(before.mutation_sequence(), 61u);
    EXPECT_GT(before.rehashes(), 0u);
    ASSERT_EQ(ValuesOf(keys), want);
    // SIGKILL: nothing but what the log and the snapshot hold survives.
    server_->StopWith(SIGKILL);
    Start({absl::StrCat("--wal-sync=", sync)});
    EXPECT_EQ(ValuesOf(keys), want);
    const v1::IndexInfo after = Describe("m");
    EXPECT_EQ(after.mutation_sequence(), 61u);
    EXPECT_EQ(after.capacity(), before.capacity());
    EXPECT_EQ(after.statistics().unique_keys(), before.statistics().unique_keys());
    // And it goes on taking batches after the replay.
    ASSERT_FALSE(MutateOne(Upsert({7}, {70})).has_error());
    EXPECT_EQ(Describe("m").mutation_sequence(), 62u);
  }
}

TEST_F(MutateDurabilityTest, TheLogIsCompactedPastTheLimitAndRestartsFromTheNewSnapshot) {
  Start({"--wal-compact-bytes=4K"});
  BuildIndex();
  std::vector<uint32_t> keys, want;
  for (uint32_t i = 0; i < 300; ++i) {
    const uint32_t k = 1000 + i % 50;
    ASSERT_FALSE(MutateOne(Upsert({k}, {i})).has_error());
    if (i < 50) keys.push_back(k);
    want.resize(keys.size());
    want[i % 50] = i;
  }
  const uint64_t log_bytes = fs::file_size(dir_ / "m.gjwal");
  EXPECT_LT(log_bytes, 16u * 1024) << "the log was never compacted";
  server_->StopWith(SIGKILL);
  Start({"--wal-compact-bytes=4K"});
  EXPECT_EQ(ValuesOf(keys), want);
  EXPECT_EQ(Describe("m").mutation_sequence(), 300u);
}

TEST_F(MutateDurabilityTest, ATornTailIsDroppedAndAMiddleCorruptionKeepsTheIndexOut) {
  Start();
  BuildIndex();
  for (uint32_t i = 0; i < 5; ++i) ASSERT_FALSE(MutateOne(Upsert({50 + i}, {i})).has_error());
  server_->StopWith(SIGKILL);
  const fs::path log = dir_ / "m.gjwal";
  const uintmax_t size = fs::file_size(log);
  // A torn tail: half of a record's header.
  {
    std::ofstream out(log, std::ios::binary | std::ios::app);
    out << std::string("GJWR\x10\x00\x00\x00garbage", 15);
  }
  Start();
  EXPECT_EQ(ValuesOf({50, 54}), (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(Describe("m").mutation_sequence(), 5u);
  EXPECT_EQ(fs::file_size(log), size) << "the torn tail is truncated away";
  server_->StopWith(SIGKILL);
  // A flipped byte in the payload of the second record.
  {
    std::fstream f(log, std::ios::binary | std::ios::in | std::ios::out);
    const std::streamoff second = 16 + (std::streamoff(size) - 16) / 5 + 45;
    f.seekg(second);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(second);
    f.write(&c, 1);
  }
  Start();
  grpc::ClientContext ctx;
  v1::DescribeIndexRequest req;
  req.set_name("m");
  v1::DescribeIndexResponse resp;
  EXPECT_EQ(stub_->DescribeIndex(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(server_->log(), HasSubstr("is not served"));
  EXPECT_TRUE(fs::exists(log));
  EXPECT_TRUE(fs::exists(dir_ / "m.gjsnap"));
}

// kill -9 while a client mutates: batch i upserts keys 10000 + 10 i .. + 9
// with value i. After the restart every acknowledged batch is there, and any
// batch that is there at all is there whole.
TEST_F(MutateDurabilityTest, KillNineUnderLoadKeepsEveryAcknowledgedBatchWhole) {
  const char* env = std::getenv("GPUJOIN_MUTATE_KILL_RUNS");
  const int runs = env != nullptr ? std::atoi(env) : 3;
  std::mt19937_64 rng(11);
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Start();
    BuildIndex();
    std::atomic<uint32_t> acknowledged{0};
    std::atomic<bool> stop{false};
    constexpr uint32_t kBatches = 400;
    std::thread writer([&] {
      auto stub = NewStub(*server_);
      for (uint32_t i = 0; i < kBatches && !stop.load(); ++i) {
        std::vector<uint32_t> keys, values(10, i);
        for (uint32_t j = 0; j < 10; ++j) keys.push_back(10000 + 10 * i + j);
        const v1::MutateResponse r = MutateOn(*stub, Upsert(keys, values));
        if (r.has_error()) return;
        acknowledged = i + 1;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 300));
    server_->StopWith(SIGKILL);
    stop = true;
    writer.join();
    const uint32_t acked = acknowledged.load();
    Start();
    std::vector<uint32_t> keys;
    for (uint32_t k = 10000; k < 10000 + 10 * kBatches; ++k) keys.push_back(k);
    const std::vector<uint32_t> values = ValuesOf(keys);
    ASSERT_EQ(values.size(), keys.size());
    uint32_t present = 0;
    for (uint32_t i = 0; i < kBatches; ++i) {
      int found = 0;
      for (uint32_t j = 0; j < 10; ++j) found += values[10 * i + j] == i ? 1 : 0;
      ASSERT_TRUE(found == 0 || found == 10) << "batch " << i << " is half there (" << found << ")";
      if (found == 10) present = i + 1;
    }
    EXPECT_GE(present, acked);
    EXPECT_LE(present, acked + 1) << "batches are sent one at a time";
    for (uint32_t i = 0; i < present; ++i) {
      EXPECT_EQ(values[10 * i], i) << "batch " << i << " below the last present one is missing";
    }
    EXPECT_EQ(Describe("m").mutation_sequence(), present);
  }
}

}  // namespace
}  // namespace gpujoin::server
