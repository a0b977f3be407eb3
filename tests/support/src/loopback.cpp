#include "gpujoin/testing/loopback.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace gpujoin::testing {

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

HttpResponse HttpRequest(const std::string& address, const std::string& path,
                         const std::string& authorization) {
  HttpResponse out;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return out;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) return out;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return out;
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\n";
    if (!authorization.empty()) request += "Authorization: " + authorization + "\r\n";
    request += "\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[8192];
      pollfd p = {fd, POLLIN, 0};
      while (poll(&p, 1, 10000) > 0) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        response.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  const size_t end = response.find("\r\n\r\n");
  if (end == std::string::npos) return out;
  if (response.compare(0, 9, "HTTP/1.1 ") == 0 || response.compare(0, 9, "HTTP/1.0 ") == 0) {
    out.status = std::atoi(response.c_str() + 9);
  }
  out.head = response.substr(0, end);
  out.body = response.substr(end + 4);
  return out;
}

std::string HttpGet(const std::string& address, const std::string& path) {
  return HttpRequest(address, path).body;
}

}  // namespace gpujoin::testing
