#include "transport/metrics_exposer.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include "CivetServer.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "transport/listen_probe.hpp"

namespace gpujoin::server {
namespace {

// civetweb's callbacks are plain function pointers without user data (the
// context's user data is prometheus-cpp's CivetServer), so the authenticator of
// each guarded civetweb context lives in this registry. init_context runs inside
// mg_start on the thread constructing the Exposer, before any request can be
// served; it takes the authenticator that StartMetricsExposer left in
// t_starting on that thread. exit_context (in mg_stop) removes the entry.
std::mutex g_mu;
std::map<const mg_context*, const TokenAuthenticator*>& Guarded() {
  static auto* guarded = new std::map<const mg_context*, const TokenAuthenticator*>();
  return *guarded;
}
thread_local const TokenAuthenticator* t_starting = nullptr;

void OnInitContext(const mg_context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  Guarded()[ctx] = t_starting;
}

void OnExitContext(const mg_context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  Guarded().erase(ctx);
}

// Returns 0 to let civetweb (prometheus-cpp's handler) serve the request, or
// the status code of the 401 it wrote itself.
int OnBeginRequest(mg_connection* conn) {
  const TokenAuthenticator* auth = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Guarded().find(mg_get_context(conn));
    if (it != Guarded().end()) auth = it->second;
  }
  const char* header = mg_get_header(conn, "Authorization");
  // A context missing from the registry (cannot happen: see above) is refused.
  const absl::Status status =
      auth == nullptr
          ? absl::UnauthenticatedError("no authenticator")
          : auth->CheckAuthorization(header == nullptr ? std::nullopt
                                                       : std::optional<std::string_view>(header));
  if (status.ok()) return 0;
  const std::string body = absl::StrCat("401 Unauthorized: ", status.message(), "\n");
  const std::string response = absl::StrCat(
      "HTTP/1.1 401 Unauthorized\r\n"
      "WWW-Authenticate: Bearer realm=\"gpujoind\"\r\n"
      "Content-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n", body);
  mg_write(conn, response.data(), response.size());
  return 401;
}

}  // namespace

absl::StatusOr<std::unique_ptr<prometheus::Exposer>> StartMetricsExposer(
    const std::string& address, const TokenAuthenticator* auth) {
  CivetCallbacks callbacks;
  if (auth != nullptr) {
    callbacks.init_context = OnInitContext;
    callbacks.exit_context = OnExitContext;
    callbacks.begin_request = OnBeginRequest;
  }
  t_starting = auth;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb copies the callbacks; `callbacks` need not outlive the call.
    exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2,
                                                    auth != nullptr ? &callbacks : nullptr);
  } catch (const std::exception& e) {
    t_starting = nullptr;
    const std::string taken = PortInUse(address);
    if (!taken.empty()) {
      return absl::UnavailableError(absl::StrCat("--metrics-listen: cannot listen on ", address,
                                                 ": ", taken,
                                                 "; choose another with --metrics-listen "
                                                 "HOST:PORT, or none"));
    }
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen: cannot listen on ", address, ": ", e.what()));
  }
  t_starting = nullptr;
  return exposer;
}

}  // namespace gpujoin::server
