// Grouped aggregation on the CPU.
//
// Counts, minima and maxima are order independent, so any split gives the
// sequential answer. Float sums are not, so the split is chosen from the input
// shape only (never from the thread count), which keeps results identical for
// every thread count:
//  - groups <= kStripedMaxGroups: rows are cut into a fixed number of stripes
//    (a function of the row count), each accumulated in row order into private
//    partials, then the partials are combined in stripe order;
//  - more groups: every group sees its rows in source order (exactly the
//    sequential result). With up to 2 threads each thread scans all rows for its
//    own range of groups; with more, contributing rows are first routed (stably)
//    to buckets of consecutive groups, then each bucket is accumulated alone.
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
// Up to this many threads the many-group path scans all rows once per thread.
constexpr size_t kMaxThreadsForGroupRanges = 2;

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

// Calls fn(key, value) for every row of [begin, end), in row order, that
// contributes: mask nonzero (or no mask), key < groups and, for value ops, a
// finite value (value is 0 for count).
template <typename Fn>
void ForEachContributing(const AggregateNode& node, size_t begin, size_t end, size_t groups,
                         Fn&& fn) {
  ChunkCursor<uint32_t> keys(node.keys, begin);
  std::optional<ChunkCursor<uint32_t>> mask;
  if (node.mask.has_value()) mask.emplace(*node.mask, begin);
  std::optional<ChunkCursor<float>> values;
  if (node.op != AggregateOp::kCount) values.emplace(node.values, begin);
  for (size_t r = begin; r < end; ++r) {
    const uint32_t key = keys.Next();
    const bool selected = !mask || mask->Next() != 0;
    const float v = values ? values->Next() : 0.0f;
    if (!selected || key >= groups) continue;
    if (values && !std::isfinite(v)) continue;
    fn(key, v);
  }
}

// Folds one contributing row into `p`, whose slot 0 is group `group_lo`.
inline void AddRow(AggregateOp op, Partial& p, size_t group_lo, uint32_t key, float v) {
  const size_t g = key - group_lo;
  ++p.counts[g];  // wraps mod 2^32
  if (op != AggregateOp::kCount) Fold(op, p.values[g], v);
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
  pool.ParallelFor(parts, [&](size_t s) {
    ForEachContributing(node, bounds[s], bounds[s + 1], groups,
                        [&](uint32_t key, float v) { AddRow(node.op, partial[s], 0, key, v); });
  });
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

// Every task scans all rows and accumulates only its own range of groups, in row
// order. No scratch; the fastest many-group path when there are few threads.
void RunByGroupRange(const AggregateNode& node, size_t rows, size_t groups, ThreadPool& pool) {
  const std::vector<size_t> bounds = SplitRows(groups, pool.size(), kMinGroupsPerTask);
  pool.ParallelFor(bounds.size() - 1, [&](size_t t) {
    const size_t lo = bounds[t], hi = bounds[t + 1];
    Partial p(node.op, hi - lo);
    ForEachContributing(node, 0, rows, hi, [&](uint32_t key, float v) {
      if (key >= lo) AddRow(node.op, p, lo, key, v);
    });
    Emit(node, lo, p);
  });
}

// A contributing row routed to its bucket.
struct Entry {
  uint32_t key;
  float value;
};

void RunBucketed(const AggregateNode& node, size_t rows, size_t groups, ThreadPool& pool) {
  const size_t buckets = std::min<size_t>(size_t{pool.size()} * 4,
                                          (groups + kMinGroupsPerTask - 1) / kMinGroupsPerTask);
  const size_t per_bucket = (groups + buckets - 1) / buckets;
  const std::vector<size_t> stripes = SplitRows(rows, size_t{pool.size()} * 4, kRowsPerStripe);
  const size_t n_stripes = stripes.size() - 1;

  // Pass 1: contributing rows per (stripe, bucket).
  std::vector<uint64_t> next(n_stripes * buckets, 0);
  pool.ParallelFor(n_stripes, [&](size_t s) {
    uint64_t* count = &next[s * buckets];
    ForEachContributing(node, stripes[s], stripes[s + 1], groups,
                        [&](uint32_t key, float) { ++count[key / per_bucket]; });
  });
  // Exclusive scan, bucket-major then stripe order, so each bucket's entries end
  // up in row order.
  std::vector<uint64_t> bucket_begin(buckets + 1, 0);
  uint64_t total = 0;
  for (size_t b = 0; b < buckets; ++b) {
    bucket_begin[b] = total;
    for (size_t s = 0; s < n_stripes; ++s) {
      const uint64_t n = next[s * buckets + b];
      next[s * buckets + b] = total;
      total += n;
    }
  }
  bucket_begin[buckets] = total;

  // Pass 2: scatter (key, value) into the buckets.
  std::vector<Entry> entries(total);
  pool.ParallelFor(n_stripes, [&](size_t s) {
    uint64_t* out = &next[s * buckets];
    ForEachContributing(node, stripes[s], stripes[s + 1], groups, [&](uint32_t key, float v) {
      entries[out[key / per_bucket]++] = Entry{key, v};
    });
  });

  // Pass 3: each bucket accumulates its own groups in row order.
  pool.ParallelFor(buckets, [&](size_t b) {
    const size_t lo = b * per_bucket;
    const size_t hi = std::min(groups, lo + per_bucket);
    if (lo >= hi) return;
    Partial p(node.op, hi - lo);
    for (uint64_t i = bucket_begin[b]; i < bucket_begin[b + 1]; ++i) {
      AddRow(node.op, p, lo, entries[i].key, entries[i].value);
    }
    Emit(node, lo, p);
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
    // Both paths add each group's rows in source order, so they give identical
    // bits; bucketing pays three passes and wins once there are several threads.
    if (pool.size() <= kMaxThreadsForGroupRanges) {
      RunByGroupRange(node, rows, groups, pool);
    } else {
      RunBucketed(node, rows, groups, pool);
    }
  }
}

}  // namespace gpujoin::engine::cpu
