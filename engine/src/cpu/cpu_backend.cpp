// The CPU backend: reference implementation of every node and the fallback when
// no GPU is present. Graphs are validated by CommandGraph::Validate, then their
// nodes run in order; lookups, joins and aggregations use a shared thread pool.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/backend_registry.hpp"
#include "cpu/cpu_hash_index.hpp"
#include "cpu/cpu_ops.hpp"
#include "cpu/thread_pool.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/hash_host.hpp"

namespace gpujoin::engine {
namespace cpu {
namespace {

uint64_t PhysicalMemoryBytes(int pages_name) {
  const long pages = sysconf(pages_name);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

// MemAvailable from /proc/meminfo (memory usable without swapping, including
// reclaimable caches), else the free physical pages.
uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
  }
  return PhysicalMemoryBytes(_SC_AVPHYS_PAGES);
}

// The "model name" line of /proc/cpuinfo, or "host" when it is unavailable.
std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t begin = line.find_first_not_of(" \t", colon + 1);
    if (begin == std::string::npos) break;
    return line.substr(begin);
  }
  return "host";
}

// Resolves a graph's index pointer to this backend's index type.
template <typename Index>
absl::StatusOr<Index*> AsCpuIndex(Index* index, size_t node, std::string_view kind) {
  using Target = std::conditional_t<std::is_const_v<Index>, const CpuHashIndex, CpuHashIndex>;
  auto* cpu = dynamic_cast<Target*>(index);
  if (cpu == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node, " (", std::string(kind), "): index belongs to the ",
                     std::string(BackendKindName(index->backend())), " backend, not cpu"));
  }
  return cpu;
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(uint32_t threads) : pool_(threads), model_(CpuModelName()) {}

  BackendInfo Info() const override {
    BackendInfo info;
    info.kind = BackendKind::kCpu;
    info.device_name = model_;
    info.memory_total_bytes = PhysicalMemoryBytes(_SC_PHYS_PAGES);
    info.memory_free_bytes = std::min(AvailableMemoryBytes(), info.memory_total_bytes);
    info.parallelism = pool_.size();
    return info;
  }

  absl::StatusOr<std::unique_ptr<HashIndex>> CreateIndex(const HashIndexSpec& spec) override {
    GPUJOIN_RETURN_IF_ERROR(spec.Validate());
    const uint64_t bytes = CpuHashIndex::TableBytes(spec);
    const uint64_t total = PhysicalMemoryBytes(_SC_PHYS_PAGES);
    if (total != 0 && bytes > total) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "index of capacity ", spec.capacity, " needs ", bytes, " bytes; the host has ", total));
    }
    try {
      return std::unique_ptr<HashIndex>(std::make_unique<CpuHashIndex>(spec));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "index of capacity ", spec.capacity, ": host allocation of ", bytes, " bytes failed"));
    }
  }

  uint64_t IndexBytes(const HashIndexSpec& spec) const override {
    return CpuHashIndex::TableBytes(spec);
  }

  // Builds insert straight from the caller's chunks into the table (RunBuild,
  // RunBatchBuild): no scratch.
  uint64_t BuildTransientBytes(const HashIndexSpec&, const BuildShape&) const override { return 0; }

  absl::Status Run(const CommandGraph& graph) override {
    GPUJOIN_RETURN_IF_ERROR(graph.Validate());
    // Resolve every index before running anything, so a foreign index fails the
    // graph without partial effects.
    for (size_t i = 0; i < graph.nodes().size(); ++i) {
      const Node& node = graph.nodes()[i];
      absl::Status status;
      if (auto* n = std::get_if<BuildIndexNode>(&node)) {
        status = AsCpuIndex(n->index, i, "build").status();
      } else if (auto* n = std::get_if<BuildBatchIndexNode>(&node)) {
        status = AsCpuIndex(n->index, i, "batch build").status();
      } else if (auto* n = std::get_if<LookupNode>(&node)) {
        status = AsCpuIndex(n->index, i, "lookup").status();
      } else if (auto* n = std::get_if<JoinNode>(&node)) {
        status = AsCpuIndex(n->index, i, "join").status();
      }
      GPUJOIN_RETURN_IF_ERROR(status);
    }
    try {
      for (const Node& node : graph.nodes()) Execute(node);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("cpu backend: host memory allocation failed");
    }
    return absl::OkStatus();
  }

 private:
  void Execute(const Node& node) {
    std::visit(
        [this](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, BuildIndexNode>) {
            RunBuild(n, static_cast<CpuHashIndex&>(*n.index));
          } else if constexpr (std::is_same_v<T, BuildBatchIndexNode>) {
            RunBatchBuild(n, static_cast<CpuHashIndex&>(*n.index));
          } else if constexpr (std::is_same_v<T, LookupNode>) {
            RunLookup(n, static_cast<const CpuHashIndex&>(*n.index), pool_);
          } else if constexpr (std::is_same_v<T, JoinNode>) {
            RunJoin(n, static_cast<const CpuHashIndex&>(*n.index), pool_);
          } else if constexpr (std::is_same_v<T, AggregateNode>) {
            RunAggregate(n, pool_);
          } else {
            static_assert(std::is_same_v<T, HashNode>);
            RunHash(n);
          }
        },
        node);
  }

  // Hashes disjoint row ranges on the pool. Range starts are multiples of 8 so
  // each range owns whole output validity bytes; every row's hash depends only on
  // that row, so the result equals a single-threaded pass.
  void RunHash(const HashNode& node) {
    const uint64_t rows = node.columns.empty() ? 0 : node.columns[0].length;
    constexpr uint64_t kMinRowsPerTask = 8192;
    const uint64_t tasks =
        std::clamp<uint64_t>(rows / kMinRowsPerTask, 1, uint64_t{pool_.size()} * 4);
    // ceil(rows / tasks), rounded up to a multiple of 8: tasks * per_task >= rows.
    const uint64_t per_task = ((rows + tasks - 1) / tasks + 7) / 8 * 8;
    pool_.ParallelFor(tasks, [&](size_t t) {
      const uint64_t first = t * per_task;
      if (first >= rows) return;
      detail::HashRowsHost(node, first, std::min(per_task, rows - first));
    });
  }

  ThreadPool pool_;
  std::string model_;
};

}  // namespace
}  // namespace cpu

namespace detail {

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options) {
  return std::unique_ptr<Backend>(std::make_unique<cpu::CpuBackend>(options.cpu_threads));
}

}  // namespace detail
}  // namespace gpujoin::engine
