// gpujoin health, gpujoin info.
#include "commands.hpp"

#include <iostream>

#include "absl/strings/str_cat.h"

namespace gpujoin::cli {

int CmdHealth(const Globals& g, const std::string& service) {
  auto c = Connect(g);
  client::HealthState st = RpcOrDie(c->Health(service), "health");
  const std::string name(client::HealthStateName(st));
  if (g.json) {
    std::cout << Json{{"server", g.server}, {"service", service}, {"status", name}}.dump(2)
              << '\n';
  } else {
    std::cout << name << '\n';
  }
  if (st != client::HealthState::kServing) {
    if (!g.json) std::cerr << "gpujoin: health: server " << g.server << " is " << name << '\n';
    return kExitRpc;
  }
  return kExitOk;
}

int CmdInfo(const Globals& g) {
  auto c = Connect(g);
  client::ServerInfo i = RpcOrDie(c->GetServerInfo(), "info");
  if (g.json) {
    std::cout << Json{{"server", g.server},
                      {"version", i.version},
                      {"backend", i.backend},
                      {"device_name", i.device_name},
                      {"device_memory_total_bytes", i.device_memory_total_bytes},
                      {"device_memory_used_bytes", i.device_memory_used_bytes},
                      {"device_memory_budget_bytes", i.device_memory_budget_bytes},
                      {"max_message_bytes", i.max_message_bytes},
                      {"max_inflight_batches_per_stream", i.max_inflight_batches_per_stream},
                      {"max_inflight_batches", i.max_inflight_batches},
                      {"index_count", i.index_count},
                      {"max_result_bytes", i.max_result_bytes},
                      {"max_pending_response_bytes", i.max_pending_response_bytes},
                      {"pending_response_bytes", i.pending_response_bytes},
                      {"max_mutation_rows", i.max_mutation_rows},
                      {"wal_sync", i.wal_sync},
                      {"serving", i.serving}}
                     .dump(2)
              << '\n';
    return kExitOk;
  }
  std::cout << "server       " << g.server << "\n"
            << "version      " << i.version << "\n"
            << "backend      " << i.backend << "\n"
            << "device       " << (i.device_name.empty() ? "-" : i.device_name) << "\n"
            << "memory       " << FormatBytes(static_cast<double>(i.device_memory_used_bytes))
            << " used by indexes, budget "
            << FormatBytes(static_cast<double>(i.device_memory_budget_bytes)) << ", device total "
            << FormatBytes(static_cast<double>(i.device_memory_total_bytes)) << "\n"
            << "indexes      " << i.index_count << "\n"
            << "limits       max message "
            << FormatBytes(static_cast<double>(i.max_message_bytes)) << ", in-flight batches "
            << i.max_inflight_batches_per_stream << " per stream / " << i.max_inflight_batches
            << " total, results "
            << FormatBytes(static_cast<double>(i.max_result_bytes)) << " per request\n"
            << "responses    " << FormatBytes(static_cast<double>(i.pending_response_bytes))
            << " waiting to be read, limit "
            << FormatBytes(static_cast<double>(i.max_pending_response_bytes)) << "\n"
            << "mutations    " << i.max_mutation_rows << " rows per batch, "
            << (i.wal_sync.empty() ? std::string("no write-ahead log")
                                   : absl::StrCat("write-ahead log --wal-sync=", i.wal_sync))
            << "\n"
            << "serving      " << (i.serving ? "yes" : "no") << "\n";
  return kExitOk;
}

}  // namespace gpujoin::cli
