// MemoryBudget (reservations, shrink, resize) and the accounting of builds
// through it (BuildSession on the CPU backend): the table bytes come from
// Backend::IndexBytes, the build's transient bytes from BuildTransientBytes
// (here from a CPU backend wrapped to report some, since the CPU build needs
// none), reserved for the build's duration and given back when it is done.
#include "state/memory_budget.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "build_messages.hpp"
#include "wire/column_codec.hpp"
#include "ops/operations.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::Iota;
using gpujoin::server::testing::SpecMsg;

using ::testing::HasSubstr;

TEST(MemoryBudget, ReserveAndReleaseOnDestruction) {
  MemoryBudget budget(1000);
  {
    auto r = budget.Reserve(600, "index \"a\"");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->bytes(), 600u);
    EXPECT_EQ(budget.used_bytes(), 600u);
  }
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, RefusalChangesNothingAndSaysWhy) {
  MemoryBudget budget(1000);
  auto a = budget.Reserve(700, "index \"a\"");
  ASSERT_TRUE(a.ok());
  auto b = budget.Reserve(301, "index \"b\"");
  ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("index \"b\" needs 301 bytes"));
  EXPECT_THAT(b.status().message(), HasSubstr("700 of the 1000 byte budget"));
  EXPECT_EQ(budget.used_bytes(), 700u);
  EXPECT_TRUE(budget.Reserve(300, "index \"c\"").ok());  // exactly fits (then released)
}

// The pending response budget (--max-pending-response-bytes) is a MemoryBudget
// whose observer keeps gpujoin_pending_response_bytes: it hears every change,
// in order, and a refusal names the bytes held, the limit and the flag.
TEST(MemoryBudget, ObserverHearsEveryChangeAndRefusalNamesTheFlag) {
  MemoryBudget budget(100, "pending response budget", "--max-pending-response-bytes");
  std::vector<uint64_t> heard;
  budget.SetObserver([&heard](uint64_t used) { heard.push_back(used); });
  {
    auto a = budget.Reserve(60, "its response");
    ASSERT_TRUE(a.ok());
    auto b = budget.Reserve(50, "its response");
    ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(b.status().message(),
                HasSubstr("pending response budget exceeded: its response needs 50 bytes but 60 "
                          "of the 100 byte budget are in use (40 available; see "
                          "--max-pending-response-bytes)"));
    auto c = budget.Reserve(40, "its response");  // exactly fits
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(budget.used_bytes(), 100u);
    a->Release();
    c->ShrinkTo(10);
  }
  EXPECT_EQ(budget.used_bytes(), 0u);
  // Set (0), the two reservations, the release, the shrink, the last release.
  EXPECT_EQ(heard, (std::vector<uint64_t>{0, 60, 100, 40, 10, 0}));
}

// A response larger than --max-pending-response-bytes is sent when it is alone:
// granted only while nothing else is reserved, and while it holds the budget
// everything else is refused (the bytes in use never pass the larger of the
// limit and that one reservation).
TEST(MemoryBudget, ReserveOrAloneGrantsOneOversizedReservationOnlyWhenAlone) {
  MemoryBudget budget(100, "pending response budget", "--max-pending-response-bytes");
  {
    auto small = budget.ReserveOrAlone(10, "its response");
    ASSERT_TRUE(small.ok());
    auto big = budget.ReserveOrAlone(150, "its response");
    ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(big.status().message(), HasSubstr("needs 150 bytes but 10 of the 100"));
  }
  auto big = budget.ReserveOrAlone(150, "its response");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(budget.used_bytes(), 150u);
  for (const bool alone : {false, true}) {
    const auto refused = alone ? budget.ReserveOrAlone(1, "its response")
                               : budget.Reserve(1, "its response");
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(refused.status().message(),
                HasSubstr("150 of the 100 byte budget are in use (0 available"));
  }
  big->Release();
  EXPECT_TRUE(budget.Reserve(100, "its response").ok());
}

