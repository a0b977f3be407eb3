// gpujoind --devices with two or more devices (docs/operations.md, "Several
// devices"): one member Server per device, each serving part I of N of every
// index (--shard I/N) on its own backend, stream and executor, reachable only
// in-process; in front of them the router's service (router/) on --listen,
// which splits every call by the jump consistent hash of its keys, runs the
// parts on their devices concurrently and merges the answers in input order.
// The partitioning is the router's code, not a copy: a device group is a
// router whose shards live in the same process.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/server/logging.hpp"
#include "gpujoin/server/server.hpp"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "router/router.hpp"
#include "transport/auth.hpp"
#include "transport/metrics_exposer.hpp"

namespace gpujoin::server {
namespace {

// The members' metrics as one collectable: every series gains a `device_id`
// label (the device number; `device` already names the device's model), and
// the families of one name are merged so that /metrics names each family once.
class DeviceMetrics final : public prometheus::Collectable {
 public:
  void Add(int device, std::shared_ptr<prometheus::Registry> registry) {
    members_.push_back({std::to_string(device), std::move(registry)});
  }
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    std::map<std::string, size_t> position;
    for (const auto& [device, registry] : members_) {
      for (prometheus::MetricFamily& family : registry->Collect()) {
        for (prometheus::ClientMetric& m : family.metric) {
          m.label.push_back({"device_id", device});
        }
        auto [it, added] = position.emplace(family.name, out.size());
        if (added) {
          out.push_back(std::move(family));
        } else {
          auto& into = out[it->second].metric;
          into.insert(into.end(), std::make_move_iterator(family.metric.begin()),
                      std::make_move_iterator(family.metric.end()));
        }
      }
    }
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<prometheus::Registry>>> members_;
};

// The configuration of member `part` of `parts`, on `device`: in-process only,
// no metrics listener, TLS or token of its own (the front has them), part
// `part`'s keys only, its own directory under --data-dir, and a share of the
// host's threads and host-memory limits.
// Whether the group's devices are host devices (the cpu backend): they share
// the host's cores and memory.
bool HostDevices(const ServerConfig& group) {
  return group.backend == engine::BackendKind::kCpu ||
         (group.backend == engine::BackendKind::kAuto && !engine::CudaDeviceAvailable());
}

ServerConfig MemberConfig(const ServerConfig& group, int device, uint32_t part, uint32_t parts) {
  ServerConfig m = group;
  m.listen.clear();
  m.metrics_listen.clear();
  m.tls_cert.clear();
  m.tls_key.clear();
  m.tls_client_ca.clear();
  m.auth_token_file.clear();
  m.devices = {device};
  m.all_devices = false;
  m.shard = {part, parts};
  m.drain_grace_seconds = 0;
  if (group.test_fatal_device >= 0 && group.test_fatal_device != device) {
    m.backend_options.test_fatal_after_runs = 0;
  }
  // Every call reaches a member over the front's one in-process channel: a
  // per-connection limit there would be one for the whole process (the front
  // applies --max-streams-per-connection to the clients' connections).
  m.max_streams_per_connection = std::numeric_limits<uint32_t>::max();
  if (!group.data_dir.empty()) {
    // By position and count: a partition is only ever loaded into the part it
    // was made for; another --devices count starts from empty directories.
    m.data_dir = absl::StrCat(group.data_dir, "/part-", part, "-of-", parts);
  }
  const bool host_devices = HostDevices(group);
  const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (m.cpu_threads == 0) m.cpu_threads = std::max(1u, cores / parts);
  if (m.executor_threads == 0 && host_devices) m.executor_threads = std::max(2u, cores / parts);
  // The host limits whose defaults come from the host's memory are shared:
  // each member gets its share, so the process stays within one default. So
  // is the index budget of host devices (half of the free memory, as one's).
  const uint64_t host = PhysicalMemoryBytes();
  if (host_devices && m.device_memory_limit == 0) {
    const long free_pages = sysconf(_SC_AVPHYS_PAGES);
    const uint64_t free_bytes =
        free_pages > 0 ? uint64_t(free_pages) * uint64_t(sysconf(_SC_PAGESIZE)) : host / 2;
    m.device_memory_limit = std::max<uint64_t>(free_bytes / 2 / parts, 1);
  }
  return ResolveHostLimits(m, host, parts);
}

// --data-dir's part directories of another device count are not loaded: say
// so, so that an operator who changed --devices knows where the indexes went.
void WarnOfOtherPartCounts(const std::string& data_dir, uint32_t parts) {
  std::error_code ec;
  std::vector<std::string> others;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir, ec)) {
    const std::string name = entry.path().filename().string();
    uint32_t i = 0, n = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "part-%u-of-%u%c", &i, &n, &tail) == 2 && n != parts) {
      others.push_back(name);
    }
  }
  if (others.empty()) return;
  std::sort(others.begin(), others.end());
  LogWarning(absl::StrCat("--data-dir \"", data_dir, "\" holds the parts of another --devices count (",
                          absl::StrJoin(others, ", "), "): they are not loaded; ", parts,
                          " devices use part-I-of-", parts, "/ (build the indexes again, or start "
                          "with the device count that made them)"));
}

