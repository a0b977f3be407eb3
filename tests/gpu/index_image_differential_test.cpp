// Index images (issue 23), CUDA vs CPU: for every index kind (both key words and
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

#include "backends.hpp"
#include "gpujoin/engine/backend.hpp"
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

INSTANTIATE_TEST_SUITE_P(Cases, IndexImageDifferentialTest, ::testing::ValuesIn(AllImageCases()),
                         [](const auto& info) { return CaseName(info.param); });

}  // namespace
}  // namespace gpujoin::engine
