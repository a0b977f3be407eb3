#include "router/router.hpp"

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "router/router_service.hpp"
#include "router/shards.hpp"
#include "transport/auth.hpp"
#include "transport/metrics_exposer.hpp"

namespace gpujoin::server::router {
namespace {

// ---------------------------------------------------------------- the process

class RouterImpl final : public Router {
 public:
  std::string address() const override { return address_; }
  std::string metrics_address() const override { return metrics_address_; }
  std::shared_ptr<prometheus::Registry> metrics_registry() const override {
    return metrics->registry();
  }
  bool serving() const override { return serving_.load(); }
  void Shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (poller_.joinable()) poller_.join();
    if (server_ == nullptr) return;
    server_->GetHealthCheckService()->SetServingStatus(false);
    server_->GetHealthCheckService()->SetServingStatus(kServiceName, false);
    serving_ = false;
    if (config.drain_grace_seconds > 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(static_cast<int64_t>(config.drain_grace_seconds * 1000)));
    }
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(
                          static_cast<int64_t>(config.drain_timeout_seconds * 1000)));
  }
  void Wait() override {
    if (server_ != nullptr) server_->Wait();
  }
  ~RouterImpl() override { Shutdown(); }

  RouterConfig config;
  std::vector<Shard> shards;
  std::unique_ptr<TokenAuthenticator> auth;
  std::unique_ptr<ShardMetrics> metrics;
  std::unique_ptr<grpc::Service> service;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<grpc::Server> server_;
  std::string address_, metrics_address_;
  std::string shard_token;
  std::thread poller_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> serving_{false};

  // Health: SERVING while every shard reports serving (GetServerInfo).
  void Poll() {
    bool last = false;
    bool first = true;
    for (;;) {
      bool all = true;
      for (size_t s = 0; s < shards.size(); ++s) {
        grpc::ClientContext c;
        if (!shard_token.empty()) c.AddMetadata("authorization", "Bearer " + shard_token);
        c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        v1::GetServerInfoResponse info;
        const grpc::Status st = shards[s].stub->GetServerInfo(&c, {}, &info);
        const bool serving = st.ok() && info.serving();
        metrics->SetServing(s, serving);
        all &= serving;
      }
      serving_ = all;
      if (first || all != last) {
        server_->GetHealthCheckService()->SetServingStatus(all);
        server_->GetHealthCheckService()->SetServingStatus(kServiceName, all);
        LogInfo(absl::StrCat(config.log_name, ": ", all ? "SERVING" : "NOT_SERVING", " (",
                             shards.size(), " ", config.shards_noun, ")"));
        last = all;
        first = false;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(all ? 1000 : 200), [&] { return stopping_; })) {
        return;
      }
    }
  }
};

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandShardPattern(const std::string& pattern,
                                                            uint32_t count) {
  if (pattern.find("{i}") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard-pattern: \"", pattern, "\" has no {i} (e.g. 'gpujoind-{i}.gpujoind:50051')"));
  }
  if (count == 0) return absl::InvalidArgumentError("--shard-count: must be at least 1");
  std::vector<std::string> out;
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(absl::StrReplaceAll(pattern, {{"{i}", std::to_string(i)}}));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Router>> Router::Start(const RouterConfig& config) {
  if (config.shards.empty()) {
    return absl::InvalidArgumentError(
        "--shards or --shard-pattern/--shard-count: the router needs at least one shard");
  }
  auto r = std::make_unique<RouterImpl>();
  r->config = config;
  std::shared_ptr<grpc::ChannelCredentials> to_shards = grpc::InsecureChannelCredentials();
  if (!config.shard_tls_ca.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(std::string ca, ReadFlagFile(config.shard_tls_ca, "--shard-tls-ca"));
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = std::move(ca);
    to_shards = grpc::SslCredentials(tls);
  }
  if (!config.shard_token_file.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(r->shard_token, ReadTokenFile(config.shard_token_file));
  }
  // Toward the shards the shards' own --max-message-bytes bound each message
  // (a shard's answer is merged whole, then cut within the router's limit);
  // the router's limit is the clients'.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (!config.shard_channels.empty() && config.shard_channels.size() != config.shards.size()) {
    return absl::InternalError("router: one shard channel per shard name");
  }
  for (size_t i = 0; i < config.shards.size(); ++i) {
    Shard s;
    s.index = static_cast<uint32_t>(i);
    s.address = config.shards[i];
    s.stub = v1::GpuJoin::NewStub(config.shard_channels.empty()
                                      ? grpc::CreateCustomChannel(s.address, to_shards, args)
                                      : config.shard_channels[i]);
    r->shards.push_back(std::move(s));
  }
  if (!config.auth_token_file.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(std::string token, ReadTokenFile(config.auth_token_file));
    r->auth = std::make_unique<TokenAuthenticator>(std::move(token));
  }
  r->metrics = std::make_unique<ShardMetrics>(r->shards.size());
  r->service = MakeRouterService(r->config, &r->shards, r->auth.get(),
                                               r->shard_token, r->metrics.get());
  if (!config.metrics_listen.empty() && config.metrics_listen != "none") {
    GPUJOIN_ASSIGN_OR_RETURN(r->exposer, StartMetricsExposer(config.metrics_listen, nullptr));
    r->exposer->RegisterCollectable(r->metrics->registry());
    const auto ports = r->exposer->GetListeningPorts();
    r->metrics_address_ =
        absl::StrCat(HostOf(config.metrics_listen), ":", ports.empty() ? 0 : ports.front());
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!config.tls_cert.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(std::string cert, ReadFlagFile(config.tls_cert, "--tls-cert"));
    GPUJOIN_ASSIGN_OR_RETURN(std::string key, ReadFlagFile(config.tls_key, "--tls-key"));
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({key, cert});
    if (!config.tls_client_ca.empty()) {
      GPUJOIN_ASSIGN_OR_RETURN(tls.pem_root_certs, ReadFlagFile(config.tls_client_ca, "--tls-client-ca"));
      tls.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(tls);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(config.listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  builder.RegisterService(r->service.get());
  r->server_ = builder.BuildAndStart();
  if (r->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot listen on ", config.listen, " (address in use or invalid)"));
  }
  r->address_ = absl::StrCat(HostOf(config.listen), ":", port);
  r->server_->GetHealthCheckService()->SetServingStatus(false);
  RouterImpl* raw = r.get();
  r->poller_ = std::thread([raw] { raw->Poll(); });
  return std::unique_ptr<Router>(std::move(r));
}

}  // namespace gpujoin::server::router
