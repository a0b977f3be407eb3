#include "transport/auth.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace gpujoin::server {
namespace {

using ::testing::HasSubstr;
using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

TEST(TokenAuthenticator, AcceptsTheBearerToken) {
  TokenAuthenticator auth("s3cret");
  Metadata md = {{"authorization", "Bearer s3cret"}};
  EXPECT_TRUE(auth.Check(md).ok());
  Metadata lower = {{"authorization", "bearer s3cret"}};
  EXPECT_TRUE(auth.Check(lower).ok());
}

TEST(TokenAuthenticator, RejectsMissingMalformedAndWrong) {
  TokenAuthenticator auth("s3cret");
  Metadata none;
  EXPECT_EQ(auth.Check(none).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(auth.Check(none).message(), HasSubstr("missing"));
  Metadata basic = {{"authorization", "Basic s3cret"}};
  EXPECT_EQ(auth.Check(basic).code(), absl::StatusCode::kUnauthenticated);
  Metadata wrong = {{"authorization", "Bearer s3cres"}};
  EXPECT_EQ(auth.Check(wrong).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(auth.Check(wrong).message(), ::testing::Not(HasSubstr("s3cre")));
  Metadata longer = {{"authorization", "Bearer s3cret2"}};
  EXPECT_EQ(auth.Check(longer).code(), absl::StatusCode::kUnauthenticated);
}

// The same check on a bare header value, as /metrics and guarded reflection use it.
TEST(TokenAuthenticator, ChecksAnAuthorizationValue) {
  TokenAuthenticator auth("s3cret");
  EXPECT_TRUE(auth.CheckAuthorization("Bearer s3cret").ok());
  EXPECT_TRUE(auth.CheckAuthorization("BEARER s3cret").ok());
  const absl::Status missing = auth.CheckAuthorization(std::nullopt);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("missing"));
  for (const char* bad : {"", "Bearer", "Bearer ", "Basic czNjcmV0", "Bearer s3cres",
                          "Bearer s3cret ", "Bearers3cret"}) {
    const absl::Status s = auth.CheckAuthorization(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("s3cre"))) << bad;
  }
}

TEST(ReadTokenFile, TrimsWhitespaceAndRejectsEmpty) {
  char path[] = "/tmp/gpujoin_token_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  { std::ofstream(path) << "  tok\n"; }
  auto t = ReadTokenFile(path);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "tok");
  { std::ofstream(path) << "\n"; }
  EXPECT_EQ(ReadTokenFile(path).status().code(), absl::StatusCode::kFailedPrecondition);
  std::remove(path);
  EXPECT_EQ(ReadTokenFile(path).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpujoin::server
