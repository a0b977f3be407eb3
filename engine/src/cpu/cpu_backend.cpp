// The CPU backend: reference implementation of every node and the fallback when
// no GPU is present. Graphs are validated by CommandGraph::Validate, then their
// nodes run in order; lookups, joins and aggregations use a shared thread pool.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/backend_registry.hpp"
#include "cpu/cpu_hash_index.hpp"
#include "cpu/cpu_mutate.hpp"
#include "cpu/cpu_index_image.hpp"
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

// Resolves a graph's index pointer to this backend's index of key word K
// (Validate has checked that K is the index's key type, so a failed cast means
// another backend's index).
template <IndexKey K>
absl::Status CheckCpuIndex(const HashIndex* index, size_t node, std::string_view kind) {
  if (dynamic_cast<const CpuHashIndex<K>*>(index) != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("node ", node, " (", std::string(kind), "): index belongs to the ",
                   std::string(BackendKindName(index->backend())), " backend, not cpu"));
}

// The kind named in messages, for the nodes that carry an index.
template <IndexKey K>
std::string_view KindOf(const BuildIndexNodeT<K>&) {
  return "build";
}
template <IndexKey K>
std::string_view KindOf(const BuildBatchIndexNodeT<K>&) {
  return "batch build";
}
template <IndexKey K>
std::string_view KindOf(const LookupNodeT<K>&) {
  return "lookup";
}
template <IndexKey K>
std::string_view KindOf(const JoinNodeT<K>&) {
  return "join";
}

// The key word of a node that carries an index.
template <class Node>
struct NodeKeyWord;
template <template <IndexKey> class N, IndexKey K>
struct NodeKeyWord<N<K>> {
  using type = K;
};

class CpuBackend final : public Backend {
 private:
  template <KeyWord K>
  static absl::StatusOr<InPlaceMutation> MutateWords(HashIndex& index,
                                                     const MutationBatchT<K>& batch,
                                                     double max_load_factor) {
    auto* cpu = dynamic_cast<CpuHashIndex<K>*>(&index);
    if (cpu == nullptr) {
      return absl::InvalidArgumentError("mutation: the index is not a CPU index of this key type");
    }
    return ::gpujoin::engine::cpu::MutateInPlace(*cpu, batch, max_load_factor);
  }

 public:
  CpuBackend(uint32_t threads, uint32_t fingerprint_bits, uint64_t fatal_after_runs)
      : pool_(threads),
        model_(CpuModelName()),
        fingerprint_bits_(fingerprint_bits),
        fatal_after_runs_(fatal_after_runs) {}

