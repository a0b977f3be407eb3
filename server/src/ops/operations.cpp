#include "ops/operations.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {

std::string StatusCodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

// ------------------------------------------------------------------ common

absl::Status Operations::RunGraph(const engine::CommandGraph& graph) {
  absl::Status s = state_.backend->Run(graph);
  if (!s.ok() && !state_.backend->Healthy() && state_.on_backend_fatal) state_.on_backend_fatal();
  return s;
}

absl::StatusOr<std::shared_ptr<const IndexVersion>> Operations::FindIndex(const std::string& name,
                                                                          std::string_view field) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(name, field));
  auto v = state_.registry->Get(name);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("index \"", name, "\" not found"));
  return v;
}

void Operations::UpdateServiceGauges() {
  state_.metrics->SetDeviceMemory(state_.budget->used_bytes(), state_.budget->limit_bytes(),
                                  state_.backend_info.memory_total_bytes);
  state_.metrics->SetIndexCount(state_.registry->size());
}

}  // namespace gpujoin::server
