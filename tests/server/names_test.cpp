#include "gpujoin/server/names.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpujoin::server {
namespace {

using ::testing::HasSubstr;

TEST(IndexNames, AcceptsTheAllowedAlphabet) {
  EXPECT_TRUE(ValidateIndexName("orders", "name").ok());
  EXPECT_TRUE(ValidateIndexName("A-z_0.9", "name").ok());
  EXPECT_TRUE(ValidateIndexName(std::string(128, 'x'), "name").ok());
}

TEST(IndexNames, RejectsEmptyNamingTheField) {
  auto s = ValidateIndexName("", "spec.name");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("spec.name"));
  EXPECT_THAT(s.message(), HasSubstr("empty"));
}

TEST(IndexNames, RejectsTooLong) {
  auto s = ValidateIndexName(std::string(129, 'x'), "index");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("129 characters"));
}

TEST(IndexNames, RejectsOtherCharactersWithPosition) {
  for (const char* bad : {"a b", "a/b", "ä", "a\nb", "a:b", "a*"}) {
    auto s = ValidateIndexName(bad, "name");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ValidateIndexName("ab/c", "name").message(), HasSubstr("0x2f at position 2"));
}

}  // namespace
}  // namespace gpujoin::server