  bool Healthy() const override { return healthy_.load(); }

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
    const uint64_t bytes = CpuTableBytes(spec);
    const uint64_t total = PhysicalMemoryBytes(_SC_PHYS_PAGES);
    if (total != 0 && bytes > total) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "index of capacity ", spec.capacity, " needs ", bytes, " bytes; the host has ", total));
    }
    try {
      if (spec.key_type == KeyType::kUint64) {
        return std::unique_ptr<HashIndex>(std::make_unique<CpuHashIndex<uint64_t>>(spec));
      }
      if (spec.key_type == KeyType::kColumns) {
        return std::unique_ptr<HashIndex>(
            std::make_unique<CpuHashIndex<ColumnKey>>(spec, fingerprint_bits_));
      }
      return std::unique_ptr<HashIndex>(std::make_unique<CpuHashIndex<uint32_t>>(spec));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "index of capacity ", spec.capacity, ": host allocation of ", bytes, " bytes failed"));
    }
  }

  uint64_t IndexBytes(const HashIndexSpec& spec) const override { return CpuTableBytes(spec); }

  absl::StatusOr<InPlaceMutation> MutateInPlace(HashIndex& index,
                                                const MutationBatchT<uint32_t>& batch,
                                                double max_load_factor) override {
    return MutateWords(index, batch, max_load_factor);
  }
  absl::StatusOr<InPlaceMutation> MutateInPlace(HashIndex& index,
                                                const MutationBatchT<uint64_t>& batch,
                                                double max_load_factor) override {
    return MutateWords(index, batch, max_load_factor);
  }

  // Builds insert straight from the caller's chunks into the table (RunBuild,
  // RunBatchBuild): no scratch. Storing payload takes the winner row of every
  // slot (4 bytes each) while the columns are gathered. A kKeepAll build takes
  // the winners and every row's slot (4 bytes each) while it lays out its
  // groups, and with payload the source row of every kept row (at most every
  // row, 4 bytes each). Its groups are index memory (GroupStorageBytes).
  //
  // A key-schema build also takes every row's fingerprint and valid flag (9
  // bytes a row) while it inserts; its key columns and row values (4 bytes a
  // row) stay with the index.
  uint64_t BuildTransientBytes(const HashIndexSpec& spec, const BuildShape& shape) const override {
    const uint64_t fingerprints = spec.key_type == KeyType::kColumns ? shape.rows * 9 : 0;
    return fingerprints + WordBuildTransientBytes(spec, shape);
  }
  uint64_t WordBuildTransientBytes(const HashIndexSpec& spec, const BuildShape& shape) const {
    const uint64_t winners = uint64_t{spec.capacity} * sizeof(uint32_t);
    if (spec.duplicates == DuplicatePolicy::kKeepAll) {
      const uint64_t per_row = shape.payload.empty() ? 1 : 2;
      return winners + per_row * shape.rows * sizeof(uint32_t);
    }
    return shape.payload.empty() ? 0 : winners;
  }

  uint64_t PayloadBytes(const HashIndexSpec& spec, std::span<const PayloadShape> payload,
                        uint64_t rows) const override {
    const uint64_t stored = spec.duplicates == DuplicatePolicy::kKeepAll ? rows : spec.capacity;
    uint64_t bytes = 0;
    for (const PayloadShape& shape : payload) bytes += PayloadStorageBytes(stored, shape);
    return bytes;
  }

  absl::StatusOr<IndexImage> ExportIndex(const HashIndex& index) const override {
    try {
      return ExportCpuIndex(index, pool_);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "export: host allocation of the image (", CpuTableBytes(index.spec()), "+ bytes) failed"));
    }
  }

  absl::StatusOr<std::unique_ptr<HashIndex>> ImportIndex(const IndexImage& image) override {
    GPUJOIN_RETURN_IF_ERROR(image.Validate());
    try {
      return ImportCpuIndex(image, pool_, fingerprint_bits_);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(
          absl::StrCat("import: host allocation of ", ImportedIndexBytes(*this, image.shape()),
                       " bytes for an index of capacity ", image.spec.capacity, " failed"));
    }
  }

  absl::Status Run(const CommandGraph& graph) override {
    if (fatal_after_runs_ != 0 && runs_.fetch_add(1) >= fatal_after_runs_) healthy_ = false;
    if (!healthy_.load()) {
      return absl::InternalError(absl::StrCat(
          "cpu backend is not serving after a fatal device error: the test stand-in for a "
          "sticky device error after ", fatal_after_runs_, " runs (--test-fatal-after-runs)"));
    }
    GPUJOIN_RETURN_IF_ERROR(graph.Validate());
    // Resolve every index before running anything, so a foreign index fails the
    // graph without partial effects.
    for (size_t i = 0; i < graph.nodes().size(); ++i) {
      GPUJOIN_RETURN_IF_ERROR(std::visit(
          [i](const auto& n) -> absl::Status {
            using T = std::decay_t<decltype(n)>;
            if constexpr (requires { n.index; }) {
              return CheckCpuIndex<typename NodeKeyWord<T>::type>(n.index, i, KindOf(n));
            } else {
              return absl::OkStatus();
            }
          },
          graph.nodes()[i]));
    }
    try {
      for (size_t i = 0; i < graph.nodes().size(); ++i) {
        GPUJOIN_RETURN_IF_ERROR(Execute(graph.nodes()[i], i));
      }
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("cpu backend: host memory allocation failed");
    }
    return absl::OkStatus();
  }

 private:
  // Runs node `i` of a graph.
  absl::Status Execute(const Node& node, size_t i) {
    return std::visit([this, i](const auto& n) { return ExecuteNode(n, i); }, node);
  }
  template <KeyWord K>
  absl::Status ExecuteNode(const BuildIndexNodeT<K>& n, size_t) {
    RunBuild(n, static_cast<CpuHashIndex<K>&>(*n.index), pool_);
    return absl::OkStatus();
  }
  template <KeyWord K>
  absl::Status ExecuteNode(const BuildBatchIndexNodeT<K>& n, size_t) {
    RunBatchBuild(n, static_cast<CpuHashIndex<K>&>(*n.index), pool_);
    return absl::OkStatus();
  }
  absl::Status ExecuteNode(const BuildIndexNodeT<ColumnKey>& n, size_t) {
    RunBuild(n, static_cast<CpuHashIndex<ColumnKey>&>(*n.index), pool_);
    return absl::OkStatus();
  }
  absl::Status ExecuteNode(const BuildBatchIndexNodeT<ColumnKey>& n, size_t) {
    RunBatchBuild(n, static_cast<CpuHashIndex<ColumnKey>&>(*n.index), pool_);
    return absl::OkStatus();
  }
  template <IndexKey K>
  absl::Status ExecuteNode(const LookupNodeT<K>& n, size_t i) {
    return RunLookup(n, static_cast<const CpuHashIndex<K>&>(*n.index), pool_, i);
  }
  template <IndexKey K>
  absl::Status ExecuteNode(const JoinNodeT<K>& n, size_t i) {
    return RunJoin(n, static_cast<const CpuHashIndex<K>&>(*n.index), pool_, i);
  }
  absl::Status ExecuteNode(const AggregateNode& n, size_t) {
    RunAggregate(n, pool_);
    return absl::OkStatus();
  }
  absl::Status ExecuteNode(const HashNode& n, size_t) {
    RunHash(n);
    return absl::OkStatus();
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

  // mutable: ExportIndex (const) runs its copies on the pool too.
  mutable ThreadPool pool_;
  std::string model_;
  uint32_t fingerprint_bits_;
  uint64_t fatal_after_runs_;
  std::atomic<uint64_t> runs_{0};
  std::atomic<bool> healthy_{true};
};

}  // namespace
}  // namespace cpu

namespace detail {

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options) {
  return std::unique_ptr<Backend>(
      std::make_unique<cpu::CpuBackend>(options.cpu_threads, options.key_fingerprint_bits,
                                        options.test_fatal_after_runs));
}

}  // namespace detail
}  // namespace gpujoin::engine
