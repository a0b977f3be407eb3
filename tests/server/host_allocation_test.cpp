// CatchHostAllocation: a host allocation that fails inside a request's work is
// that request's RESOURCE_EXHAUSTED (never an exception that would abort the
// server), naming the work; everything else passes through.
#include "gpujoin/common/host_allocation.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpujoin {
namespace {

using ::testing::HasSubstr;

TEST(CatchHostAllocation, PassesStatusesThroughAndNamesTheWorkOnlyOnFailure) {
  int named = 0;
  const auto what = [&named] {
    ++named;
    return std::string("Join batch 2 of the stream");
  };
  EXPECT_TRUE(CatchHostAllocation(what, [] { return absl::OkStatus(); }).ok());
  EXPECT_EQ(CatchHostAllocation(what, [] { return absl::InvalidArgumentError("keys"); }),
            absl::InvalidArgumentError("keys"));
  EXPECT_EQ(named, 0);
}

TEST(CatchHostAllocation, BadAllocIsResourceExhausted) {
  const absl::Status s = CatchHostAllocation([] { return std::string("Join batch 2 of the stream"); },
                                             []() -> absl::Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("Join batch 2 of the stream: a host memory allocation failed"));
  EXPECT_THAT(s.message(), HasSubstr("short of host memory"));
}

TEST(CatchHostAllocation, LengthErrorFromASizeIsResourceExhausted) {
  const absl::Status s = CatchHostAllocation([] { return std::string("Lookup"); }, [] {
    std::vector<uint64_t> v;
    v.resize(v.max_size() + 1);  // throws std::length_error
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("Lookup: a host memory allocation failed (std::length_error"));
}

}  // namespace
}  // namespace gpujoin
