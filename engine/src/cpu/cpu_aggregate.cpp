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
//
// One routine for every value type V of AggregateNode::values, accumulating in AccOf<V>: float for float32 (the reference
// contract, unchanged), double for float64, and a 128-bit integer for the
// integer types, which holds any exact sum of 2^32 - 1 rows of 64-bit values;
// the 64-bit result and its overflow flag are formed once per group at the end.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
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

// The running-state type of value type V (see the file comment).
template <typename V>
using AccOf = std::conditional_t<std::is_floating_point_v<V>, V, __int128>;

// Per-group running state for one partial: contributing rows and (for value ops)
// the running sum / min / max. Empty float min/max slots hold NaN; an integer
// slot's emptiness is its zero count.
template <typename V>
struct Partial {
  using Acc = AccOf<V>;
  std::vector<uint32_t> counts;
  std::vector<Acc> values;

  Partial(AggregateOp op, size_t groups) : counts(groups, 0) {
    if (op == AggregateOp::kMin || op == AggregateOp::kMax) {
      if constexpr (std::is_floating_point_v<V>) {
        values.assign(groups, std::numeric_limits<V>::quiet_NaN());
      } else {
        values.assign(groups, 0);
      }
    } else if (op != AggregateOp::kCount) {
      values.assign(groups, Acc{0});
    }
  }
};

template <typename A>
inline bool Less(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return FloatLess(a, b);
  } else {
    return a < b;
  }
}

// Folds value `v` into `cur` for `op`; `empty`: `cur` holds no value yet.
template <typename A>
inline void Fold(AggregateOp op, A& cur, A v, bool empty) {
  switch (op) {
    case AggregateOp::kSum:
    case AggregateOp::kMean:
      cur += v;
      break;
    case AggregateOp::kMin:
      if (empty || Less(v, cur)) cur = v;
      break;
    case AggregateOp::kMax:
      if (empty || Less(cur, v)) cur = v;
      break;
    case AggregateOp::kCount:
      break;
  }
}

// The value column of type V a value op reads.
template <typename V>
const Chunked<V>& ValuesOf(const AggregateNode& node) {
  return std::get<Chunked<V>>(node.values);
}

// Calls fn(key, value) for every row of [begin, end), in row order, that
// contributes: mask nonzero (or no mask), key < groups and, for value ops, a
// finite value (value is 0 for count).
template <typename V, typename Fn>
void ForEachContributing(const AggregateNode& node, size_t begin, size_t end, size_t groups,
                         Fn&& fn) {
  ChunkCursor<uint32_t> keys(node.keys, begin);
  std::optional<ChunkCursor<uint32_t>> mask;
  if (node.mask.has_value()) mask.emplace(*node.mask, begin);
  std::optional<ChunkCursor<V>> values;
  if (node.op != AggregateOp::kCount) values.emplace(ValuesOf<V>(node), begin);
  for (size_t r = begin; r < end; ++r) {
    const uint32_t key = keys.Next();
    const bool selected = !mask || mask->Next() != 0;
    const V v = values ? values->Next() : V{0};
    if (!selected || key >= groups) continue;
    if constexpr (std::is_floating_point_v<V>) {
      if (values && !std::isfinite(v)) continue;
    }
    fn(key, v);
  }
}

// Folds one contributing row into `p`, whose slot 0 is group `group_lo`.
template <typename V>
inline void AddRow(AggregateOp op, Partial<V>& p, size_t group_lo, uint32_t key, V v) {
  const size_t g = key - group_lo;
  const bool empty = p.counts[g] == 0;
  ++p.counts[g];  // wraps mod 2^32
  if (op != AggregateOp::kCount) Fold<AccOf<V>>(op, p.values[g], AccOf<V>(v), empty);
}

// The result word of one group (AggregateNode::output) of a value op and its
// overflow flag, from the exact state `acc` over `count` rows.
template <typename V>
uint64_t ResultWord(AggregateOp op, AccOf<V> acc, uint32_t count, bool& overflow) {
  overflow = false;
  if constexpr (std::is_floating_point_v<V>) {
    if (op == AggregateOp::kMean) {
      acc = count == 0 ? std::numeric_limits<V>::quiet_NaN() : acc / static_cast<V>(count);
    }
    if constexpr (std::is_same_v<V, float>) {
      return WordOfFloat32(acc);
    } else {
      return std::bit_cast<uint64_t>(acc);
    }
  } else {
    constexpr bool kSigned = std::is_signed_v<V>;
    if (op == AggregateOp::kMin || op == AggregateOp::kMax) {
      // Empty: 0. Signed values sign-extend through int64.
      return count == 0 ? 0 : static_cast<uint64_t>(static_cast<int64_t>(acc));
    }
    const __int128 lo = kSigned ? __int128{std::numeric_limits<int64_t>::min()} : 0;
    const __int128 hi = kSigned ? __int128{std::numeric_limits<int64_t>::max()}
                                : __int128{std::numeric_limits<uint64_t>::max()};
    overflow = acc < lo || acc > hi;
    const uint64_t low64 = static_cast<uint64_t>(acc);  // the low 64 bits
    if (op != AggregateOp::kMean) return low64;
    double mean = std::numeric_limits<double>::quiet_NaN();
    if (count != 0 && !overflow) {
      const double sum =
          kSigned ? static_cast<double>(static_cast<int64_t>(low64)) : static_cast<double>(low64);
      mean = sum / static_cast<double>(count);
    }
    return std::bit_cast<uint64_t>(mean);
  }
}

