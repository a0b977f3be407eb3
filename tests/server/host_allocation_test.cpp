// CatchHostAllocation: a host allocation that fails inside a request's work is
// that request's RESOURCE_EXHAUSTED (never an exception that would abort the
// server), naming the work; everything else passes through. RetryHostAllocation:
// the answer's own small allocations wait out a moment's shortage.
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

// When even the message does not fit, the code alone still says it.
TEST(CatchHostAllocation, ANameThatCannotBeAllocatedLeavesTheCodeAlone) {
  const absl::Status s = CatchHostAllocation(
      []() -> std::string { throw std::bad_alloc(); },
      []() -> absl::Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
}

TEST(RetryHostAllocation, RetriesWhileAllocationsFailThenGivesUp) {
  int calls = 0;
  RetryHostAllocation(
      [&] {
        if (++calls < 3) throw std::bad_alloc();
      },
      5, std::chrono::microseconds(1));
  EXPECT_EQ(calls, 3);
  calls = 0;
  EXPECT_THROW(RetryHostAllocation(
                   [&] {
                     ++calls;
                     throw std::bad_alloc();
                   },
                   4, std::chrono::microseconds(1)),
               std::bad_alloc);
  EXPECT_EQ(calls, 4);
}

}  // namespace
}  // namespace gpujoin
