// How the gpujoin C++ client reaches a server (ConnectOptions), and the serving
// state its health check reports (HealthState).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace gpujoin::client {

/// How to reach a gpujoind server.
struct ConnectOptions {
  /// host:port (or any gRPC target such as unix:/path).
  std::string address = "127.0.0.1:50051";
  /// PEM file with the root certificates that sign the server's certificate.
  /// Empty = plaintext (insecure) channel.
  std::string tls_ca_file;
  /// Overrides the name checked against the server certificate (the SNI /
  /// authority), e.g. when connecting to an IP address. Empty = from `address`.
  std::string tls_server_name;
  /// PEM certificate chain and private key that this client presents to a server
  /// requiring client certificates (mutual TLS, gpujoind --tls-client-ca). Both
  /// or neither; they need tls_ca_file (TLS). Empty = no client certificate.
  std::string tls_client_cert_file;
  std::string tls_client_key_file;
  /// Bearer token sent with every call as metadata `authorization: Bearer <token>`.
  /// Empty = no authorization header.
  std::string token;
  /// Default deadline of every call, measured from the call's start (streams
  /// included). Zero = no deadline.
  std::chrono::milliseconds deadline{0};
  /// Largest message the client sends or accepts, in bytes.
  int max_message_bytes = 64 << 20;
  /// Give this client a TCP connection of its own. gRPC otherwise shares one
  /// connection between all channels of a process with the same address and
  /// options, so several clients would not spread load over several connections.
  bool own_connection = false;
};

/// Serving state reported by the grpc.health.v1 health service.
enum class HealthState { kUnknown, kServing, kNotServing, kServiceUnknown };

/// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN".
std::string_view HealthStateName(HealthState state);

}  // namespace gpujoin::client