// Writes the final outputs for groups [lo, lo + p.counts.size()).
template <typename V>
void Emit(const AggregateNode& node, size_t lo, const Partial<V>& p) {
  const size_t n = p.counts.size();
  if (!node.contributing_rows.empty()) {
    std::copy(p.counts.begin(), p.counts.end(), node.contributing_rows.begin() + lo);
  }
  if (node.op == AggregateOp::kCount) {
    std::copy(p.counts.begin(), p.counts.end(), node.output.begin() + lo);
    return;
  }
  for (size_t g = 0; g < n; ++g) {
    bool overflow = false;
    node.output[lo + g] = ResultWord<V>(node.op, p.values[g], p.counts[g], overflow);
    if (!node.overflow.empty()) node.overflow[lo + g] = overflow ? 1 : 0;
  }
}

template <typename V>
void RunStriped(const AggregateNode& node, size_t rows, size_t groups, ThreadPool& pool) {
  const size_t stripes =
      std::clamp<size_t>((rows + kRowsPerStripe - 1) / kRowsPerStripe, 1, kMaxStripes);
  const std::vector<size_t> bounds = SplitRows(rows, stripes, 1);
  const size_t parts = bounds.size() - 1;
  std::vector<Partial<V>> partial(parts, Partial<V>(node.op, groups));
  pool.ParallelFor(parts, [&](size_t s) {
    ForEachContributing<V>(node, bounds[s], bounds[s + 1], groups,
                           [&](uint32_t key, V v) { AddRow<V>(node.op, partial[s], 0, key, v); });
  });
  Partial<V>& total = partial[0];
  for (size_t s = 1; s < parts; ++s) {
    for (size_t g = 0; g < groups; ++g) {
      const bool empty = total.counts[g] == 0;
      total.counts[g] += partial[s].counts[g];
      // Empty partial slots are +0 for sums (adding them changes nothing) and
      // empty for min/max, which Fold must skip (NaN for floats, whose NaN sums
      // are skipped as well).
      if (node.op == AggregateOp::kCount) continue;
      const AccOf<V> v = partial[s].values[g];
      if constexpr (std::is_floating_point_v<V>) {
        if (std::isnan(v)) continue;
      } else {
        const bool is_sum = node.op == AggregateOp::kSum || node.op == AggregateOp::kMean;
        if (!is_sum && partial[s].counts[g] == 0) continue;
      }
      Fold<AccOf<V>>(node.op, total.values[g], v, empty);
    }
  }
  Emit<V>(node, 0, total);
}

// Every task scans all rows and accumulates only its own range of groups, in row
// order. No scratch; the fastest many-group path when there are few threads.
template <typename V>
void RunByGroupRange(const AggregateNode& node, size_t rows, size_t groups, ThreadPool& pool) {
  const std::vector<size_t> bounds = SplitRows(groups, pool.size(), kMinGroupsPerTask);
  pool.ParallelFor(bounds.size() - 1, [&](size_t t) {
    const size_t lo = bounds[t], hi = bounds[t + 1];
    Partial<V> p(node.op, hi - lo);
    ForEachContributing<V>(node, 0, rows, hi, [&](uint32_t key, V v) {
      if (key >= lo) AddRow<V>(node.op, p, lo, key, v);
    });
    Emit<V>(node, lo, p);
  });
}

// A contributing row routed to its bucket.
template <typename V>
struct Entry {
  uint32_t key;
  V value;
};

template <typename V>
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
    ForEachContributing<V>(node, stripes[s], stripes[s + 1], groups,
                           [&](uint32_t key, V) { ++count[key / per_bucket]; });
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
  std::vector<Entry<V>> entries(total);
  pool.ParallelFor(n_stripes, [&](size_t s) {
    uint64_t* out = &next[s * buckets];
    ForEachContributing<V>(node, stripes[s], stripes[s + 1], groups, [&](uint32_t key, V v) {
      entries[out[key / per_bucket]++] = Entry<V>{key, v};
    });
  });

  // Pass 3: each bucket accumulates its own groups in row order.
  pool.ParallelFor(buckets, [&](size_t b) {
    const size_t lo = b * per_bucket;
    const size_t hi = std::min(groups, lo + per_bucket);
    if (lo >= hi) return;
    Partial<V> p(node.op, hi - lo);
    for (uint64_t i = bucket_begin[b]; i < bucket_begin[b + 1]; ++i) {
      AddRow<V>(node.op, p, lo, entries[i].key, entries[i].value);
    }
    Emit<V>(node, lo, p);
  });
}

template <typename V>
void RunTyped(const AggregateNode& node, size_t groups, ThreadPool& pool) {
  const size_t rows = TotalRows(node.keys);
  if (groups <= kStripedMaxGroups) {
    RunStriped<V>(node, rows, groups, pool);
  } else {
    // Both paths add each group's rows in source order, so they give identical
    // bits; bucketing pays three passes and wins once there are several threads.
    if (pool.size() <= kMaxThreadsForGroupRanges) {
      RunByGroupRange<V>(node, rows, groups, pool);
    } else {
      RunBucketed<V>(node, rows, groups, pool);
    }
  }
}

}  // namespace

void RunAggregate(const AggregateNode& node, ThreadPool& pool) {
  std::visit(
      [&](const auto& column) {
        using C = std::decay_t<decltype(column)>;
        if constexpr (std::is_same_v<C, std::monostate>) {
          RunTyped<float>(node, node.output.size(), pool);  // count: no values are read
        } else {
          RunTyped<typename C::value_type::value_type>(node, node.output.size(), pool);
        }
      },
      node.values);
}

}  // namespace gpujoin::engine::cpu