TEST(MemoryBudget, MoveTransfersOwnership) {
  MemoryBudget budget(100);
  auto r = budget.Reserve(40, "x");
  ASSERT_TRUE(r.ok());
  MemoryBudget::Reservation moved = std::move(*r);
  EXPECT_EQ(budget.used_bytes(), 40u);
  MemoryBudget::Reservation other;
  other = std::move(moved);
  EXPECT_EQ(budget.used_bytes(), 40u);
  other.Release();
  other.Release();  // idempotent
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, ShrinkGivesBackTheDifferenceOnly) {
  MemoryBudget budget(100);
  auto r = budget.Reserve(60, "x");
  ASSERT_TRUE(r.ok());
  r->ShrinkTo(80);  // larger: no change
  EXPECT_EQ(budget.used_bytes(), 60u);
  r->ShrinkTo(25);
  EXPECT_EQ(r->bytes(), 25u);
  EXPECT_EQ(budget.used_bytes(), 25u);
  r->Release();
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, ResizeGrowsWhenItFitsAndShrinksAlways) {
  MemoryBudget budget(1000);
  auto other = budget.Reserve(300, "index \"other\"");
  ASSERT_TRUE(other.ok());
  auto r = budget.Reserve(100, "index \"a\"");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->Resize(700, "index \"a\"").ok());  // exactly fits beside the other 300
  EXPECT_EQ(r->bytes(), 700u);
  EXPECT_EQ(budget.used_bytes(), 1000u);
  ASSERT_TRUE(r->Resize(50, "index \"a\"").ok());
  EXPECT_EQ(r->bytes(), 50u);
  EXPECT_EQ(budget.used_bytes(), 350u);
  r->Release();
  EXPECT_EQ(budget.used_bytes(), 300u);
}

TEST(MemoryBudget, ResizeRefusalNamesNeededUsedAndBudgetAndChangesNothing) {
  MemoryBudget budget(1000);
  auto other = budget.Reserve(300, "index \"other\"");
  ASSERT_TRUE(other.ok());
  auto r = budget.Reserve(100, "index \"a\"");
  ASSERT_TRUE(r.ok());
  const absl::Status s = r->Resize(701, "index \"a\" (build)");
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  // Needed: the whole new size; used: what the other reservations hold.
  EXPECT_THAT(s.message(), HasSubstr("index \"a\" (build) needs 701 bytes"));
  EXPECT_THAT(s.message(), HasSubstr("300 of the 1000 byte budget are in use (700 available"));
  EXPECT_EQ(r->bytes(), 100u);
  EXPECT_EQ(budget.used_bytes(), 400u);
}

