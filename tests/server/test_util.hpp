// Helpers shared by the server tests.
#pragma once

#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpujoin/engine/backend.hpp"
#include "state/index_registry.hpp"
#include "state/memory_budget.hpp"
#include "observe/metrics.hpp"
#include "ops/operations.hpp"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace gpujoin::server::testing {

/// A CPU backend with two threads (the tests' machines have two cores).
inline std::unique_ptr<engine::Backend> CpuBackend() {
  engine::BackendOptions options;
  options.cpu_threads = 2;
  auto b = engine::CreateBackend(engine::BackendKind::kCpu, options);
  if (!b.ok()) std::abort();
  return std::move(*b);
}

/// An unbuilt index version of `capacity` slots named `name`.
inline std::shared_ptr<IndexVersion> MakeVersion(engine::Backend& backend, const std::string& name,
                                                 uint32_t capacity) {
  engine::HashIndexSpec spec;
  spec.capacity = capacity;
  auto index = backend.CreateIndex(spec);
  if (!index.ok()) std::abort();
  auto v = std::make_shared<IndexVersion>();
  v->name = name;
  v->index = std::move(*index);
  return v;
}

/// A fixture holding Operations over a two-thread CPU backend, a fresh registry
/// and metrics, and a 1 MiB memory budget. Call MakeOperations from SetUp (with a
/// config to adjust, e.g. a small max_message_bytes).
class OperationsFixture : public ::testing::Test {
 protected:
  void MakeOperations(ServerConfig config = {}) {
    backend_ = CpuBackend();
    budget_ = std::make_unique<MemoryBudget>(1 << 20);
    ServiceState s;
    s.backend = backend_.get();
    s.backend_info = backend_->Info();
    s.registry = &registry_;
    s.budget = budget_.get();
    s.metrics = &metrics_;
    s.config = std::move(config);
    ops_ = std::make_unique<Operations>(std::move(s));
  }

  /// One BuildIndex call's messages through a BuildSession: the first error, or
  /// the installed version.
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Build(
      std::vector<v1::BuildIndexRequest> messages) {
    BuildSession session(ops_.get());
    for (auto& m : messages) {
      absl::Status s = session.Add(std::move(m));
      if (!s.ok()) return s;
    }
    std::atomic<bool> cancelled{false};
    return session.Finish(cancelled);
  }

  std::unique_ptr<engine::Backend> backend_;
  IndexRegistry registry_;
  std::unique_ptr<MemoryBudget> budget_;
  Metrics metrics_;
  std::unique_ptr<Operations> ops_;
};

/// The registry rendered in the Prometheus text format.
inline std::string Render(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

}  // namespace gpujoin::server::testing
