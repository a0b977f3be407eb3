#include "gpujoin/common/operation_kinds.hpp"

#include <array>

#include "names.hpp"

namespace gpujoin {
namespace {
// Each indexed by its enum.
constexpr std::array<std::string_view, 3> kKeyTypes = {"uint32", "uint64", "columns"};
constexpr std::array<std::string_view, 2> kDuplicatePolicies = {"lowest_row", "keep_all"};
constexpr std::array<std::string_view, 4> kJoinKinds = {"inner", "left_outer", "left_semi",
                                                        "left_anti"};
constexpr std::array<std::string_view, 5> kAggregateOps = {"count", "sum", "min", "max", "mean"};
}  // namespace

std::string_view KeyTypeName(KeyType type) {
  return detail::NameIn(kKeyTypes, static_cast<size_t>(type));
}
std::string_view DuplicatePolicyName(DuplicatePolicy policy) {
  return detail::NameIn(kDuplicatePolicies, static_cast<size_t>(policy));
}
std::string_view JoinKindName(JoinKind kind) {
  return detail::NameIn(kJoinKinds, static_cast<size_t>(kind));
}
std::string_view AggregateOpName(AggregateOp op) {
  return detail::NameIn(kAggregateOps, static_cast<size_t>(op));
}

absl::StatusOr<KeyType> ParseKeyType(std::string_view name) {
  return detail::ParseIn<KeyType>(kKeyTypes, "key type", name);
}
absl::StatusOr<DuplicatePolicy> ParseDuplicatePolicy(std::string_view name) {
  return detail::ParseIn<DuplicatePolicy>(kDuplicatePolicies, "duplicate policy", name);
}
absl::StatusOr<JoinKind> ParseJoinKind(std::string_view name) {
  return detail::ParseIn<JoinKind>(kJoinKinds, "join kind", name);
}
absl::StatusOr<AggregateOp> ParseAggregateOp(std::string_view name) {
  return detail::ParseIn<AggregateOp>(kAggregateOps, "aggregate op", name);
}

}  // namespace gpujoin
