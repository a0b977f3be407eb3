// Grouped aggregation over 2^28 rows (float32 values): count and mean, masked
// and not, for 16, 256, 4097, 65536 and 200000 groups, on the default path of
// each group count and, from 4097 groups, the other paths that hold the
// groups, for comparison. Outputs are poisoned before the timed runs and
// checked against a host reference: counts exactly, means to a float tolerance.
//
// Byte model: bytes read (keys 4 B, mask 4 B, values 4 B).
#include <cmath>

#include "cuda/aggregate/aggregate_ops.hpp"
#include "families.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

constexpr uint32_t kMaxGroups = 200000;

// The host reference of MakeGroups' rows: every group's exact count, its sum
// (in double) and sum of magnitudes, unmasked [0] and masked [1].
struct Reference {
  std::vector<uint32_t> count[2];
  std::vector<double> sum[2], abs[2];

  Reference(uint64_t n, uint32_t groups) {
    for (int m = 0; m < 2; ++m) {
      count[m].assign(groups, 0);
      sum[m].assign(groups, 0.0);
      abs[m].assign(groups, 0.0);
    }
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t h = GroupHashOf(i);
      const uint32_t k = h % groups;
      const double v = double(GroupValueOf(h));
      for (int m = 0; m < (((h >> 20) & 1u) != 0 ? 2 : 1); ++m) {
        ++count[m][k];
        sum[m][k] += v;
        abs[m][k] += std::fabs(v);
      }
    }
  }
};

// Counts exactly for every group; means to a float tolerance (NaN when empty).
bool OutputsOk(const Reference& ref, bool masked, bool is_count, const std::vector<uint32_t>& hc,
               const std::vector<float>& ho) {
  if (hc != ref.count[masked]) return false;
  if (is_count) return true;
  for (uint32_t g = 0; g < hc.size(); ++g) {
    const uint32_t c = ref.count[masked][g];
    if (c == 0) {
      if (ho[g] == ho[g]) return false;
      continue;
    }
    const double tol = 1e-3 * ref.abs[masked][g] / c + 1e-3;
    if (std::fabs(double(ho[g]) - ref.sum[masked][g] / c) > tol) return false;
  }
  return true;
}

// The target of a row: counts and masked means of few groups near the copy
// rate, 65536 groups at half (count) or a third (mean) of it.
void TargetOf(bool chosen, uint32_t groups, bool is_count, bool masked, std::string& target,
              double& tv) {
  if (chosen && groups <= 256 && is_count) {
    target = ">= 90% copy";
    tv = 0.90;
  }
  if (chosen && groups <= 256 && !is_count && masked) {
    target = ">= 75% copy";
    tv = 0.75;
  }
  if (chosen && groups == 65536) {
    target = is_count ? ">= 50% copy" : ">= 35% copy";
    tv = is_count ? 0.50 : 0.35;
  }
}

// One op and mask: the chosen path and, above 256 groups, the other paths that fit.
void Variants(BenchContext& ctx, gd::AggregateArgs a, const Reference& ref, uint32_t* counts,
              float* out) {
  cudaStream_t s = ctx.stream;
  const uint32_t groups = a.groups;
  const bool is_count = a.op == gj::AggregateOp::kCount, masked = a.mask != nullptr;
  const gd::AggregatePath chosen = gd::ChosenAggregatePath(a);
  std::vector<gd::AggregatePath> paths{chosen};
  if (groups > 256) {
    for (gd::AggregatePath p : {gd::AggregatePath::kSharedRange, gd::AggregatePath::kGlobal}) {
      if (p != chosen && gd::AggregatePathFits(a, p)) paths.push_back(p);
    }
  }
  for (gd::AggregatePath path : paths) {
    a.force_path = path;
    // Poisoned before the timed runs: a path that wrote nothing fails.
    CHECK_CUDA(cudaMemsetAsync(counts, 0xa5, groups * 4, s));
    CHECK_CUDA(cudaMemsetAsync(out, 0xa5, groups * 4, s));
    const double ms = ctx.MedianMs([&] { CHECK_CUDA(gd::Aggregate(a, s)); });
    CHECK_CUDA(cudaStreamSynchronize(s));
    const bool ok =
        OutputsOk(ref, masked, is_count, FetchAll(counts, groups), FetchAll(out, groups));
    const std::string name = std::string("group ") + (is_count ? "count" : "mean") + ", " +
                             std::to_string(groups) + " groups" + (masked ? ", masked" : "") +
                             " [" + std::string(gd::AggregatePathName(path)) + "]";
    ctx.Check(ok, name + ": counts or means differ from the host reference");
    const double bytes = double(a.rows) * (4 + (masked ? 4 : 0) + (is_count ? 0 : 4));
    std::string target;
    double tv = 0;
    TargetOf(path == chosen, groups, is_count, masked, target, tv);
    ctx.rows.push_back(
        {name + (ok ? "" : " FAIL"), double(a.rows), ms, bytes, target, tv, tv > 0 ? 2 : 0});
  }
}

}  // namespace

void RunAggregate(BenchContext& ctx) {
  const uint64_t n = (uint64_t{1} << 28) >> ctx.shift;
  DeviceAllocations mem;
  uint32_t* gkeys = mem.Array<uint32_t>(n);
  uint32_t* gmask = mem.Array<uint32_t>(n);
  float* gvalues = mem.Array<float>(n);
  uint32_t* counts = mem.Array<uint32_t>(kMaxGroups);
  float* out = mem.Array<float>(kMaxGroups);
  for (uint32_t groups : {16u, 256u, 4097u, 65536u, kMaxGroups}) {
    if (ctx.options.agg_groups != 0 && groups != ctx.options.agg_groups) continue;
    CHECK_CUDA(LaunchMakeGroups(gkeys, gmask, gvalues, n, groups, ctx.stream));
    const Reference ref(n, groups);
    for (bool masked : {false, true}) {
      for (gj::AggregateOp op : {gj::AggregateOp::kCount, gj::AggregateOp::kMean}) {
        const bool is_count = op == gj::AggregateOp::kCount;
        gd::AggregateArgs a;
        a.op = op;
        a.keys = gkeys;
        a.values = is_count ? nullptr : gvalues;
        a.mask = masked ? gmask : nullptr;
        a.rows = n;
        a.groups = groups;
        a.counts = counts;
        a.output = is_count ? nullptr : out;
        Variants(ctx, a, ref, counts, out);
      }
    }
  }
}

}  // namespace gpujoin::bench