TEST(MemoryBudget, ResizeOfAnEmptyReservationIsAPreconditionError) {
  MemoryBudget::Reservation r;
  EXPECT_EQ(r.Resize(10, "x").code(), absl::StatusCode::kFailedPrecondition);
  MemoryBudget budget(100);
  auto held = budget.Reserve(10, "x");
  ASSERT_TRUE(held.ok());
  held->Release();
  EXPECT_EQ(held->Resize(10, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, ReservationMayOutliveTheBudgetObject) {
  MemoryBudget::Reservation r;
  {
    MemoryBudget budget(10);
    r = std::move(*budget.Reserve(5, "x"));
  }
  r.Release();  // the shared state is still alive: no crash
  EXPECT_EQ(r.bytes(), 0u);
}

// The CPU backend, reporting `fixed + per_row x rows` transient bytes for every
// build (the CPU build itself needs none) and recording the budget's use while
// each build runs.
class TransientReportingBackend : public engine::Backend {
 public:
  TransientReportingBackend(uint64_t fixed, uint64_t per_row)
      : inner_(testing::CpuBackend()), fixed_(fixed), per_row_(per_row) {}

  void Watch(const MemoryBudget* budget) { budget_ = budget; }
  /// budget.used_bytes() seen inside each Run, in order.
  const std::vector<uint64_t>& used_during_runs() const { return used_during_runs_; }

  engine::BackendInfo Info() const override { return inner_->Info(); }
  absl::StatusOr<std::unique_ptr<engine::HashIndex>> CreateIndex(
      const engine::HashIndexSpec& spec) override {
    return inner_->CreateIndex(spec);
  }
  uint64_t IndexBytes(const engine::HashIndexSpec& spec) const override {
    return inner_->IndexBytes(spec);
  }
  uint64_t BuildTransientBytes(const engine::HashIndexSpec& spec,
                               const engine::BuildShape& shape) const override {
    EXPECT_EQ(inner_->BuildTransientBytes(spec, shape), 0u);
    return shape.rows == 0 ? 0 : fixed_ + per_row_ * shape.rows;
  }
  uint64_t PayloadBytes(const engine::HashIndexSpec& spec,
                        std::span<const engine::PayloadShape> payload,
                        uint64_t rows) const override {
    return inner_->PayloadBytes(spec, payload, rows);
  }
  absl::Status Run(const engine::CommandGraph& graph) override {
    if (budget_ != nullptr) used_during_runs_.push_back(budget_->used_bytes());
    return inner_->Run(graph);
  }

 private:
  std::unique_ptr<engine::Backend> inner_;
  uint64_t fixed_, per_row_;
  const MemoryBudget* budget_ = nullptr;
  std::vector<uint64_t> used_during_runs_;
};

// Operations over a TransientReportingBackend (100 + 20 bytes per row) and a
// budget of `limit` bytes.
class BuildBudgetTest : public ::testing::Test {
 protected:
  void Start(uint64_t limit, uint64_t fixed = 100, uint64_t per_row = 20,
             ServerConfig config = {}, uint64_t staging_limit = 1 << 30) {
    backend_ = std::make_unique<TransientReportingBackend>(fixed, per_row);
    budget_ = std::make_unique<MemoryBudget>(limit);
    staging_ = std::make_unique<MemoryBudget>(staging_limit, "build staging budget",
                                              "--max-staged-bytes");
    backend_->Watch(budget_.get());
    ServiceState s;
    s.backend = backend_.get();
    s.backend_info = backend_->Info();
    s.registry = &registry_;
    s.budget = budget_.get();
    s.staging = staging_.get();
    s.metrics = &metrics_;
    s.config = std::move(config);
    ops_ = std::make_unique<Operations>(std::move(s));
  }

  absl::StatusOr<std::shared_ptr<const IndexVersion>> Build(
      std::vector<v1::BuildIndexRequest> messages) {
    BuildSession session(ops_.get());
    for (auto& m : messages) {
      absl::Status s = session.Add(std::move(m));
      last_staged_ = session.staged_bytes();
      if (!s.ok()) return s;
    }
    std::atomic<bool> cancelled{false};
    return session.Finish(cancelled);
  }

  // The value `key` maps to in index `name` (kEmptyKey when missing).
  uint32_t LookupOne(const std::string& name, uint32_t key) {
    v1::LookupRequest req;
    req.set_index(name);
    *req.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{key});
    v1::LookupResponse resp;
    const absl::Status s = ops_->Lookup(req, &resp);
    EXPECT_TRUE(s.ok()) << s;
    const auto values = UnpackColumn<uint32_t>(resp.values());
    return values.size() == 1 ? values[0] : 0xdeadbeefu;
  }

  std::unique_ptr<TransientReportingBackend> backend_;
  IndexRegistry registry_;
  std::unique_ptr<MemoryBudget> budget_;
  std::unique_ptr<MemoryBudget> staging_;
  Metrics metrics_;
  std::unique_ptr<Operations> ops_;
  uint64_t last_staged_ = 0;  // session.staged_bytes() after Build's last Add
};

TEST_F(BuildBudgetTest, ExactTableBytesPerSpecOnTheCpuBackend) {
  Start(1 << 24, 0, 0);
  uint64_t expected = 0;
  for (uint32_t capacity : {1u, 16u, 1024u, 1u << 16}) {
    const std::string name = "c" + std::to_string(capacity);
    auto built = Build({SpecMsg(name, capacity), ChunkMsg({1})});
    ASSERT_TRUE(built.ok()) << built.status();
    expected += uint64_t{capacity} * 8;  // one 8-byte key:value slot each
    EXPECT_EQ((*built)->index->memory_bytes(), uint64_t{capacity} * 8);
    EXPECT_EQ((*built)->reservation.bytes(), uint64_t{capacity} * 8);
    EXPECT_EQ(budget_->used_bytes(), expected) << name;
  }
}

TEST_F(BuildBudgetTest, BuildReservesTableAndTransientThenKeepsTheTable) {
  Start(1 << 20);
  BuildSession session(ops_.get());
  ASSERT_TRUE(session.Add(SpecMsg("t", 1024)).ok());
  // Sized by the spec: the table is reserved before any rows arrive.
  EXPECT_EQ(budget_->used_bytes(), 1024u * 8);
  ASSERT_TRUE(session.Add(ChunkMsg(Iota(300))).ok());
  // From the first chunk: the transient memory of a build of the rows so far and
  // the staged input (here: the packed keys) count too.
  const uint64_t staged1 = session.staged_bytes();
  EXPECT_GE(staged1, 300u * 4);
  EXPECT_EQ(budget_->used_bytes(), 1024u * 8 + 100 + 20 * 300 + staged1);
  EXPECT_EQ(staging_->used_bytes(), staged1);
  ASSERT_TRUE(session.Add(ChunkMsg(Iota(200, 1000))).ok());
  const uint64_t staged = session.staged_bytes();
  EXPECT_GE(staged, staged1 + 200 * 4);
  EXPECT_EQ(budget_->used_bytes(), 1024u * 8 + 100 + 20 * 500 + staged);
  std::atomic<bool> cancelled{false};
  auto built = session.Finish(cancelled);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(backend_->used_during_runs().size(), 1u);
  EXPECT_EQ(backend_->used_during_runs()[0], 1024u * 8 + 100 + 20 * 500 + staged);
  EXPECT_EQ(budget_->used_bytes(), 1024u * 8);
  EXPECT_EQ((*built)->reservation.bytes(), 1024u * 8);
  EXPECT_EQ(session.staged_bytes(), 0u);
  EXPECT_EQ(staging_->used_bytes(), 0u);
}

TEST_F(BuildBudgetTest, AutoSizedBuildReservesOnceTheRowsAreKnown) {
  Start(1 << 20);
  BuildSession session(ops_.get());
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("auto");
  ASSERT_TRUE(session.Add(std::move(spec)).ok());
  EXPECT_EQ(budget_->used_bytes(), 0u);  // nothing known yet
  ASSERT_TRUE(session.Add(ChunkMsg(Iota(100))).ok());
  const uint64_t staged = session.staged_bytes();
  // Sized from the rows so far: 100 rows at load 0.5 take 256 slots.
  EXPECT_EQ(budget_->used_bytes(), 256u * 8 + 100 + 20 * 100 + staged);
  std::atomic<bool> cancelled{false};
  auto built = session.Finish(cancelled);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->index->spec().capacity, 256u);  // 100 rows at load 0.5
  EXPECT_EQ(backend_->used_during_runs().at(0), 256u * 8 + 100 + 20 * 100 + staged);
  EXPECT_EQ(budget_->used_bytes(), 256u * 8);
}

