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
std::string HttpGet(const std::string& address, const std::string& path);

}  // namespace gpujoin::testing