class DeviceGroup final : public Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const ServerConfig& config) {
    auto g = std::unique_ptr<DeviceGroup>(new DeviceGroup());
    g->config_ = config;
    const uint32_t parts = static_cast<uint32_t>(config.devices.size());
    router::RouterConfig rc;
    rc.listen = config.listen;
    rc.metrics_listen.clear();
    rc.tls_cert = config.tls_cert;
    rc.tls_key = config.tls_key;
    rc.tls_client_ca = config.tls_client_ca;
    rc.auth_token_file = config.auth_token_file;
    rc.max_message_bytes = config.max_message_bytes;
    rc.max_aggregate_groups = config.max_aggregate_groups;
    rc.max_streams_per_connection = config.max_streams_per_connection;
    // In-process members do not get lost on a network; a slow call is the
    // client's to bound with its deadline (which reaches the members).
    rc.shard_timeout_seconds = 1e6;
    rc.shards_noun = "devices";
    rc.shards_share_memory = HostDevices(config);
    rc.log_name = "device group";
    rc.drain_grace_seconds = config.drain_grace_seconds;
    rc.drain_timeout_seconds = config.drain_timeout_seconds;
    if (!config.data_dir.empty()) WarnOfOtherPartCounts(config.data_dir, parts);
    // The members start (and load their parts of --data-dir) side by side.
    std::vector<absl::StatusOr<std::unique_ptr<Server>>> started(parts);
    {
      std::vector<std::thread> starters;
      for (uint32_t part = 0; part < parts; ++part) {
        starters.emplace_back([&, part] {
          const int device = config.devices[part];
          LogInfo(absl::StrCat("device group: starting part ", part, " of ", parts,
                               " on device ", device));
          SetThreadLogPrefix(absl::StrCat("device ", device, ": "));
          started[part] = Server::Start(MemberConfig(config, device, part, parts));
        });
      }
      for (std::thread& t : starters) t.join();
    }
    absl::Status failed;
    for (uint32_t part = 0; part < parts; ++part) {
      const int device = config.devices[part];
      if (!started[part].ok()) {
        if (failed.ok()) {
          failed = absl::Status(started[part].status().code(),
                                absl::StrCat("--devices: device ", device, " (part ", part, " of ",
                                             parts, "): ", started[part].status().message()));
        }
        continue;
      }
      rc.shards.push_back(absl::StrCat("device ", device));
      rc.shard_channels.push_back((*started[part])->InProcessChannel());
      g->metrics_->Add(device, (*started[part])->metrics_registry());
      g->members_.push_back(*std::move(started[part]));
      g->member_devices_.push_back(device);
    }
    if (!failed.ok()) return failed;  // ~DeviceGroup stops the members that started
    GPUJOIN_ASSIGN_OR_RETURN(g->router_, router::Router::Start(rc));
    if (!config.metrics_listen.empty()) {
      if (!config.auth_token_file.empty() && config.auth_scope == AuthScope::kAll) {
        GPUJOIN_ASSIGN_OR_RETURN(std::string token, ReadTokenFile(config.auth_token_file));
        g->metrics_auth_ = std::make_unique<TokenAuthenticator>(std::move(token));
      }
      GPUJOIN_ASSIGN_OR_RETURN(g->exposer_,
                               StartMetricsExposer(config.metrics_listen, g->metrics_auth_.get()));
      g->exposer_->RegisterCollectable(g->router_->metrics_registry());
      g->exposer_->RegisterCollectable(g->metrics_);
      const auto ports = g->exposer_->GetListeningPorts();
      const std::string& l = config.metrics_listen;
      g->metrics_address_ = absl::StrCat(l.substr(0, l.rfind(':')), ":",
                                         ports.empty() ? 0 : ports.front());
    }
    // Ready when the router's health poll has seen every member serve.
    for (int i = 0; i < 200 && !g->router_->serving(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (!g->router_->serving()) {
      LogWarning("device group: not every device reports serving yet; health says NOT_SERVING "
                 "until they do");
    }
    return std::unique_ptr<Daemon>(std::move(g));
  }

  ~DeviceGroup() override { Shutdown(); }

  std::string grpc_address() const override { return router_->address(); }
  std::string metrics_address() const override { return metrics_address_; }
  std::string backend_description() const override {
    std::string out = absl::StrCat("devices=", members_.size());
    for (size_t i = 0; i < members_.size(); ++i) {
      absl::StrAppend(&out, " [part ", i, ": ", members_[i]->backend_description(), "]");
    }
    return out;
  }
  void Poll() override {
    for (auto& m : members_) m->Poll();
  }
  void Shutdown() override {
    if (shut_down_) return;
    shut_down_ = true;
    // The members refuse new calls and drain their streams at once (as one
    // gpujoind does at the start of its drain); the front then says
    // NOT_SERVING for the grace period and waits for the calls in flight;
    // then the members stop, side by side.
    for (size_t i = 0; i < members_.size(); ++i) {
      SetThreadLogPrefix(absl::StrCat("device ", member_devices_[i], ": "));
      members_[i]->BeginDrain();
    }
    SetThreadLogPrefix("");
    if (router_ != nullptr) router_->Shutdown();
    std::vector<std::thread> stoppers;
    for (size_t i = 0; i < members_.size(); ++i) {
      stoppers.emplace_back([this, i] {
        SetThreadLogPrefix(absl::StrCat("device ", member_devices_[i], ": "));
        members_[i]->Shutdown();
      });
    }
    for (std::thread& t : stoppers) t.join();
    exposer_.reset();
  }

 private:
  DeviceGroup() : metrics_(std::make_shared<DeviceMetrics>()) {}

  ServerConfig config_;
  std::shared_ptr<DeviceMetrics> metrics_;
  std::vector<std::unique_ptr<Server>> members_;
  std::vector<int> member_devices_;  // the device of members_[i]
  std::unique_ptr<router::Router> router_;
  std::unique_ptr<TokenAuthenticator> metrics_auth_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string metrics_address_;
  bool shut_down_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> StartDaemon(const ServerConfig& config) {
  ServerConfig resolved = config;
  if (config.all_devices) {
    if (config.backend == engine::BackendKind::kCpu) {
      return absl::InvalidArgumentError(
          "--devices all: the cpu backend has no devices to count; name host devices such as "
          "--devices 0,1");
    }
    const int count = engine::CudaDeviceCount();
    if (count == 0) {
      return absl::FailedPreconditionError("--devices all: no CUDA device is visible");
    }
    resolved.devices.clear();
    for (int d = 0; d < std::min<int>(count, kMaxDevices); ++d) resolved.devices.push_back(d);
    resolved.all_devices = false;
  }
  if (resolved.devices.size() <= 1) {
    GPUJOIN_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, Server::Start(resolved));
    return std::unique_ptr<Daemon>(std::move(server));
  }
  return DeviceGroup::Start(resolved);
}

}  // namespace gpujoin::server
