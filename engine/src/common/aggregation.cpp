// Merging of partial grouped-aggregation results (AggregationAccumulator) and the
// -0 < +0 float order used by min/max on every backend.
#include "gpujoin/engine/aggregation.hpp"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine {

bool FloatLess(float a, float b) {
  // == treats -0 and +0 as equal; the sign bit breaks that tie so -0 sorts first.
  if (a == b) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

AggregationAccumulator::AggregationAccumulator(AggregateOp op, uint32_t groups)
    : op_(op), groups_(groups), counts_(groups, 0) {
  switch (op) {
    case AggregateOp::kCount:
      break;
    case AggregateOp::kSum:
    case AggregateOp::kMean:
      values_.assign(groups, 0.0f);
      break;
    case AggregateOp::kMin:
    case AggregateOp::kMax:
      values_.assign(groups, std::numeric_limits<float>::quiet_NaN());
      break;
  }
}

absl::Status AggregationAccumulator::Merge(std::span<const uint32_t> counts,
                                           std::span<const float> values) {
  const std::string_view name = AggregateOpName(op_);
  if (counts.size() != groups_) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), " partial: counts has ",
                                                   counts.size(),
                                                   " groups but the accumulator has ", groups_));
  }
  if (op_ == AggregateOp::kCount) {
    if (!values.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("count partial: values must be empty, got ", values.size(), " entries"));
    }
  } else if (values.size() != groups_) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), " partial: values has ",
                                                   values.size(),
                                                   " groups but the accumulator has ", groups_));
  }
  for (uint32_t g = 0; g < groups_; ++g) counts_[g] += counts[g];  // wraps mod 2^32
  switch (op_) {
    case AggregateOp::kCount:
      break;
    case AggregateOp::kSum:
    case AggregateOp::kMean:
      for (uint32_t g = 0; g < groups_; ++g) values_[g] += values[g];
      break;
    case AggregateOp::kMin:
    case AggregateOp::kMax:
      for (uint32_t g = 0; g < groups_; ++g) {
        const float v = values[g];
        if (std::isnan(v)) continue;  // an empty group in this partial
        float& cur = values_[g];
        if (std::isnan(cur)) {
          cur = v;
        } else if (op_ == AggregateOp::kMin ? FloatLess(v, cur) : FloatLess(cur, v)) {
          cur = v;
        }
      }
      break;
  }
  return absl::OkStatus();
}

std::vector<float> AggregationAccumulator::Values() const {
  if (op_ != AggregateOp::kMean) return values_;
  std::vector<float> out(groups_);
  for (uint32_t g = 0; g < groups_; ++g) {
    out[g] = counts_[g] == 0 ? std::numeric_limits<float>::quiet_NaN()
                             : values_[g] / static_cast<float>(counts_[g]);
  }
  return out;
}

}  // namespace gpujoin::engine
