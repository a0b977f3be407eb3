// SnapshotStore's start-up load (LoadAll) on a backend that cannot hold a
// snapshot's index (its import is UNIMPLEMENTED, as the CUDA backend's was for
// key schemas before it held them): that snapshot must fail alone, logged with
// its reason (unsupported) and what the backend said, its memory given back
// and its file left in place, while the other snapshots load. The backend is
// the CPU backend, reporting itself as CUDA and refusing key schemas.
#include "storage/snapshot_store.hpp"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gpujoin/engine/backend.hpp"
#include "index_image_cases.hpp"
#include "prometheus/registry.h"
#include "state/index_registry.hpp"
#include "state/memory_budget.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {
namespace {

namespace et = engine::testing;
using ::testing::HasSubstr;

// The CPU backend, reporting itself as CUDA and refusing key schemas as the
// CUDA backend did before it held them.
class NoKeySchemaBackend : public engine::Backend {
 public:
  explicit NoKeySchemaBackend(std::unique_ptr<engine::Backend> cpu) : cpu_(std::move(cpu)) {}

  engine::BackendInfo Info() const override {
    engine::BackendInfo info = cpu_->Info();
    info.kind = engine::BackendKind::kCuda;
    return info;
  }
  absl::StatusOr<std::unique_ptr<engine::HashIndex>> CreateIndex(
      const engine::HashIndexSpec& spec) override {
    if (spec.key_type == engine::KeyType::kColumns) {
      return absl::UnimplementedError("the cuda backend does not hold indexes keyed by columns");
    }
    return cpu_->CreateIndex(spec);
  }
  uint64_t IndexBytes(const engine::HashIndexSpec& spec) const override {
    return cpu_->IndexBytes(spec);
  }
  uint64_t BuildTransientBytes(const engine::HashIndexSpec& spec,
                               const engine::BuildShape& shape) const override {
    return cpu_->BuildTransientBytes(spec, shape);
  }
  uint64_t PayloadBytes(const engine::HashIndexSpec& spec,
                        std::span<const engine::PayloadShape> payload,
                        uint64_t rows) const override {
    return cpu_->PayloadBytes(spec, payload, rows);
  }
  absl::Status Run(const engine::CommandGraph& graph) override { return cpu_->Run(graph); }
  absl::StatusOr<engine::IndexImage> ExportIndex(const engine::HashIndex& index) const override {
    return cpu_->ExportIndex(index);
  }
  absl::StatusOr<std::unique_ptr<engine::HashIndex>> ImportIndex(
      const engine::IndexImage& image) override {
    if (image.spec.key_type == engine::KeyType::kColumns) {
      return absl::UnimplementedError(
          "import: the cuda backend does not hold indexes keyed by columns yet");
    }
    return cpu_->ImportIndex(image);
  }

 private:
  std::unique_ptr<engine::Backend> cpu_;
};

TEST(SnapshotStoreTest, ASnapshotTheBackendCannotHoldIsSkippedAtStart) {
  auto cpu = engine::CreateBackend(engine::BackendKind::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("gpujoin_snapshot_store_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // Written by the CPU backend: a key-schema index and an integer one.
  for (const auto& [name, c] : {std::pair{"keys", et::KeyColumnImageCases()[1]},
                                std::pair{"ints", et::AllImageCases()[1]}}) {
    const et::ImageSource source = et::MakeSource(c);
    auto index = et::BuildCase(**cpu, c, source);
    auto image = (*cpu)->ExportIndex(*index);
    ASSERT_TRUE(image.ok()) << image.status();
    SnapshotMeta meta;
    meta.name = name;
    meta.payload_names.resize(image->payload.size(), "p");
    meta.key_column_names = {"s", "i"};
    meta.key_column_names.resize(image->key_columns.size());
    const std::string path = (dir / (std::string(name) + ".gjsnap")).string();
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(WriteSnapshot(fd, meta, *image).ok());
    ::close(fd);
  }

  NoKeySchemaBackend backend(std::move(*cpu));
  MemoryBudget budget(uint64_t{1} << 30);
  prometheus::Registry metrics;
  SnapshotStoreOptions options;
  options.data_dir = dir.string();
  auto store = SnapshotStore::Open(options, &backend, &budget, metrics);
  ASSERT_TRUE(store.ok()) << store.status();
  IndexRegistry registry;
  ::testing::internal::CaptureStderr();
  const WarmStartReport report = (*store)->LoadAll(registry, [](const IndexVersion&) {});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(report.loaded, 1u);
  EXPECT_EQ(report.skipped, 1u);
  EXPECT_THAT(log, HasSubstr("snapshot \"keys.gjsnap\" skipped (unsupported): snapshot "
                             "\"keys.gjsnap\": the cuda backend cannot import it: import: the "
                             "cuda backend does not hold indexes keyed by columns yet"));
  EXPECT_EQ(registry.Get("keys"), nullptr);
  const auto ints = registry.Get("ints");
  ASSERT_NE(ints, nullptr);
  // Only the loaded index holds memory; the refused one's file stays.
  EXPECT_EQ(budget.used_bytes(), ints->index->memory_bytes());
  EXPECT_TRUE(std::filesystem::exists(dir / "keys.gjsnap"));
  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpujoin::server
