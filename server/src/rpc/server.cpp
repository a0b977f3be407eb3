#include "gpujoin/server/server.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/backend.hpp"
#include "transport/auth.hpp"
#include "rpc/executor.hpp"
#include "state/index_registry.hpp"
#include "gpujoin/server/logging.hpp"
#include "state/memory_budget.hpp"
#include "observe/metrics.hpp"
#include "ops/operations.hpp"
#include "rpc/service.hpp"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "transport/metrics_exposer.hpp"
#include "prometheus/exposer.h"
#include "transport/reflection_guard.hpp"
#include "storage/mutation_logs.hpp"
#include "storage/snapshot_store.hpp"
#include "transport/listen_probe.hpp"

namespace gpujoin::server {
namespace {


std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

constexpr const char* kServiceName = "gpujoin.v1.GpuJoin";
// Threads of the control executor (unary calls: cheap registry and info work).
constexpr size_t kControlThreads = 2;

}  // namespace

struct Server::Impl {
  ServerConfig config;
  std::unique_ptr<engine::Backend> backend;
  engine::BackendInfo info;
  IndexRegistry registry;
  std::unique_ptr<MemoryBudget> budget;
  std::unique_ptr<MemoryBudget> staging;
  Metrics metrics;
  // Stream responses waiting to be written; its observer sets a gauge of
  // `metrics`, which outlives it (the reservations go with the reactors and the
  // executor tasks, before either).
  std::unique_ptr<MemoryBudget> pending_responses;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Executor> control;  // unary (control) calls
  std::unique_ptr<InflightLimiter> limiter;
  std::unique_ptr<TokenAuthenticator> auth;
  std::unique_ptr<Operations> ops;
  // --data-dir's write-ahead logs (null without it); destroyed after the
  // snapshot store, whose writer calls it.
  std::unique_ptr<MutationLogs> mutation_logs;
  // --data-dir's snapshots (null without it); destroyed before the registry and
  // the backend, after finishing its pending writes.
  std::unique_ptr<SnapshotStore> snapshots;
  std::unique_ptr<GpuJoinService> service;
  // Reflection behind the token (--auth-scope=all); outlives grpc_server.
  std::unique_ptr<ReflectionGuard> reflection_guard;
  std::unique_ptr<grpc::Server> grpc_server;
  std::string grpc_address;
  std::string metrics_address;
  std::atomic<bool> fatal{false};
  std::atomic<bool> shut_down{false};
  std::atomic<bool> draining{false};

