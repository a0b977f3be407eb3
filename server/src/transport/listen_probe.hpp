// Names the cause when gpujoind cannot listen on an address because the port
// is taken, so that the start-up error says which port (gRPC's BuildAndStart
// and civetweb only report that listening failed).
#pragma once

#include <string>

namespace gpujoin::server {

/// "port N is already in use" when binding `address` (HOST:PORT, HOST a name,
/// an IPv4 address or a bracketed IPv6 one) fails with EADDRINUSE; "" when the
/// port is free, is 0, or the address cannot be parsed or resolved (the caller
/// keeps its general message then).
std::string PortInUse(const std::string& address);

}  // namespace gpujoin::server
