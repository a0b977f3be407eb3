// gRPC server reflection behind the bearer token (--auth-scope=all).
//
// Why this shape: a grpc::experimental server interceptor cannot end a call
// (server interceptors cannot hijack: the handler runs whatever the interceptor
// saw), and an AuthMetadataProcessor only runs on secure server credentials
// (InsecureServerCredentials refuses one) and would gate health checks too. A
// generic service works the same under insecure and TLS credentials: the main
// server leaves the reflection service out (its builder drops gRPC's reflection
// plugin), so reflection calls find no registered method and reach this generic
// service. It checks the token and relays an admitted call, message for message
// and with its final status, to gRPC's own reflection service on a small
// in-process server that registers placeholders of the main server's services
// (reflection lists service names from the server it runs on; the descriptors
// come from the process's generated pool either way).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "transport/auth.hpp"

namespace gpujoin::server {

class ReflectionGuard final : public grpc::CallbackGenericService {
 public:
  /// Starts the in-process reflection server. `described`: services registered
  /// there only so that reflection lists their names (never called; generated
  /// base classes do). grpc.health.v1.Health is listed too when
  /// grpc::EnableDefaultHealthCheckService(true) was called before. `auth` is not
  /// owned and must outlive this object. INTERNAL when the server cannot start.
  static absl::StatusOr<std::unique_ptr<ReflectionGuard>> Start(
      const TokenAuthenticator* auth, std::vector<std::unique_ptr<grpc::Service>> described);
  /// Shuts the in-process server down; the main server must be shut down first.
  ~ReflectionGuard() override;

  /// Prepares the main server's builder: registers this generic service and
  /// drops gRPC's reflection plugin from it.
  void AddTo(grpc::ServerBuilder* builder);

  /// A call that no service of the main server has: `/grpc.reflection.*`
  /// methods with the bearer token are relayed (without the caller's metadata,
  /// with its deadline); without it they end UNAUTHENTICATED (the
  /// TokenAuthenticator's message); other methods UNIMPLEMENTED.
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  ReflectionGuard(const TokenAuthenticator* auth,
                  std::vector<std::unique_ptr<grpc::Service>> described);

  const TokenAuthenticator* auth_;
  std::vector<std::unique_ptr<grpc::Service>> described_;
  std::unique_ptr<grpc::Server> inner_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

}  // namespace gpujoin::server