  void SetServing(bool serving) {
    service->SetServing(serving);
    metrics.SetServing(serving);
    if (grpc_server != nullptr && grpc_server->GetHealthCheckService() != nullptr) {
      grpc_server->GetHealthCheckService()->SetServingStatus(serving);
    }
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Shutdown();
  // Stop the listeners explicitly, in this order, so that teardown is observable.
  impl_->exposer.reset();
  LogDebug("metrics exporter stopped");
  impl_->grpc_server.reset();
  LogDebug("gRPC server destroyed");
}

namespace {

// The engine backend config.backend names.
absl::Status StartBackend(Server::Impl& s, const ServerConfig& config) {
  engine::BackendOptions options = config.backend_options;
  options.cpu_threads = config.cpu_threads;
  if (config.devices.size() == 1) options.cuda_device = config.devices[0];
  auto backend = engine::CreateBackend(config.backend, options);
  if (!backend.ok()) return backend.status();
  s.backend = std::move(*backend);
  s.info = s.backend->Info();
  if (config.devices.size() == 1 && !config.listen.empty() &&
      s.info.kind == engine::BackendKind::kCpu) {
    LogWarning(absl::StrCat("--devices ", config.devices[0],
                            ": one device number selects a CUDA device; the cpu backend serves "
                            "the host (two or more numbers make host devices)"));
  }
  if (config.backend == engine::BackendKind::kAuto && s.info.kind == engine::BackendKind::kCpu) {
    // Operators must see at a glance that no GPU is serving (also in gpujoin_backend_info).
    LogWarning(
        "no usable CUDA device found (or this build has no CUDA backend): "
        "serving on the CPU backend");
  }

  return absl::OkStatus();
}

// The memory budget (--device-memory-limit or its default) and the host
// budgets; returns `config` with their defaults resolved.
ServerConfig StartBudgets(Server::Impl& s, const ServerConfig& config) {
  uint64_t limit = config.device_memory_limit;
  if (limit == 0) {
    // CUDA: 80% of the free device memory. CPU: half of the free host memory, so
    // that the process itself (request buffers, staging, gRPC) keeps room.
    limit = s.info.kind == engine::BackendKind::kCpu ? s.info.memory_free_bytes / 2
                                                     : s.info.memory_free_bytes / 5 * 4;
  }
  if (s.info.memory_total_bytes != 0 && limit > s.info.memory_total_bytes) {
    LogWarning(absl::StrCat("--device-memory-limit ", limit, " exceeds the device's ",
                            s.info.memory_total_bytes, " bytes"));
  }
  s.budget = std::make_unique<MemoryBudget>(limit);
  const ServerConfig resolved = ResolveHostLimits(config, PhysicalMemoryBytes(), 1);
  s.staging = std::make_unique<MemoryBudget>(resolved.max_staged_bytes, "build staging budget",
                                             "--max-staged-bytes");
  s.pending_responses =
      std::make_unique<MemoryBudget>(resolved.max_pending_response_bytes,
                                     "pending response budget", "--max-pending-response-bytes");
  s.metrics.SetPendingResponseLimit(resolved.max_pending_response_bytes);
  s.pending_responses->SetObserver(
      [metrics = &s.metrics](uint64_t used) { metrics->SetPendingResponseBytes(used); });
  LogInfo(absl::StrCat("memory budget ", limit,
                       " bytes; build input staged in host memory: ", resolved.max_staged_bytes,
                       " bytes in all, ", resolved.max_build_staged_bytes,
                       " per build; results of one request: ", resolved.max_result_bytes,
                       " bytes; responses waiting to be written: ",
                       resolved.max_pending_response_bytes, " bytes"));

  return resolved;
}

// The bearer token of --auth-token-file, if any.
absl::Status StartAuth(Server::Impl& s, const ServerConfig& config) {
  if (!config.auth_token_file.empty()) {
    auto token = ReadTokenFile(config.auth_token_file);
    if (!token.ok()) return token.status();
    s.auth = std::make_unique<TokenAuthenticator>(*token);
  }
  if (s.auth == nullptr) {
    LogInfo("auth: none (no --auth-token-file): every call is accepted");
  } else {
    LogInfo(config.auth_scope == AuthScope::kAll ? "auth: bearer token required on gpujoin.v1.GpuJoin calls, reflection and "
                       "/metrics (--auth-scope=all); grpc.health.v1 stays open"
                     : "auth: bearer token required on gpujoin.v1.GpuJoin calls "
                       "(--auth-scope=rpc); grpc.health.v1, reflection and /metrics stay open");
  }

  return absl::OkStatus();
}

// The executors and the in-flight limiter, --data-dir's store, the operations
// and the service. `resolved`: the configuration with its defaults resolved.
absl::Status StartOperations(Server::Impl& s, const ServerConfig& config, ServerConfig resolved) {
  const uint32_t threads =
      ResolveExecutorThreads(config, s.info.kind, std::thread::hardware_concurrency());
  const uint32_t inline_rows = ResolveInlineBatchRows(config, s.info.kind);
  if (s.info.kind == engine::BackendKind::kCuda && config.inline_batch_rows > 0) {
    LogWarning(absl::StrCat("--inline-batch-rows ", config.inline_batch_rows,
                            " ignored: the cuda backend never runs batches on gRPC threads"));
  }
  s.executor = std::make_unique<Executor>(threads);
  s.control = std::make_unique<Executor>(kControlThreads);
  LogInfo(absl::StrCat("executor: ", threads, " threads; Lookup/Join batches of at most ",
                       inline_rows, " rows run on the gRPC thread"));
  s.limiter = std::make_unique<InflightLimiter>(config.max_inflight_batches);

  ServiceState state;
  state.backend = s.backend.get();
  state.backend_info = s.info;
  state.registry = &s.registry;
  state.budget = s.budget.get();
  state.staging = s.staging.get();
  state.pending_responses = s.pending_responses.get();
  state.metrics = &s.metrics;
  state.config = resolved;
  state.config.executor_threads = threads;
  state.config.inline_batch_rows = inline_rows;
  Server::Impl* raw = &s;
  // A device group's part says which device it is.
  const std::string whose =
      config.shard.sharded() && config.devices.size() == 1
          ? absl::StrCat(" (device ", config.devices[0], ", part ", config.shard.index, " of ",
                         config.shard.count, ")")
          : std::string();
  state.on_backend_fatal = [raw, whose] {
    if (!raw->fatal.exchange(true)) {
      LogError(absl::StrCat("fatal device error", whose,
                            ": the backend is unhealthy; reporting NOT_SERVING"));
      raw->SetServing(false);
    }
  };
  if (!config.data_dir.empty()) {
    SnapshotStoreOptions snapshot_options;
    snapshot_options.data_dir = config.data_dir;
    snapshot_options.max_bytes = config.max_snapshot_bytes;
    snapshot_options.max_copy_bytes = config.max_copy_bytes;
    snapshot_options.test_write_delay_ms = config.snapshot_test_write_delay_ms;
    snapshot_options.test_load_delay_ms = config.snapshot_test_load_delay_ms;
    auto store =
        SnapshotStore::Open(snapshot_options, s.backend.get(), s.budget.get(), *s.metrics.registry());
    if (!store.ok()) return store.status();
    s.snapshots = *std::move(store);
    state.snapshots = s.snapshots.get();
    MutationLogs::Options log_options;
    log_options.data_dir = config.data_dir;
    log_options.policy = config.wal_sync;
    log_options.max_record_bytes = config.max_message_bytes;
    log_options.compact_bytes = config.wal_compact_bytes;
    s.mutation_logs = std::make_unique<MutationLogs>(log_options, *s.metrics.registry());
    state.mutation_logs = s.mutation_logs.get();
    s.snapshots->SetOnWritten([logs = s.mutation_logs.get()](const IndexVersion& v,
                                                             uint64_t sequence) {
      logs->SnapshotWritten(v, sequence);
    });
    LogInfo(absl::StrCat("snapshots: --data-dir \"", config.data_dir, "\"",
                         config.max_snapshot_bytes == 0
                             ? std::string()
                             : absl::StrCat(", at most ", config.max_snapshot_bytes, " bytes")));
  } else {
    LogInfo("snapshots: off (no --data-dir): indexes do not survive a restart");
  }
  s.ops = std::make_unique<Operations>(std::move(state));
  s.service = std::make_unique<GpuJoinService>(s.ops.get(), s.executor.get(), s.control.get(),
                                               s.limiter.get(), s.auth.get());

  return absl::OkStatus();
}

// The service's gauges and the /metrics exporter (behind the token when
// `auth_all`).
absl::Status StartMetrics(Server::Impl& s, const ServerConfig& config, bool auth_all) {
  s.metrics.SetBackendInfo(engine::BackendKindName(s.info.kind), s.info.device_name);
  s.metrics.SetBuildInfo(GPUJOIN_VERSION, engine::BackendKindName(s.info.kind), s.info.device_name);
  s.metrics.SetServing(true);
  s.ops->UpdateServiceGauges();
  if (!config.metrics_listen.empty() && config.metrics_listen != "none") {
    auto exposer = StartMetricsExposer(config.metrics_listen, auth_all ? s.auth.get() : nullptr);
    if (!exposer.ok()) return exposer.status();
    s.exposer = *std::move(exposer);
    s.exposer->RegisterCollectable(s.metrics.registry());
    const auto ports = s.exposer->GetListeningPorts();
    s.metrics_address =
        absl::StrCat(HostOf(config.metrics_listen), ":", ports.empty() ? 0 : ports.front());
  }

  return absl::OkStatus();
}

// TLS (--tls-cert, --tls-key, --tls-client-ca) or plaintext. `has_auth`: a
// bearer token is required (a warning without TLS).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(const ServerConfig& config,
                                                                         bool has_auth) {
  if (!config.tls_cert.empty()) {
    auto cert = ReadFlagFile(config.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadFlagFile(config.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({*key, *cert});
    if (config.tls_client_ca.empty()) {
      LogInfo("TLS: on (--tls-cert); clients are not asked for certificates");
    } else {
      auto ca = ReadFlagFile(config.tls_client_ca, "--tls-client-ca");
      if (!ca.ok()) return ca.status();
      if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--tls-client-ca: \"", config.tls_client_ca, "\" holds no PEM certificate"));
      }
      // The handshake fails for a client without a certificate or with one that
      // does not chain to these roots: no call of it reaches any service.
      tls.pem_root_certs = *std::move(ca);
      tls.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      LogInfo(absl::StrCat("TLS: mutual (--tls-client-ca): clients must present a ",
                           "certificate signed by \"", config.tls_client_ca, "\""));
    }
    return grpc::SslServerCredentials(tls);
  } else {
    LogInfo("TLS: off (plaintext)");
    if (has_auth) {
      LogWarning("--auth-token-file without TLS: bearer tokens travel in cleartext");
    }
  }
  return grpc::InsecureServerCredentials();

}

// The gRPC server on --listen: the service, health, reflection (behind the
// token when `auth_all`).
absl::Status StartGrpc(Server::Impl& s, const ServerConfig& config,
                       std::shared_ptr<grpc::ServerCredentials> credentials, bool auth_all) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (auth_all) {
    std::vector<std::unique_ptr<grpc::Service>> described;
    described.push_back(std::make_unique<v1::GpuJoin::CallbackService>());
    auto guard = ReflectionGuard::Start(s.auth.get(), std::move(described));
    if (!guard.ok()) return guard.status();
    s.reflection_guard = *std::move(guard);
    s.reflection_guard->AddTo(&builder);
  }
  int port = 0;
  // gRPC sets SO_REUSEPORT by default: a second gpujoind on a taken port would
  // start and share it, answering half of the connections. Refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  const bool in_process = config.listen.empty();
  if (!in_process) builder.AddListeningPort(config.listen, std::move(credentials), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  builder.RegisterService(s.service.get());
  s.grpc_server = builder.BuildAndStart();
  if (in_process) {
    if (s.grpc_server == nullptr) return absl::InternalError("cannot start an in-process server");
    s.grpc_address = "in-process";
    return absl::OkStatus();
  }
  if (s.grpc_server == nullptr || port == 0) {
    const std::string taken = PortInUse(config.listen);
    if (!taken.empty()) {
      return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", config.listen, ": ",
                                                 taken,
                                                 " (another gpujoind?); choose another with "
                                                 "--listen HOST:PORT"));
    }
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot listen on ", config.listen, " (address in use or invalid)"));
  }
  s.grpc_address = absl::StrCat(HostOf(config.listen), ":", port);
  return absl::OkStatus();
}

