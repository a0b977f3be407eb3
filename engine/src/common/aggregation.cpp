// Merging of partial grouped-aggregation results (AggregationAccumulator), the
// typed-aggregation type rules and the -0 < +0 float order used by min/max on
// every backend.
#include "gpujoin/engine/aggregation.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <variant>

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
  return std::visit(
      [](const auto& column) -> std::optional<ColumnType> {
        using C = std::decay_t<decltype(column)>;
        if constexpr (std::is_same_v<C, std::monostate>) {
          return std::nullopt;
        } else {
          return kColumnTypeOf<typename C::value_type::value_type>;
        }
      },
      values);
}

std::vector<float> Float32sOfWords(std::span<const uint64_t> words) {
  std::vector<float> out(words.size());
  for (size_t i = 0; i < words.size(); ++i) out[i] = Float32OfWord(words[i]);
  return out;
}

bool IsAggregateValueType(ColumnType type) {
  return IsSignedInt(type) || IsUnsignedInt(type) || type == ColumnType::kFloat32 ||
         type == ColumnType::kFloat64;
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
  if (op != AggregateOp::kCount) words_.assign(groups, EmptyWord());
}

uint64_t AggregationAccumulator::EmptyWord() const {
  const bool minmax = op_ == AggregateOp::kMin || op_ == AggregateOp::kMax;
  if (value_type_ == ColumnType::kFloat32) {
    return WordOfFloat32(minmax ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
  }
  if (value_type_ == ColumnType::kFloat64) {
    return std::bit_cast<uint64_t>(minmax ? std::numeric_limits<double>::quiet_NaN() : 0.0);
  }
  return 0;
}

void AggregationAccumulator::Grow(uint32_t groups) {
  if (groups <= groups_) return;
  counts_.resize(groups, 0);
  counts64_.resize(groups, 0);
  overflow_.resize(groups, 0);
  if (op_ != AggregateOp::kCount) words_.resize(groups, EmptyWord());
  groups_ = groups;
}

namespace {

// Folds the float partial word `w` into `cur` (float32 words hold their bits in
// the low 32): sums add in F; min/max skip a partial's empty (NaN) group.
template <typename F>
void MergeFloat(bool minmax, bool is_min, uint64_t w, uint64_t& cur) {
  auto load = [](uint64_t word) {
    if constexpr (std::is_same_v<F, float>) {
      return Float32OfWord(word);
    } else {
      return std::bit_cast<double>(word);
    }
  };
  const F v = load(w);
  F c = load(cur);
  if (!minmax) {
    c += v;
  } else if (!std::isnan(v) && (std::isnan(c) || (is_min ? FloatLess(v, c) : FloatLess(c, v)))) {
    c = v;
  }
  if constexpr (std::is_same_v<F, float>) {
    cur = WordOfFloat32(c);
  } else {
    cur = std::bit_cast<uint64_t>(c);
  }
}

}  // namespace

absl::Status AggregationAccumulator::Merge(std::span<const uint32_t> counts,
                                           std::span<const uint64_t> words,
                                           std::span<const uint8_t> overflow) {
  const std::string name(AggregateOpName(op_));
  const size_t want_words = op_ == AggregateOp::kCount ? 0 : groups_;
  if (counts.size() != groups_ || words.size() != want_words) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " partial: counts has ", counts.size(), " groups and words ", words.size(),
        " but the accumulator has ", groups_, " groups and takes ", want_words, " words"));
  }
  const bool flags = AggregateReportsOverflow(op_, value_type_);
  if (overflow.size() != (flags ? groups_ : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " partial: overflow has ", overflow.size(), " flags; expected ", flags ? groups_ : 0,
        " for ", std::string(ColumnTypeName(value_type_)), " values"));
  }
  const bool minmax = op_ == AggregateOp::kMin || op_ == AggregateOp::kMax;
  const bool is_min = op_ == AggregateOp::kMin;
  const bool is_signed = IsSignedInt(value_type_);
  for (uint32_t g = 0; g < groups_; ++g) {
    const bool was_empty = counts64_[g] == 0;
    counts_[g] += counts[g];  // wraps mod 2^32
    counts64_[g] += counts[g];
    if (op_ == AggregateOp::kCount) continue;
    uint64_t& cur = words_[g];
    const uint64_t w = words[g];
    if (value_type_ == ColumnType::kFloat32) {
      MergeFloat<float>(minmax, is_min, w, cur);
      continue;
    }
    if (value_type_ == ColumnType::kFloat64) {
      MergeFloat<double>(minmax, is_min, w, cur);
      continue;
    }
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

std::vector<uint64_t> AggregationAccumulator::Words() const {
  if (op_ == AggregateOp::kCount) return std::vector<uint64_t>(counts_.begin(), counts_.end());
  if (op_ != AggregateOp::kMean) return words_;
  std::vector<uint64_t> out(groups_);
  for (uint32_t g = 0; g < groups_; ++g) {
    if (value_type_ == ColumnType::kFloat32) {
      // The reference: the float32 sum over the wrapped uint32 count.
      out[g] = WordOfFloat32(counts_[g] == 0 ? std::numeric_limits<float>::quiet_NaN()
                                             : Float32OfWord(words_[g]) /
                                                   static_cast<float>(counts_[g]));
      continue;
    }
    double mean = std::numeric_limits<double>::quiet_NaN();
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