TEST_F(BuildBudgetTest, ExpectedRowsReserveTheExpectedBuildUpFront) {
  Start(1 << 20);
  BuildSession session(ops_.get());
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("sized");
  spec.mutable_spec()->set_expected_rows(1000);
  ASSERT_TRUE(session.Add(std::move(spec)).ok());
  EXPECT_EQ(budget_->used_bytes(), 2048u * 8 + 100 + 20 * 1000);
  ASSERT_TRUE(session.Add(ChunkMsg(Iota(10))).ok());
  // A chunk within the expected build keeps the reservation made for it.
  EXPECT_EQ(budget_->used_bytes(), 2048u * 8 + 100 + 20 * 1000);
  const uint64_t staged = session.staged_bytes();
  std::atomic<bool> cancelled{false};
  ASSERT_TRUE(session.Finish(cancelled).ok());
  // The build that ran had 10 rows: the reservation followed the real shape.
  EXPECT_EQ(backend_->used_during_runs().at(0), 2048u * 8 + 100 + 20 * 10 + staged);
  EXPECT_EQ(budget_->used_bytes(), 2048u * 8);
}

TEST_F(BuildBudgetTest, ExpectedRowsThatDoNotFitAreRefusedBeforeAnyData) {
  Start(20000);
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("big");
  spec.mutable_spec()->set_expected_rows(1000);  // 16384 table + 20100 transient
  BuildSession session(ops_.get());
  const absl::Status s = session.Add(std::move(spec));
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("index \"big\" (capacity 2048: 16384 table bytes + 20100 "
                                     "transient bytes for the build of 1000 rows + 0 bytes of "
                                     "staged input) needs 36484 bytes but 0 of the 20000 byte "
                                     "budget are in use"));
  EXPECT_EQ(budget_->used_bytes(), 0u);
}

