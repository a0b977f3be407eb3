// Index images on the CPU backend (Backend::ExportIndex / ImportIndex):
// export, import and export again give the same bytes; the imported index
// answers every lookup (values, found, probes, match counts, every gathered
// payload byte) like the built one, also on a pool of another size; its
// memory is what ImportedIndexBytes predicted; and Validate refuses every
// inconsistent image before anything is allocated. The CUDA side is
// tests/gpu/index_image_differential_test.cpp.
#include "gpujoin/engine/index_image.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "gpujoin/engine/backend.hpp"
#include "index_image_cases.hpp"

namespace gpujoin::engine::testing {
namespace {

class IndexImageTest : public ::testing::TestWithParam<ImageCase> {
 protected:
  void SetUp() override {
    auto one = CreateBackend(BackendKind::kCpu, BackendOptions{.cpu_threads = 1});
    auto three = CreateBackend(BackendKind::kCpu, BackendOptions{.cpu_threads = 3});
    ASSERT_TRUE(one.ok() && three.ok());
    cpu1_ = std::move(*one);
    cpu3_ = std::move(*three);
  }
  std::unique_ptr<Backend> cpu1_, cpu3_;
};

TEST_P(IndexImageTest, RoundTripAnswersIdentically) {
  const ImageCase c = GetParam();
  const ImageSource source = MakeSource(c);
  auto built = BuildCase(*cpu3_, c, source);
  ASSERT_NE(built, nullptr);
  auto image = cpu3_->ExportIndex(*built);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_TRUE(image->Validate().ok()) << image->Validate();
  EXPECT_EQ(image->statistics, built->build_statistics());
  EXPECT_EQ(image->payload.size(), built->payload().size());

  for (Backend* target : {cpu1_.get(), cpu3_.get()}) {
    auto imported = target->ImportIndex(*image);
    ASSERT_TRUE(imported.ok()) << imported.status();
    const HashIndex& index = **imported;
    EXPECT_EQ(index.build_statistics(), built->build_statistics());
    EXPECT_EQ(index.built_rows(), built->built_rows());
    EXPECT_EQ(index.payload(), built->payload());
    EXPECT_EQ(index.memory_bytes(), built->memory_bytes());
    EXPECT_EQ(ImportedIndexBytes(*target, image->shape()), index.memory_bytes());
    auto again = target->ExportIndex(index);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(ImageDifference(*image, *again), "");
    const auto keys = QueryKeys(c, 700, c.seed + 100);
    EXPECT_TRUE(Lookup(*cpu3_, *built, keys) == Lookup(*target, index, keys));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, IndexImageTest, ::testing::ValuesIn(AllImageCases()),
                         [](const auto& info) { return CaseName(info.param); });

// An image whose parts disagree with its spec, each refused by name.
class IndexImageValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = CreateBackend(BackendKind::kCpu);
    ASSERT_TRUE(b.ok());
    cpu_ = std::move(*b);
    ImageCase c{KeyType::kUint32, DuplicatePolicy::kKeepAll, 64, 0, 40, 20, true, 3};
    source_ = MakeSource(c);
    built_ = BuildCase(*cpu_, c, source_);
  }
  IndexImage Fresh() {
    auto image = cpu_->ExportIndex(*built_);
    EXPECT_TRUE(image.ok());
    return std::move(*image);
  }
  void ExpectRefused(const IndexImage& image, const std::string& what) {
    const absl::Status s = image.Validate();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    auto imported = cpu_->ImportIndex(image);
    EXPECT_TRUE(absl::IsInvalidArgument(imported.status())) << imported.status();
  }
  std::unique_ptr<Backend> cpu_;
  ImageSource source_;
  std::unique_ptr<HashIndex> built_;
};

TEST_F(IndexImageValidateTest, RefusesEveryInconsistency) {
  ASSERT_TRUE(Fresh().Validate().ok());
  {
    IndexImage i = Fresh();
    i.keys = ImageBuffer(8);
    ExpectRefused(i, "keys");
  }
  {
    IndexImage i = Fresh();
    i.values = ImageBuffer(0);
    ExpectRefused(i, "values");
  }
  {
    IndexImage i = Fresh();
    i.group_ranges.as<uint32_t>()[1] = 1000;  // slot 0's group runs past the list
    ExpectRefused(i, "group of slot 0");
  }
  {
    IndexImage i = Fresh();
    i.spec.capacity = 63;
    ExpectRefused(i, "capacity");
  }
  {
    IndexImage i = Fresh();
    auto offsets = i.payload[1].offsets.as<uint64_t>();
    offsets[offsets.size() - 1] += 1;  // ends past its bytes
    ExpectRefused(i, "offsets");
  }
  {
    IndexImage i = Fresh();
    auto offsets = i.payload[1].offsets.as<uint64_t>();
    ASSERT_GT(offsets.size(), 3u);
    std::swap(offsets[1], offsets[2]);
    if (offsets[1] != offsets[2]) ExpectRefused(i, "offsets");
  }
  {
    IndexImage i = Fresh();
    const uint64_t positions = i.shape().positions();
    if (positions % 8 != 0) {
      auto& last = i.payload[0].validity.data()[i.payload[0].validity.size() - 1];
      last = std::byte(uint8_t(last) | 0x80);
      ExpectRefused(i, "bits set past");
    }
  }
  {
    IndexImage i = Fresh();
    i.payload[3].data = ImageBuffer(3);
    ExpectRefused(i, "payload 3 (float64) data");
  }
  {
    IndexImage i = Fresh();
    i.payload[0].validity = ImageBuffer(0);  // says nullable, holds no bitmap
    ExpectRefused(i, "validity");
  }
}

}  // namespace
}  // namespace gpujoin::engine::testing
