// Bearer-token authentication of GpuJoin calls.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/string_ref.h"

namespace gpujoin::server {

/// Reads the token from `path`: the file's content without surrounding whitespace.
/// FAILED_PRECONDITION when unreadable or empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

/// The whole file a flag names (certificates, keys): FAILED_PRECONDITION
/// naming `flag` and the path when it cannot be read.
absl::StatusOr<std::string> ReadFlagFile(const std::string& path, std::string_view flag);

/// Checks the `authorization: Bearer <token>` metadata of a call against one token,
/// in constant time with respect to the token's content.
class TokenAuthenticator {
 public:
  explicit TokenAuthenticator(std::string token) : token_(std::move(token)) {}

  /// OK, or UNAUTHENTICATED saying whether the metadata was missing, malformed or
  /// carried a wrong token (never echoing the token).
  absl::Status Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;

  /// The same check on the value of an `authorization` metadata entry or HTTP
  /// `Authorization` header (std::nullopt: there was none), for callers outside
  /// the GpuJoin service: guarded reflection and /metrics (--auth-scope=all).
  absl::Status CheckAuthorization(std::optional<std::string_view> value) const;

 private:
  std::string token_;
};

}  // namespace gpujoin::server