// Regression for the budget that counted only a guessed table size: a rebuild
// whose table fits but whose build's transient memory does not is refused before
// anything is allocated, naming needed, used and budget bytes, and the old
// version keeps serving with the budget unchanged.
TEST_F(BuildBudgetTest, RebuildWhoseTransientMemoryDoesNotFitKeepsTheOldVersion) {
  // Old 1024-slot table (8192) + new one (8192) fit in 20000; + 100 + 20 x 500 does not.
  Start(20000);
  auto first = Build({SpecMsg("k", 1024), ChunkMsg({7, 8, 9})});
  ASSERT_TRUE(first.ok()) << first.status();
  first->reset();
  ASSERT_EQ(budget_->used_bytes(), 8192u);

  // Refused at the chunk, before Finish: its staged bytes count as well.
  auto refused = Build({SpecMsg("k", 1024, {.replace = true}), ChunkMsg(Iota(500, 100))});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat(
                  "chunks[0]: device memory budget exceeded: index \"k\" (capacity 1024: 8192 "
                  "table bytes + 10100 transient bytes for the build of 500 rows + ",
                  last_staged_, " bytes of staged input) needs ", 18292 + last_staged_,
                  " bytes but 8192 of the 20000 byte budget are in use (11808 available")));
  EXPECT_EQ(backend_->used_during_runs().size(), 1u);  // the refused build never ran
  EXPECT_EQ(registry_.Get("k")->version, 1u);
  EXPECT_EQ(LookupOne("k", 8), 1u);  // generated value: row 1
  EXPECT_EQ(budget_->used_bytes(), 8192u);

  // With fewer rows the same rebuild fits (8192 + 8192 + 100 + 20 x 100 <= 20000),
  // and afterwards only the new table is held.
  auto rebuilt = Build({SpecMsg("k", 1024, {.replace = true}), ChunkMsg(Iota(100, 100))});
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(backend_->used_during_runs().back(), 8192u + 8192u + 100 + 2000 + last_staged_);
  rebuilt->reset();
  EXPECT_EQ(registry_.Get("k")->version, 2u);
  EXPECT_EQ(LookupOne("k", 150), 50u);
  EXPECT_EQ(budget_->used_bytes(), 8192u);
}

