// Loopback networking for tests: a free TCP port, and a bare HTTP/1.0 GET.
#pragma once

#include <string>

namespace gpujoin::testing {

/// A loopback TCP port that nothing listened on a moment ago (for "nobody is
/// listening here" tests; servers under test bind port 0 instead).
int FreePort();

/// GET http://<address><path> (address is `IPV4:PORT`) over HTTP/1.0 and returns the
/// body; "" when the address does not parse, the connection fails or there is no
/// header/body separator. Waits at most 10 s for each read.
/// The answer to an HTTP GET: its status (0 when nothing parseable came back),
/// its head (status line and headers) and its body.
struct HttpResponse {
  int status = 0;
  std::string head, body;
};

/// GET http://<address><path> over HTTP/1.0 with an optional Authorization header.
HttpResponse HttpRequest(const std::string& address, const std::string& path,
                         const std::string& authorization = "");

std::string HttpGet(const std::string& address, const std::string& path);

}  // namespace gpujoin::testing
