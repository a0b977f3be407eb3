// The Prometheus /metrics listener, optionally behind the bearer token
// (--auth-scope=all).
//
// prometheus-cpp's Exposer::RegisterAuth speaks only HTTP Basic auth, but
// Prometheus sends a scrape config's `authorization: credentials_file:` as
// `Authorization: Bearer <token>`. So the token is checked in civetweb's
// begin_request callback (the Exposer passes its CivetCallbacks to civetweb),
// which sees every request before prometheus-cpp's handler does and answers
// 401 itself.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "transport/auth.hpp"

namespace gpujoin::server {

/// Starts an Exposer listening on `address` (host:port; port 0 picks one). With
/// `auth` non-null every HTTP request must carry `Authorization: Bearer <token>`
/// matching it, else it is answered `401 Unauthorized` (with
/// `WWW-Authenticate: Bearer`) and never reaches the metrics handler; `auth` is
/// not owned and must outlive the Exposer. UNAVAILABLE naming --metrics-listen
/// when the address cannot be bound.
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartMetricsExposer(
    const std::string& address, const TokenAuthenticator* auth);

}  // namespace gpujoin::server
