#include "transport/auth.hpp"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpujoin::server {
namespace {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // The length of the expected token is not secret; its content is.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth-token-file: cannot read \"", path, "\""));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--auth-token-file: \"", path, "\" holds no token"));
  }
  return token;
}

absl::Status TokenAuthenticator::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return CheckAuthorization(std::nullopt);
  return CheckAuthorization(std::string_view(it->second.data(), it->second.size()));
}

absl::Status TokenAuthenticator::CheckAuthorization(std::optional<std::string_view> value) const {
  if (!value.has_value()) {
    return absl::UnauthenticatedError(
        "missing \"authorization\" metadata (expected \"Bearer <token>\")");
  }
  constexpr std::string_view kScheme = "bearer ";
  if (value->size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(value->data(), kScheme.size()),
                              absl::string_view(kScheme.data(), kScheme.size()))) {
    return absl::UnauthenticatedError(
        "\"authorization\" metadata is not a bearer token (expected \"Bearer <token>\")");
  }
  if (!ConstantTimeEquals(value->substr(kScheme.size()), token_)) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFlagFile(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(std::string(flag), ": cannot read \"", path, "\""));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gpujoin::server
