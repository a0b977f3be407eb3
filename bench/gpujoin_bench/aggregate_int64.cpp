// Typed aggregation: the exact int64 grouped sum over 2^26 rows, 16 and 256
// groups, unmasked and masked; on the chosen path with contributing-row counts
// (what gpujoind runs), and for comparison without them and on the other paths
// that hold the groups. Every group's sum, count and overflow flag is checked
// exactly against the host.
//
// Byte model: 4 (key) + 8 (value) + 4 (mask) bytes read per row.
#include "cuda/aggregate/aggregate_ops.hpp"
#include "families.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

// The host reference of MakeGroupsI64's rows: every group's count and sum,
// unmasked [0] and masked [1].
struct Reference {
  std::vector<uint32_t> count[2];
  std::vector<int64_t> sum[2];

  Reference(uint64_t n, uint32_t groups) {
    for (int m = 0; m < 2; ++m) {
      count[m].assign(groups, 0);
      sum[m].assign(groups, 0);
    }
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t h = GroupHashOf(i);
      const uint32_t k = h % groups;
      for (int m = 0; m < (((h >> 20) & 1u) != 0 ? 2 : 1); ++m) {
        ++count[m][k];
        sum[m][k] += Int64ValueOf(i);
      }
    }
  }
};

// The outputs of one variant's runs.
struct Outputs {
  uint32_t* counts;
  uint64_t* sums;
  uint8_t* overflow;
};

void Variants(BenchContext& ctx, gd::AggregateArgs a, const Reference& ref, const Outputs& o) {
  cudaStream_t s = ctx.stream;
  const uint32_t groups = a.groups;
  const bool masked = a.mask != nullptr;
  const gd::AggregatePath chosen = gd::ChosenAggregatePath(a);
  struct Variant {
    gd::AggregatePath path;
    bool counts;
  };
  std::vector<Variant> variants{{chosen, true}, {chosen, false}};
  for (gd::AggregatePath p : {gd::AggregatePath::kSharedRange, gd::AggregatePath::kGlobal}) {
    if (p != chosen && gd::AggregatePathFits(a, p)) variants.push_back({p, true});
  }
  for (const Variant& variant : variants) {
    a.force_path = variant.path;
    a.counts = variant.counts ? o.counts : nullptr;
    CHECK_CUDA(cudaMemsetAsync(o.counts, 0xa5, groups * 4, s));
    CHECK_CUDA(cudaMemsetAsync(o.sums, 0xa5, groups * 16, s));
    CHECK_CUDA(cudaMemsetAsync(o.overflow, 0xa5, groups, s));
    const double ms = ctx.MedianMs([&] { CHECK_CUDA(gd::Aggregate(a, s)); });
    CHECK_CUDA(cudaStreamSynchronize(s));
    const std::vector<uint32_t> hc = FetchAll(o.counts, groups);
    const std::vector<int64_t> ho = FetchAll(reinterpret_cast<const int64_t*>(o.sums), groups);
    const std::vector<uint8_t> hf = FetchAll(o.overflow, groups);
    const bool ok = (!variant.counts || hc == ref.count[masked]) && ho == ref.sum[masked] &&
                    hf == std::vector<uint8_t>(groups, 0);
    const std::string name = "group sum int64, " + std::to_string(groups) + " groups" +
                             (masked ? ", masked" : "") + (variant.counts ? "" : ", no counts") +
                             " [" + std::string(gd::AggregatePathName(variant.path)) + "]";
    ctx.Check(ok, name + ": sums, counts or overflow flags differ from the host reference");
    const double bytes = double(a.rows) * (4 + 8 + (masked ? 4 : 0));
    // An int64 grouped sum of 256 groups at >= 75 % of copy.
    const double tv =
        groups == 256 && !masked && variant.path == chosen && variant.counts ? 0.75 : 0;
    ctx.rows.push_back({name + (ok ? "" : " FAIL"), double(a.rows), ms, bytes,
                        tv > 0 ? ">= 75% copy" : "", tv, tv > 0 ? 2 : 0});
  }
}

}  // namespace

void RunAggregateInt64(BenchContext& ctx) {
  const uint64_t n = (uint64_t{1} << 26) >> ctx.shift;
  DeviceAllocations mem;
  uint32_t* gkeys = mem.Array<uint32_t>(n);
  uint32_t* gmask = mem.Array<uint32_t>(n);
  int64_t* gvalues = mem.Array<int64_t>(n);
  const Outputs o{mem.Array<uint32_t>(256), mem.Array<uint64_t>(2 * 256), mem.Array<uint8_t>(256)};
  for (uint32_t groups : {16u, 256u}) {
    if (ctx.options.agg_groups != 0 && groups != ctx.options.agg_groups) continue;
    CHECK_CUDA(LaunchMakeGroupsI64(gkeys, gmask, gvalues, n, groups, ctx.stream));
    const Reference ref(n, groups);
    for (bool masked : {false, true}) {
      gd::AggregateArgs a;
      a.op = gj::AggregateOp::kSum;
      a.keys = gkeys;
      a.mask = masked ? gmask : nullptr;
      a.rows = n;
      a.groups = groups;
      a.counts = o.counts;
      a.value_type = gj::ColumnType::kInt64;
      a.values = gvalues;
      a.output = o.sums;
      a.overflow = o.overflow;
      Variants(ctx, a, ref, o);
    }
  }
}

}  // namespace gpujoin::bench
