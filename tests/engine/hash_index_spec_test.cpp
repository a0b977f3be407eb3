// HashIndexSpec validation and CapacityForRows (the bytes of a table: index_memory_test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::engine {
namespace {

using ::testing::HasSubstr;

TEST(HashIndexSpecTest, CapacityMustBeAPositivePowerOfTwo) {
  for (uint32_t bad : {0u, 3u, 6u, 1000u, 0x80000001u, 0xffffffffu}) {
    const absl::Status s = (HashIndexSpec{bad, 0}).Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("capacity"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(std::to_string(bad)));
  }
  for (uint32_t good : {1u, 2u, 1024u, 0x80000000u}) {
    EXPECT_TRUE((HashIndexSpec{good, 0}).Validate().ok()) << good;
  }
}

TEST(HashIndexSpecTest, ProbeBound) {
  EXPECT_EQ((HashIndexSpec{64, 0}).probe_bound(), 64u);
  EXPECT_EQ((HashIndexSpec{64, 8}).probe_bound(), 8u);
  EXPECT_TRUE((HashIndexSpec{64, 64}).Validate().ok());
  const absl::Status s = HashIndexSpec{64, 65}.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_probe_count 65 exceeds capacity 64"));
}

TEST(HashIndexSpecTest, CapacityForRows) {
  EXPECT_EQ(*CapacityForRows(0, 0.5), 1u);
  EXPECT_EQ(*CapacityForRows(1, 1.0), 1u);
  EXPECT_EQ(*CapacityForRows(1000, 0.5), 2048u);
  EXPECT_EQ(*CapacityForRows(1024, 0.5), 2048u);
  EXPECT_EQ(*CapacityForRows(1025, 1.0), 2048u);
  EXPECT_EQ(*CapacityForRows(uint64_t{1} << 31, 1.0), 0x80000000u);
  EXPECT_EQ(CapacityForRows((uint64_t{1} << 31) + 1, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CapacityForRows(10, 0.0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CapacityForRows(10, 1.5).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HashIndexSpecTest, BackendRejectsABadSpec) {
  auto backend = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(backend.ok());
  auto index = (*backend)->CreateIndex(HashIndexSpec{12, 0});
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(index.status().message()), HasSubstr("capacity"));
}

TEST(BackendFactoryTest, CpuInfoAndKinds) {
  auto backend = CreateBackend(BackendKind::kCpu, BackendOptions{3});
  ASSERT_TRUE(backend.ok());
  const BackendInfo info = (*backend)->Info();
  EXPECT_EQ(info.kind, BackendKind::kCpu);
  EXPECT_FALSE(info.device_name.empty());
  EXPECT_GT(info.memory_total_bytes, 0u);
  EXPECT_LE(info.memory_free_bytes, info.memory_total_bytes);
  EXPECT_EQ(info.parallelism, 3u);
  EXPECT_TRUE((*backend)->Healthy());
  EXPECT_EQ(*ParseBackendKind("cpu"), BackendKind::kCpu);
  EXPECT_EQ(ParseBackendKind("gpu").status().code(), absl::StatusCode::kInvalidArgument);
  auto automatic = CreateBackend(BackendKind::kAuto);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ((*automatic)->Info().kind,
            CudaDeviceAvailable() ? BackendKind::kCuda : BackendKind::kCpu);
  if (!CudaDeviceAvailable()) {
    EXPECT_EQ(CreateBackend(BackendKind::kCuda).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace gpujoin::engine
