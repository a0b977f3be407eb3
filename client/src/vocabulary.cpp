// The out-of-line parts of the public value types: the names and parsers of
// the client's enums, and QueryStatistics::Merge.
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

std::string_view AggregateOpName(AggregateOp op) {
  switch (op) {
    case AggregateOp::kCount:
      return "count";
    case AggregateOp::kSum:
      return "sum";
    case AggregateOp::kMin:
      return "min";
    case AggregateOp::kMax:
      return "max";
    case AggregateOp::kMean:
      return "mean";
  }
  return "?";
}

absl::StatusOr<AggregateOp> ParseAggregateOp(std::string_view name) {
  for (AggregateOp op : {AggregateOp::kCount, AggregateOp::kSum, AggregateOp::kMin,
                         AggregateOp::kMax, AggregateOp::kMean}) {
    if (AggregateOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown aggregate op '", std::string(name),
                                                 "' (expected count, sum, min, max or mean)"));
}

std::string_view KeyTypeName(KeyType type) {
  return type == KeyType::kUint64 ? "uint64" : "uint32";
}

std::string_view DuplicatePolicyName(DuplicatePolicy policy) {
  return policy == DuplicatePolicy::kKeepAll ? "keep_all" : "lowest_row";
}

absl::StatusOr<DuplicatePolicy> ParseDuplicatePolicy(std::string_view name) {
  for (DuplicatePolicy p : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
    if (DuplicatePolicyName(p) == name) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown duplicate policy '", std::string(name),
                                                 "' (expected lowest_row or keep_all)"));
}

std::string_view JoinKindName(JoinKind kind) {
  switch (kind) {
    case JoinKind::kInner:
      return "inner";
    case JoinKind::kLeftOuter:
      return "left_outer";
    case JoinKind::kLeftSemi:
      return "left_semi";
    case JoinKind::kLeftAnti:
      return "left_anti";
  }
  return "?";
}

absl::StatusOr<JoinKind> ParseJoinKind(std::string_view name) {
  for (JoinKind k :
       {JoinKind::kInner, JoinKind::kLeftOuter, JoinKind::kLeftSemi, JoinKind::kLeftAnti}) {
    if (JoinKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown join kind '", std::string(name),
                   "' (expected inner, left_outer, left_semi or left_anti)"));
}

void QueryStatistics::Merge(const QueryStatistics& other) {
  found += other.found;
  missing += other.missing;
  total_probes += other.total_probes;
  max_probes = std::max(max_probes, other.max_probes);
}

}  // namespace gpujoin::client