// Start-up, after the snapshots are loaded: every index's write-ahead log is
// replayed onto it. An index whose log is damaged in the middle (or whose
// records do not apply) is not served: it is logged loudly and its files stay
// for an operator (docs/operations.md, "Write-ahead log format").
void ReplayMutationLogs(Server::Impl& s) {
  for (const std::shared_ptr<const IndexVersion>& v : s.registry.List()) {
    const absl::Status replayed = s.mutation_logs->Replay(
        *v, [&](const v1::MutateRequest& r) { return s.ops->ReplayMutation(*v, r); });
    if (replayed.ok()) {
      const IndexReadLock read(*v);
      s.metrics.SetIndex(*v);
      continue;
    }
    LogError(absl::StrCat("index \"", v->name, "\" is not served: ", replayed.message(),
                          ". Its snapshot and write-ahead log stay in --data-dir as they are: "
                          "repair or delete the log (docs/operations.md, \"Write-ahead log "
                          "format\"), then restart"));
    (void)s.registry.Remove(v->name);
    s.metrics.RemoveIndex(v->name);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.config = config;
  GPUJOIN_RETURN_IF_ERROR(StartBackend(s, config));
  ServerConfig resolved = StartBudgets(s, config);
  GPUJOIN_RETURN_IF_ERROR(StartAuth(s, config));
  const bool auth_all = s.auth != nullptr && config.auth_scope == AuthScope::kAll;
  GPUJOIN_RETURN_IF_ERROR(StartOperations(s, config, std::move(resolved)));
  GPUJOIN_RETURN_IF_ERROR(StartMetrics(s, config, auth_all));
  GPUJOIN_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                           MakeCredentials(config, s.auth != nullptr));
  GPUJOIN_RETURN_IF_ERROR(StartGrpc(s, config, std::move(credentials), auth_all));
  if (s.snapshots != nullptr) {
    // Readiness: listening, health NOT_SERVING and every call but GetServerInfo
    // UNAVAILABLE until every snapshot is loaded (docs/operations.md).
    s.SetServing(false);
    s.grpc_server->GetHealthCheckService()->SetServingStatus(kServiceName, false);
    s.service->SetLoading(true);
    s.snapshots->LoadAll(s.registry, [&s](const IndexVersion& v) { s.metrics.SetIndex(v); });
    ReplayMutationLogs(s);
    s.ops->UpdateServiceGauges();
    s.service->SetLoading(false);
  }
  s.SetServing(true);
  s.grpc_server->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::string Server::grpc_address() const { return impl_->grpc_address; }

std::shared_ptr<grpc::Channel> Server::InProcessChannel() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return impl_->grpc_server->InProcessChannel(args);
}

