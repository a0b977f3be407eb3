// Merging of partial grouped-aggregation results (AggregationAccumulator), the
// typed-aggregation type rules and the -0 < +0 float order used by min/max on
// every backend.
#include "gpujoin/engine/aggregation.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine {
namespace {

bool IsSignedInt(ColumnType t) { return t == ColumnType::kInt32 || t == ColumnType::kInt64; }
bool IsUnsignedInt(ColumnType t) { return t == ColumnType::kUint32 || t == ColumnType::kUint64; }

template <typename F>
bool FloatLessT(F a, F b) {
  // == treats -0 and +0 as equal; the sign bit breaks that tie so -0 sorts first.
  if (a == b) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

}  // namespace

bool FloatLess(float a, float b) { return FloatLessT(a, b); }
bool FloatLess(double a, double b) { return FloatLessT(a, b); }

std::optional<ColumnType> AggregateValueType(const AggregateValues& values) {
  switch (values.index()) {
    case 1:
      return ColumnType::kInt32;
    case 2:
      return ColumnType::kInt64;
    case 3:
      return ColumnType::kUint32;
    case 4:
      return ColumnType::kUint64;
    case 5:
      return ColumnType::kFloat64;
    default:
      return std::nullopt;
  }
}

bool IsTypedAggregateValue(ColumnType type) {
  return IsSignedInt(type) || IsUnsignedInt(type) || type == ColumnType::kFloat64;
}

ColumnType AggregateResultType(AggregateOp op, ColumnType value_type) {
  switch (op) {
    case AggregateOp::kCount:
      return ColumnType::kUint32;
    case AggregateOp::kMin:
    case AggregateOp::kMax:
      return value_type;
    case AggregateOp::kMean:
      return value_type == ColumnType::kFloat32 ? ColumnType::kFloat32 : ColumnType::kFloat64;
    case AggregateOp::kSum:
      break;
  }
  if (IsSignedInt(value_type)) return ColumnType::kInt64;
  if (IsUnsignedInt(value_type)) return ColumnType::kUint64;
  return value_type;
}

bool AggregateReportsOverflow(AggregateOp op, ColumnType value_type) {
  return (op == AggregateOp::kSum || op == AggregateOp::kMean) &&
         (IsSignedInt(value_type) || IsUnsignedInt(value_type));
}

AggregationAccumulator::AggregationAccumulator(AggregateOp op, uint32_t groups,
                                               ColumnType value_type)
    : op_(op),
      groups_(groups),
      value_type_(op == AggregateOp::kCount ? ColumnType::kFloat32 : value_type),
      counts_(groups, 0),
      counts64_(groups, 0),
      overflow_(groups, 0) {
  if (op == AggregateOp::kCount) return;
  const bool minmax = op == AggregateOp::kMin || op == AggregateOp::kMax;
  if (value_type_ == ColumnType::kFloat32) {
    values_.assign(groups, minmax ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
  } else if (value_type_ == ColumnType::kFloat64) {
    words_.assign(groups,
                  std::bit_cast<uint64_t>(minmax ? std::numeric_limits<double>::quiet_NaN() : 0.0));
  } else {
    words_.assign(groups, 0);
  }
}

absl::Status AggregationAccumulator::Merge(std::span<const uint32_t> counts,
                                           std::span<const float> values) {
  const std::string_view name = AggregateOpName(op_);
  if (value_type_ != ColumnType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), " partial: float32 values given to a ",
                     std::string(ColumnTypeName(value_type_)), " accumulator"));
  }
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
  for (uint32_t g = 0; g < groups_; ++g) {
    counts_[g] += counts[g];  // wraps mod 2^32
    counts64_[g] += counts[g];
  }
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

absl::Status AggregationAccumulator::Merge(std::span<const uint32_t> counts,
                                           std::span<const uint64_t> words,
                                           std::span<const uint8_t> overflow) {
  const std::string name(AggregateOpName(op_));
  if (value_type_ == ColumnType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " partial: typed words given to a float32 accumulator"));
  }
  if (counts.size() != groups_ || words.size() != groups_) {
    return absl::InvalidArgumentError(absl::StrCat(name, " partial: counts has ", counts.size(),
                                                   " groups and words ", words.size(),
                                                   " but the accumulator has ", groups_));
  }
  const bool flags = AggregateReportsOverflow(op_, value_type_);
  if (overflow.size() != (flags ? groups_ : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " partial: overflow has ", overflow.size(), " flags; expected ", flags ? groups_ : 0,
        " for ", std::string(ColumnTypeName(value_type_)), " values"));
  }
  const bool minmax = op_ == AggregateOp::kMin || op_ == AggregateOp::kMax;
  const bool is_min = op_ == AggregateOp::kMin;
  for (uint32_t g = 0; g < groups_; ++g) {
    const bool was_empty = counts64_[g] == 0;
    counts_[g] += counts[g];  // wraps mod 2^32
    counts64_[g] += counts[g];
    uint64_t& cur = words_[g];
    const uint64_t w = words[g];
    if (value_type_ == ColumnType::kFloat64) {
      const double v = std::bit_cast<double>(w);
      double c = std::bit_cast<double>(cur);
      if (!minmax) {
        c += v;  // as the float32 path
      } else if (!std::isnan(v) &&
                 (std::isnan(c) || (is_min ? FloatLess(v, c) : FloatLess(c, v)))) {
        c = v;
      }
      cur = std::bit_cast<uint64_t>(c);
      continue;
    }
    const bool is_signed = IsSignedInt(value_type_);
    if (minmax) {
      if (counts[g] == 0) continue;  // an empty group in this partial (its word is 0)
      const bool less = is_signed ? static_cast<int64_t>(w) < static_cast<int64_t>(cur) : w < cur;
      const bool greater =
          is_signed ? static_cast<int64_t>(cur) < static_cast<int64_t>(w) : cur < w;
      if (was_empty || (is_min ? less : greater)) cur = w;
      continue;
    }
    // Sums: exact while the total fits; the low 64 bits (a wrapping add) beyond.
    bool out = false;
    if (is_signed) {
      int64_t r;
      out = __builtin_add_overflow(static_cast<int64_t>(cur), static_cast<int64_t>(w), &r);
    } else {
      uint64_t r;
      out = __builtin_add_overflow(cur, w, &r);
    }
    cur += w;
    if (out || overflow[g] != 0) overflow_[g] = 1;
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

std::vector<uint64_t> AggregationAccumulator::Words() const {
  if (op_ != AggregateOp::kMean) return words_;
  std::vector<uint64_t> out(groups_);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (uint32_t g = 0; g < groups_; ++g) {
    double mean = nan;
    const double n = static_cast<double>(counts64_[g]);
    if (counts64_[g] != 0 && overflow_[g] == 0) {
      switch (value_type_) {
        case ColumnType::kFloat64:
          mean = std::bit_cast<double>(words_[g]) / n;
          break;
        case ColumnType::kInt32:
        case ColumnType::kInt64:
          mean = static_cast<double>(static_cast<int64_t>(words_[g])) / n;
          break;
        default:
          mean = static_cast<double>(words_[g]) / n;
          break;
      }
    }
    out[g] = std::bit_cast<uint64_t>(mean);
  }
  return out;
}

}  // namespace gpujoin::engine
