// The out-of-line parts of the public value types: HealthStateName and
// QueryStatistics::Merge (the shared enums' names live in gpujoin_common).
#include <algorithm>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/client/aggregate.hpp"
#include "gpujoin/client/connect_options.hpp"
#include "gpujoin/client/index_info.hpp"
#include "gpujoin/client/join.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/client/query_statistics.hpp"

namespace gpujoin::client {

std::string_view HealthStateName(HealthState state) {
  switch (state) {
    case HealthState::kServing:
      return "SERVING";
    case HealthState::kNotServing:
      return "NOT_SERVING";
    case HealthState::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case HealthState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

void QueryStatistics::Merge(const QueryStatistics& other) {
  found += other.found;
  missing += other.missing;
  total_probes += other.total_probes;
  max_probes = std::max(max_probes, other.max_probes);
}

}  // namespace gpujoin::client