std::shared_ptr<prometheus::Registry> Server::metrics_registry() const {
  return impl_->metrics.registry();
}
std::string Server::metrics_address() const { return impl_->metrics_address; }

std::string Server::backend_description() const {
  const auto& i = impl_->info;
  return absl::StrCat("backend=", std::string(engine::BackendKindName(i.kind)), " device=\"",
                      i.device_name, "\" memory_total_bytes=", i.memory_total_bytes,
                      " budget_bytes=", impl_->budget->limit_bytes(),
                      " parallelism=", i.parallelism);
}

void Server::Poll() {
  Impl& s = *impl_;
  if (s.shut_down.load()) return;
  if (!s.backend->Healthy() && s.ops->state().on_backend_fatal) s.ops->state().on_backend_fatal();
  s.ops->UpdateServiceGauges();
}

void Server::BeginDrain() {
  Impl& s = *impl_;
  if (s.draining.exchange(true)) return;
  s.SetServing(false);
  s.grpc_server->GetHealthCheckService()->SetServingStatus(kServiceName, false);
  s.service->BeginDrain();
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.shut_down.exchange(true)) return;
  LogInfo("draining: refusing new calls, finishing open streams");
  BeginDrain();
  // Keep listening, NOT_SERVING, for the grace period: a load balancer's health
  // probe sees it and stops sending new work before the listener closes.
  if (s.config.drain_grace_seconds > 0) {
    LogInfo(absl::StrCat("NOT_SERVING for ", s.config.drain_grace_seconds,
                         " s before the listener closes"));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int64_t>(s.config.drain_grace_seconds * 1000)));
  }
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(s.config.drain_timeout_seconds * 1000));
  s.grpc_server->Shutdown(deadline);
  LogDebug("gRPC server shut down");
  s.grpc_server->Wait();
  s.executor->Shutdown();
  s.control->Shutdown();
  LogDebug("executors stopped");
  if (s.snapshots != nullptr) {
    LogInfo("finishing pending snapshot writes");
    s.snapshots->WaitIdle();
  }
  LogInfo("drained; stopped");
}

}  // namespace gpujoin::server
