// Index images, CUDA vs CPU: for every index kind (both key words and
// duplicate policies, payload of every layout with nulls, a table under 4 slots,
// an empty build, overflow) on fresh random inputs, the CUDA export of a build
// equals the CPU export of the same build byte for byte wherever the build
// contract is deterministic (no overflow; total_probes aside when keys repeat);
// an image exported by either backend imports on the other and answers every
// lookup (values, found, probes, match counts, every gathered byte, outputs
// poisoned first) as the exporting index does; and export(import(image)) is
// the image again on both. Skips visibly without a CUDA device.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <span>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "index_image_cases.hpp"

namespace gpujoin::engine {
namespace {

using testing::AllImageCases;
using testing::BuildCase;
using testing::CaseName;
using testing::ImageCase;
using testing::Lookup;
using testing::MakeSource;
using testing::QueryKeys;

class IndexImageDifferentialTest : public ::testing::TestWithParam<ImageCase> {
 protected:
  void SetUp() override {
    CreateCudaAndCpuBackends(cuda_, cpu_, "index image export/import differential");
  }
  std::unique_ptr<Backend> cuda_, cpu_;
};

TEST_P(IndexImageDifferentialTest, ExportsAgreeAndImportsAnswerAcrossBackends) {
  if (::testing::Test::IsSkipped() || HasFatalFailure()) return;
  const ImageCase c = GetParam();
  const auto source = MakeSource(c);
  auto on_cpu = BuildCase(*cpu_, c, source);
  auto on_cuda = BuildCase(*cuda_, c, source);
  ASSERT_NE(on_cpu, nullptr);
  ASSERT_NE(on_cuda, nullptr);
  auto cpu_image = cpu_->ExportIndex(*on_cpu);
  auto cuda_image = cuda_->ExportIndex(*on_cuda);
  ASSERT_TRUE(cpu_image.ok()) << cpu_image.status();
  ASSERT_TRUE(cuda_image.ok()) << cuda_image.status();
  ASSERT_TRUE(cuda_image->Validate().ok()) << cuda_image->Validate();
  const bool deterministic = on_cpu->build_statistics().overflow_rows == 0;
  if (deterministic) {
    EXPECT_EQ(ImageDifference(*cpu_image, *cuda_image, /*ignore_total_probes=*/true), "");
  }
  const auto keys = QueryKeys(c, 700, c.seed + 7);
  // Each image on each backend answers like the index it came from.
  struct From {
    const IndexImage* image;
    Backend* backend;
    const HashIndex* index;
  };
  for (const From& from : {From{&*cpu_image, cpu_.get(), on_cpu.get()},
                           From{&*cuda_image, cuda_.get(), on_cuda.get()}}) {
    const auto expected = Lookup(*from.backend, *from.index, keys);
    for (Backend* target : {cpu_.get(), cuda_.get()}) {
      SCOPED_TRACE(std::string(BackendKindName(from.index->backend())) + " image on " +
                   std::string(BackendKindName(target->Info().kind)));
      auto imported = target->ImportIndex(*from.image);
      ASSERT_TRUE(imported.ok()) << imported.status();
      EXPECT_EQ((*imported)->build_statistics(), from.index->build_statistics());
      EXPECT_EQ(ImportedIndexBytes(*target, from.image->shape()), (*imported)->memory_bytes());
      EXPECT_TRUE(Lookup(*target, **imported, keys) == expected);
      auto again = target->ExportIndex(**imported);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(ImageDifference(*from.image, *again), "");
    }
  }
}

// Payload records wider than 64 bytes (17 int64 columns: 136 bytes, stride 192,
// which does not divide the 32 MiB staging chunks) over more than one chunk
// (262144 slots x 192 bytes = 48 MiB): no record may be split between chunks.
TEST(IndexImageWideRecords, RecordsAcrossStagingChunks) {
  std::unique_ptr<Backend> cuda, cpu;
  CreateCudaAndCpuBackends(cuda, cpu, "index image wide payload records");
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  constexpr uint64_t kRows = 150000;
  constexpr size_t kColumns = 17;
  std::vector<uint32_t> keys(kRows);
  std::vector<std::vector<int64_t>> columns(kColumns, std::vector<int64_t>(kRows));
  std::mt19937_64 rng(99);
  for (uint64_t r = 0; r < kRows; ++r) {
    keys[r] = uint32_t(r * 2654435761u + 1);
    for (auto& c : columns) c[r] = int64_t(rng());
  }
  std::vector<ColumnView> payload;
  for (const auto& c : columns) {
    payload.push_back(ColumnView{ColumnType::kInt64, kRows, std::as_bytes(std::span(c)), {}, {}});
  }
  HashIndexSpec spec;
  spec.capacity = 1u << 18;
  std::vector<std::unique_ptr<HashIndex>> built;
  for (Backend* b : {cpu.get(), cuda.get()}) {
    auto index = b->CreateIndex(spec);
    ASSERT_TRUE(index.ok()) << index.status();
    CommandGraph graph;
    graph.Add(
        BuildIndexNode{index->get(), {std::span<const uint32_t>(keys)}, {}, 0, nullptr, payload});
    ASSERT_TRUE(b->Run(graph).ok());
    built.push_back(std::move(*index));
  }
  auto cpu_image = cpu->ExportIndex(*built[0]);
  auto cuda_image = cuda->ExportIndex(*built[1]);
  ASSERT_TRUE(cpu_image.ok() && cuda_image.ok());
  EXPECT_EQ(ImageDifference(*cpu_image, *cuda_image), "");
  auto imported = cuda->ImportIndex(*cpu_image);
  ASSERT_TRUE(imported.ok()) << imported.status();
  auto again = cuda->ExportIndex(**imported);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ImageDifference(*cpu_image, *again), "");
}

// Payload records without padding (int64 + float64: 16 bytes, stride 16), where
// the import writes only the values and zeroes only the records past the
// image's positions: a table under 4 slots (the CUDA pad), one over several
// staging chunks (2^22 slots x 16 bytes = 64 MiB), and a keep_all index (its
// records are per kept row). The CPU image imports on CUDA, exports back to
// itself and answers every lookup (every gathered byte) as the CPU index does.
TEST(IndexImageUnpaddedRecords, ImportWritesEveryRecord) {
  std::unique_ptr<Backend> cuda, cpu;
  CreateCudaAndCpuBackends(cuda, cpu, "index image unpadded payload records");
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  struct Shape {
    uint32_t capacity;
    uint64_t rows;
    DuplicatePolicy duplicates;
  };
  for (const Shape& shape : {Shape{2, 2, DuplicatePolicy::kLowestRow},
                             Shape{1u << 22, 1500000, DuplicatePolicy::kLowestRow},
                             Shape{1u << 16, 90000, DuplicatePolicy::kKeepAll}}) {
    SCOPED_TRACE(::testing::Message() << "capacity " << shape.capacity << " rows " << shape.rows
                                      << " " << DuplicatePolicyName(shape.duplicates));
    std::mt19937_64 rng(shape.capacity + shape.rows);
    std::vector<uint32_t> keys(shape.rows);
    std::vector<int64_t> a(shape.rows);
    std::vector<double> b(shape.rows);
    const uint64_t distinct = shape.duplicates == DuplicatePolicy::kKeepAll ? 30000 : shape.rows;
    for (uint64_t r = 0; r < shape.rows; ++r) {
      keys[r] = uint32_t((r % distinct) * 2654435761u + 1);
      a[r] = int64_t(rng());
      b[r] = double(int64_t(rng() >> 11)) / 7;
    }
    const std::vector<ColumnView> payload = {
        ColumnView{ColumnType::kInt64, shape.rows, std::as_bytes(std::span(a)), {}, {}},
        ColumnView{ColumnType::kFloat64, shape.rows, std::as_bytes(std::span(b)), {}, {}}};
    HashIndexSpec spec;
    spec.capacity = shape.capacity;
    spec.duplicates = shape.duplicates;
    auto built = cpu->CreateIndex(spec);
    ASSERT_TRUE(built.ok()) << built.status();
    CommandGraph graph;
    graph.Add(
        BuildIndexNode{built->get(), {std::span<const uint32_t>(keys)}, {}, 0, nullptr, payload});
    ASSERT_TRUE(cpu->Run(graph).ok());
    auto image = cpu->ExportIndex(**built);
    ASSERT_TRUE(image.ok()) << image.status();
    auto imported = cuda->ImportIndex(*image);
    ASSERT_TRUE(imported.ok()) << imported.status();
    auto again = cuda->ExportIndex(**imported);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(ImageDifference(*image, *again), "");
    std::vector<uint64_t> query;
    for (size_t i = 0; i < 5000; ++i)
      query.push_back(i % 3 == 0 ? rng() : keys[rng() % shape.rows]);
    EXPECT_TRUE(Lookup(*cuda, **imported, query) == Lookup(*cpu, **built, query));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, IndexImageDifferentialTest, ::testing::ValuesIn(AllImageCases()),
                         [](const auto& info) { return CaseName(info.param); });

}  // namespace
}  // namespace gpujoin::engine
