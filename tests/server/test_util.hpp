// Helpers shared by the server tests.
#pragma once

#include <memory>
#include <sstream>
#include <string>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/server/index_registry.hpp"
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

/// The registry rendered in the Prometheus text format.
inline std::string Render(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

}  // namespace gpujoin::server::testing
