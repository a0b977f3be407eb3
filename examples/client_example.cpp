// A minimal program on the gpujoin C++ client library: builds an index from
// in-memory keys, streams lookups with several batches in flight, and prints
// what it found. Built as build/bin/gpujoin-client-example.
//
//   build/bin/gpujoin-client-example [HOST:PORT] [TOKEN]
#include <cstdio>
#include <optional>
#include <vector>

#include "gpujoin/client/client.hpp"

int main(int argc, char** argv) {
  namespace gc = gpujoin::client;
  gc::ConnectOptions options;
  if (argc > 1) options.address = argv[1];
  if (argc > 2) options.token = argv[2];
  options.deadline = std::chrono::seconds(30);
  auto client = gc::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 2;
  }

  // 100000 sparse keys; the index maps each to its row number.
  std::vector<uint32_t> keys(100000);
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i * 2654435761u;
  gc::IndexSpec spec;
  spec.name = "client_example";
  spec.expected_rows = keys.size();
  spec.replace = true;
  auto info = (*client)->BuildIndexFromColumns(spec, keys, {}, 16384,
                                               [](const gc::Progress& p) {
                                                 std::printf("uploaded %llu/%llu rows\n",
                                                             static_cast<unsigned long long>(p.rows_sent),
                                                             static_cast<unsigned long long>(p.total_rows));
                                               });
  if (!info.ok()) {
    std::fprintf(stderr, "build: %s\n", info.status().ToString().c_str());
    return 1;
  }
  std::printf("index %s v%llu: %llu unique keys, load factor %.2f\n", info->name.c_str(),
              static_cast<unsigned long long>(info->version),
              static_cast<unsigned long long>(info->statistics.unique_keys), info->load_factor);

  // Stream 10 batches of 10000 probes (every other one a miss), 4 in flight.
  std::vector<uint32_t> probes(10000);
  size_t batch = 0;
  gc::StreamOptions stream;
  stream.max_in_flight = 4;
  gc::QueryStatistics total;
  absl::Status st = (*client)->Lookup(
      "client_example",
      [&]() -> std::optional<gc::LookupBatch> {
        if (batch == 10) return std::nullopt;
        for (size_t i = 0; i < probes.size(); ++i) {
          probes[i] = (i % 2) ? keys[(batch * probes.size() + i) % keys.size()] : 7u * i + 1;
        }
        ++batch;
        return gc::LookupBatch{probes};  // copied into the request before the next call
      },
      [&](gc::LookupResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        total.Merge(r.statistics);
        return absl::OkStatus();
      },
      stream);
  if (!st.ok()) {
    std::fprintf(stderr, "lookup: %s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("found %llu, missing %llu\n", static_cast<unsigned long long>(total.found),
              static_cast<unsigned long long>(total.missing));
  (void)(*client)->DropIndex("client_example");
  return 0;
}
