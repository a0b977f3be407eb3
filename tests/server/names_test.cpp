#include "wire/names.hpp"

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

// Regression: "." and ".." matched the alphabet and were
// accepted as index names.
TEST(IndexNames, RejectsDotAndDotDotNamingTheField) {
  for (const char* reserved : {".", ".."}) {
    auto s = ValidateIndexName(reserved, "spec.name");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << reserved;
    EXPECT_THAT(s.message(), HasSubstr("spec.name"));
    EXPECT_THAT(s.message(), HasSubstr("reserved"));
  }
  // Other names made of dots, or with dots inside, stay valid.
  for (const char* ok : {"...", ".a", "a..", "a.b", "_."}) {
    EXPECT_TRUE(ValidateIndexName(ok, "name").ok()) << ok;
  }
}

// Invalid UTF-8 (a lone continuation byte, a truncated sequence, an encoded
// surrogate, 0xff) is refused at its first byte, like every non-ASCII byte.
TEST(IndexNames, RejectsInvalidUtf8AtTheFirstBadByte) {
  EXPECT_THAT(ValidateIndexName("ab\x80", "index").message(), HasSubstr("0x80 at position 2"));
  EXPECT_THAT(ValidateIndexName("a\xc3(", "index").message(), HasSubstr("0xc3 at position 1"));
  EXPECT_THAT(ValidateIndexName("\xed\xa0\x80", "index").message(),
              HasSubstr("0xed at position 0"));
  auto s = ValidateIndexName("x\xff", "index");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("index: index name has character 0xff at position 1"));
}

}  // namespace
}  // namespace gpujoin::server