// An auto-sized build is refused at the first chunk whose rows no
// longer fit (table for the rows so far + transient + staged), not after every
// chunk has been staged; nothing stays reserved afterwards.
TEST_F(BuildBudgetTest, AutoSizedBuildIsRefusedAtTheChunkThatNoLongerFits) {
  Start(38000, 0, 0);
  BuildSession session(ops_.get());
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("grows");
  ASSERT_TRUE(session.Add(std::move(spec)).ok());
  absl::Status s;
  int chunk = 0;
  for (; chunk < 100 && s.ok(); ++chunk) s = session.Add(ChunkMsg(Iota(500, 1 + 500 * chunk)));
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // 1000 rows take 2048 slots (16 KiB) + ~4 KiB staged; 1500 take 4096 (32 KiB),
  // which with the staged keys exceeds 38000 bytes: the third chunk is refused.
  EXPECT_EQ(chunk, 3);
  EXPECT_THAT(s.message(), HasSubstr("chunks[2]: device memory budget exceeded: index \"grows\" "
                                     "(capacity 4096: 32768 table bytes"));
  EXPECT_EQ(backend_->used_during_runs().size(), 0u);  // no build ran
  EXPECT_LE(budget_->used_bytes(), 38000u);
  session = BuildSession(ops_.get());
  EXPECT_EQ(budget_->used_bytes(), 0u);
  EXPECT_EQ(staging_->used_bytes(), 0u);
}

// --max-build-staged-bytes bounds one build's input; the chunk that would cross
// it is refused naming the flag and the numbers.
TEST_F(BuildBudgetTest, OneBuildsStagedInputIsBoundedByItsFlag) {
  ServerConfig config;
  config.max_build_staged_bytes = 6000;
  Start(1 << 24, 0, 0, config);
  BuildSession session(ops_.get());
  ASSERT_TRUE(session.Add(SpecMsg("p", 1 << 12)).ok());
  ASSERT_TRUE(session.Add(ChunkMsg(Iota(1000))).ok());  // ~4 KiB
  const uint64_t first = session.staged_bytes();
  const absl::Status s = session.Add(ChunkMsg(Iota(1000, 5000)));
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("chunks[1]: the build of index \"p\" would hold "));
  EXPECT_THAT(s.message(), HasSubstr("above --max-build-staged-bytes=6000"));
  EXPECT_EQ(session.staged_bytes(), first);  // the refused chunk was not kept
  EXPECT_EQ(staging_->used_bytes(), first);
}

// The host staging budget (--max-staged-bytes) is shared by every open build: a
// second build that would cross it is refused, and the bytes come back when a
// build finishes or is abandoned.
TEST_F(BuildBudgetTest, StagedInputOfAllOpenBuildsSharesTheStagingBudget) {
  Start(1 << 24, 0, 0, {}, 10000);
  auto a = std::make_unique<BuildSession>(ops_.get());
  BuildSession b(ops_.get());
  ASSERT_TRUE(a->Add(SpecMsg("a", 1 << 12)).ok());
  ASSERT_TRUE(b.Add(SpecMsg("b", 1 << 12)).ok());
  ASSERT_TRUE(a->Add(ChunkMsg(Iota(1500))).ok());  // ~6 KiB
  const absl::Status s = b.Add(ChunkMsg(Iota(1500)));
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("build staging budget exceeded: chunks[0] of the build of "
                                     "index \"b\""));
  EXPECT_THAT(s.message(), HasSubstr("of the 10000 byte budget are in use"));
  EXPECT_THAT(s.message(), HasSubstr("see --max-staged-bytes"));
  EXPECT_EQ(staging_->used_bytes(), a->staged_bytes());
  a.reset();  // an abandoned build gives its staged bytes back
  EXPECT_EQ(staging_->used_bytes(), 0u);
  BuildSession c(ops_.get());
  ASSERT_TRUE(c.Add(SpecMsg("c", 1 << 12)).ok());
  ASSERT_TRUE(c.Add(ChunkMsg(Iota(1500))).ok());
  std::atomic<bool> cancelled{false};
  ASSERT_TRUE(c.Finish(cancelled).ok());
  EXPECT_EQ(staging_->used_bytes(), 0u);
  EXPECT_EQ(budget_->used_bytes(), 2 * (1u << 12) * 8);  // c's table, and b's reserved one
}

}  // namespace
}  // namespace gpujoin::server
