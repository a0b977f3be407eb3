// Grouped aggregation on the CPU.
//
// Counts, minima and maxima are order independent, so any split gives the
// sequential answer. Float sums are not, so the split is chosen from the input
// shape only (never from the thread count), which keeps results identical for
// every thread count:
//  - groups <= kStripedMaxGroups: rows are cut into a fixed number of stripes
//    (a function of the row count), each accumulated in row order into private
//    partials, then the partials are combined in stripe order;
//  - more groups: the group range is split between tasks, and every task scans
//    all rows but accumulates only its own groups, so each group sees its rows in
//    source order (exactly the sequential result).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "cpu/chunk_cursor.hpp"
#include "cpu/cpu_ops.hpp"
#include "gpujoin/engine/aggregation.hpp"

namespace gpujoin::engine::cpu {
namespace {

constexpr size_t kRowsPerStripe = size_t{1} << 15;
constexpr size_t kMaxStripes = 64;
constexpr size_t kMinGroupsPerTask = 1024;

// Per-group running state for one partial: contributing rows and (for value ops)
// the running sum / min / max. Empty min/max slots hold NaN.
struct Partial {
  std::vector<uint32_t> counts;
  std::vector<float> values;

  Partial(AggregateOp op, size_t groups) : counts(groups, 0) {
    if (op == AggregateOp::kMin || op == AggregateOp::kMax) {
      values.assign(groups, std::numeric_limits<float>::quiet_NaN());
    } else if (op != AggregateOp::kCount) {
      values.assign(groups, 0.0f);
    }
  }
};

// Folds finite value `v` into `cur` for `op`.
inline void Fold(AggregateOp op, float& cur, float v) {
  switch (op) {
    case AggregateOp::kSum:
    case AggregateOp::kMean:
      cur += v;
      break;
    case AggregateOp::kMin:
      if (std::isnan(cur) || FloatLess(v, cur)) cur = v;
      break;
    case AggregateOp::kMax:
      if (std::isnan(cur) || FloatLess(cur, v)) cur = v;
      break;
    case AggregateOp::kCount:
      break;
  }
}

// Accumulates rows [begin, end) whose key lies in [group_lo, group_hi) into `p`
// (indexed by key - group_lo).
void Accumulate(const AggregateNode& node, size_t begin, size_t end, size_t group_lo,
                size_t group_hi, Partial& p) {
  ChunkCursor<uint32_t> keys(node.keys, begin);
  std::optional<ChunkCursor<uint32_t>> mask;
  if (node.mask.has_value()) mask.emplace(*node.mask, begin);
  std::optional<ChunkCursor<float>> values;
  if (node.op != AggregateOp::kCount) values.emplace(node.values, begin);
  for (size_t r = begin; r < end; ++r) {
    const uint32_t key = keys.Next();
    const bool selected = !mask || mask->Next() != 0;
    const float v = values ? values->Next() : 0.0f;
    if (!selected || key < group_lo || key >= group_hi) continue;
    if (values && !std::isfinite(v)) continue;
    const size_t g = key - group_lo;
    ++p.counts[g];  // wraps mod 2^32
    if (values) Fold(node.op, p.values[g], v);
  }
}

// Writes the final outputs for groups [lo, lo + p.counts.size()).
void Emit(const AggregateNode& node, size_t lo, const Partial& p) {
  const size_t n = p.counts.size();
  if (!node.contributing_rows.empty()) {
    std::copy(p.counts.begin(), p.counts.end(), node.contributing_rows.begin() + lo);
  }
  switch (node.op) {
    case AggregateOp::kCount:
      std::copy(p.counts.begin(), p.counts.end(), node.count_output.begin() + lo);
      break;
    case AggregateOp::kMean:
      for (size_t g = 0; g < n; ++g) {
        node.value_output[lo + g] = p.counts[g] == 0
                                        ? std::numeric_limits<float>::quiet_NaN()
                                        : p.values[g] / static_cast<float>(p.counts[g]);
      }
      break;
    default:
      std::copy(p.values.begin(), p.values.end(), node.value_output.begin() + lo);
      break;
  }
}

void RunStriped(const AggregateNode& node, size_t rows, size_t groups, ThreadPool& pool) {
  const size_t stripes =
      std::clamp<size_t>((rows + kRowsPerStripe - 1) / kRowsPerStripe, 1, kMaxStripes);
  const std::vector<size_t> bounds = SplitRows(rows, stripes, 1);
  const size_t parts = bounds.size() - 1;
  std::vector<Partial> partial(parts, Partial(node.op, groups));
  pool.ParallelFor(
      parts, [&](size_t s) { Accumulate(node, bounds[s], bounds[s + 1], 0, groups, partial[s]); });
  Partial& total = partial[0];
  for (size_t s = 1; s < parts; ++s) {
    for (size_t g = 0; g < groups; ++g) {
      total.counts[g] += partial[s].counts[g];
      // Empty partial slots are +0 for sums (adding them changes nothing) and NaN
      // for min/max, which Fold must skip.
      if (node.op == AggregateOp::kCount) continue;
      const float v = partial[s].values[g];
      if (!std::isnan(v)) Fold(node.op, total.values[g], v);
    }
  }
  Emit(node, 0, total);
}

void RunByGroupRange(const AggregateNode& node, size_t rows, size_t groups, ThreadPool& pool) {
  const std::vector<size_t> bounds = SplitRows(groups, pool.size(), kMinGroupsPerTask);
  pool.ParallelFor(bounds.size() - 1, [&](size_t t) {
    Partial p(node.op, bounds[t + 1] - bounds[t]);
    Accumulate(node, 0, rows, bounds[t], bounds[t + 1], p);
    Emit(node, bounds[t], p);
  });
}

}  // namespace

void RunAggregate(const AggregateNode& node, ThreadPool& pool) {
  const size_t rows = TotalRows(node.keys);
  const size_t groups =
      node.op == AggregateOp::kCount ? node.count_output.size() : node.value_output.size();
  if (groups <= kStripedMaxGroups) {
    RunStriped(node, rows, groups, pool);
  } else {
    RunByGroupRange(node, rows, groups, pool);
  }
}

}  // namespace gpujoin::engine::cpu
