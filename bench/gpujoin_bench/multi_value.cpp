// Multi-value indexes and the join kinds, uint32 keys, generated row ids
// (value = row). Multiplicity 4: 2^26 build rows on 2^24 keys (row i holds key
// i mod 2^24) in 2^25 slots (load 0.5), the cuCollections comparison
// (static_multimap count + retrieve of 2^26 probe keys, 2^28 pairs: 10.2
// Gpairs/s; insert 11.1 Gkeys/s); multiplicity 1: 2^26 distinct keys in 2^27
// slots. Every output is poisoned and checked in full: the table's statistics,
// every group (its rows in order), every pair.
//
// Byte model: keep_all build = the lowest_row build's (key 4 B + one sector +
// the table written) + the group pass (probe sector 32 B, sort keys and rows
// 8 B written, the sort's four passes 4 x 16 B, bounds 4 B, value 4 B, ranges
// 8 B per slot twice); count+scatter join = per left row key 4 B + a table
// sector + a ranges sector 32 B + counts, positions, firsts 12 B + scan 12 B +
// their re-read 16 B, per pair 8 B written (+ 4 B value list read).
#include <algorithm>

#include "cuda/device_ops.hpp"
#include "cuda/index/groups.hpp"
#include "cuda/join/group_join.hpp"
#include "families.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

// The buffers of every multi-value row, sized for the larger table.
struct MultiValue {
  explicit MultiValue(int shift)
      : mkeys((uint64_t{1} << 24) >> shift),
        mrows(4 * mkeys),
        mq(mrows),
        mpairs(4 * mq),
        big_cap((1u << 27) >> shift),
        x4_cap((1u << 25) >> shift) {
    slots = mem.Array<uint64_t>(gd::TableAllocationSlots(big_cap));
    keys = mem.Array<uint32_t>(mrows);
    queries = mem.Array<uint32_t>(mq);
    ranges = mem.Array<gd::GroupRange>(big_cap);
    gvalues = mem.Array<uint32_t>(mrows);
    gstats = mem.Array<gd::DeviceGroupStats>(1);
    bst = mem.Array<gd::DeviceBuildStats>(1);
    qst = mem.Array<gd::DeviceQueryStats>(1);
    count = mem.Array<unsigned long long>(1);
    left = mem.Array<uint32_t>(mpairs);
    right = mem.Array<uint32_t>(mpairs);
    lookup_values = mem.Array<uint32_t>(mq);
    lookup_found = mem.Array<uint8_t>(mq);
    gscratch_bytes = std::max(gd::GroupScratchBytes(big_cap, mrows, false),
                              gd::GroupScratchBytes(x4_cap, mrows, false));
    gscratch = mem.Bytes(gscratch_bytes);
    cscratch = mem.Bytes(gd::GroupJoinCountScratchBytes(mq));
    sscratch = mem.Bytes(gd::GroupJoinScatterScratchBytes(mq, mpairs));
    jscratch = mem.Bytes(gd::JoinScratchBytes(mq));
  }

  DeviceAllocations mem;
  const uint64_t mkeys;    // keys at multiplicity 4
  const uint64_t mrows;    // build rows
  const uint64_t mq;       // probe keys
  const uint64_t mpairs;   // all hits at multiplicity 4
  const uint32_t big_cap;  // multiplicity 1: 2^26 keys
  const uint32_t x4_cap;
  uint64_t* slots;
  uint32_t* keys;
  uint32_t* queries;
  gd::GroupRange* ranges;
  uint32_t* gvalues;
  gd::DeviceGroupStats* gstats;
  gd::DeviceBuildStats* bst;
  gd::DeviceQueryStats* qst;
  unsigned long long* count;
  uint32_t* left;
  uint32_t* right;
  uint32_t* lookup_values;
  uint8_t* lookup_found;
  size_t gscratch_bytes;
  void *gscratch, *cscratch, *sscratch, *jscratch;
};

// One multiplicity: the table and its shape.
struct Shape {
  uint64_t multiplicity;
  uint64_t nkeys;
  uint32_t cap;
  gd::DeviceTable table;
  std::string mult;  // "x4", "x1"
};

// Every stored key's group: its `multiplicity` rows in order, the first the
// key's own row r < nkeys, then r + nkeys, r + 2 nkeys, ...
bool GroupsOk(const MultiValue& mv, const Shape& sh) {
  const std::vector<uint64_t> t = FetchAll(mv.slots, sh.cap);
  const std::vector<gd::GroupRange> rg = FetchAll(mv.ranges, sh.cap);
  const std::vector<uint32_t> vals = FetchAll(mv.gvalues, mv.mrows);
  uint64_t wrong = 0, covered = 0;
  for (uint32_t i = 0; i < sh.cap; ++i) {
    if (t[i] == gd::kEmptySlot) {
      wrong += rg[i].size != 0;
      continue;
    }
    const uint32_t key = uint32_t(t[i] >> 32), first = uint32_t(t[i]);
    const gd::GroupRange g = rg[i];
    if (g.size != sh.multiplicity || uint64_t(g.start) + g.size > mv.mrows || first >= sh.nkeys) {
      ++wrong;
      continue;
    }
    wrong += BuildKeyOf(first) != key;
    for (uint32_t j = 0; j < g.size; ++j) wrong += vals[g.start + j] != first + j * sh.nkeys;
    covered += g.size;
  }
  return wrong == 0 && covered == mv.mrows;
}

// The lowest_row build (reference) and the keep_all build (table + groups).
void Builds(BenchContext& ctx, MultiValue& mv, const Shape& sh) {
  cudaStream_t s = ctx.stream;
  gd::BuildSource src;
  src.keys = mv.keys;
  src.rows = mv.mrows;
  const uint32_t* grouped_rows = nullptr;
  auto lowest_build = [&] { CHECK_CUDA(gd::ClearAndBuildTable(sh.table, src, sh.cap, mv.bst, s)); };
  auto keep_all_build = [&] {
    lowest_build();
    CHECK_CUDA(gd::SortGroupRows(sh.table, src, sh.cap, false, mv.ranges, mv.gstats, mv.gscratch,
                                 mv.gscratch_bytes, &grouped_rows, s));
    CHECK_CUDA(gd::WriteGroupValues(src, grouped_rows, mv.mrows, mv.gvalues, s));
  };
  const double lms = ctx.MedianMs(lowest_build);
  CHECK_CUDA(cudaMemsetAsync(mv.ranges, kPoison, uint64_t{sh.cap} * sizeof(gd::GroupRange), s));
  CHECK_CUDA(cudaMemsetAsync(mv.gvalues, kPoison, mv.mrows * 4, s));
  const double kms = ctx.MedianMs(keep_all_build);
  CHECK_CUDA(cudaStreamSynchronize(s));
  const gd::DeviceBuildStats st = Fetch(mv.bst);
  const gd::DeviceGroupStats gs = Fetch(mv.gstats);
  bool ok = ctx.Check(st.unique_keys == sh.nkeys && st.duplicate_rows == mv.mrows - sh.nkeys &&
                          st.overflow_rows == 0 && st.invalid_rows == 0 &&
                          gs.max_group_rows == sh.multiplicity,
                      "keep_all build statistics, " + sh.mult);
  ok &= ctx.Check(GroupsOk(mv, sh), "keep_all groups in row order, " + sh.mult);
  ctx.rows.push_back({"build lowest_row, " + sh.mult + " rows per key (reference)",
                      double(mv.mrows), lms, double(mv.mrows) * 36 + double(sh.cap) * 8, "", 0, 0});
  const bool x4 = sh.multiplicity == 4;
  ctx.rows.push_back(
      {"build keep_all (table + groups), " + sh.mult + " rows per key" + (ok ? "" : " FAIL"),
       double(mv.mrows), kms, double(mv.mrows) * (36 + 32 + 8 + 64 + 8) + double(sh.cap) * 24,
       x4 ? ">= 10 Gkeys/s" : "", x4 ? 10e9 : 0, x4 ? 1 : 0});
}

// What count+scatter measured: its time, whether its pairs were right, its bytes.
struct ScatterResult {
  double ms;
  bool ok;
  double bytes;
};

// Count -> scan -> scatter (what a keep_all inner join with groups of more than
// one row runs): all hits, every left row pairs with its key's `multiplicity`
// rows. The count is downloaded before the scatter, as the lowering does.
ScatterResult CountScatterJoin(BenchContext& ctx, MultiValue& mv, const Shape& sh) {
  cudaStream_t s = ctx.stream;
  const uint64_t mq = mv.mq;
  CHECK_CUDA(LaunchMakeQueries(mv.queries, mq, sh.nkeys, false, s));
  const uint64_t want_pairs = mq * sh.multiplicity;
  CHECK_CUDA(cudaMemsetAsync(mv.left, kPoison, want_pairs * 4, s));
  CHECK_CUDA(cudaMemsetAsync(mv.right, kPoison, want_pairs * 4, s));
  unsigned long long got_pairs = 0;
  const double ms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(mv.qst, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(gd::CountGroupJoin(sh.table, mv.ranges, gj::JoinKind::kInner, mv.queries, mq, sh.cap,
                                  nullptr, nullptr, mv.qst, mv.count, mv.cscratch, s));
    CHECK_CUDA(cudaMemcpyAsync(&got_pairs, mv.count, 8, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    const uint64_t written = std::min<uint64_t>(got_pairs, want_pairs);
    CHECK_CUDA(gd::ScatterGroupJoin(mv.cscratch, mq, written, nullptr, 0, mv.gvalues, mv.left,
                                    mv.right, nullptr, mv.sscratch, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  bool ok = ctx.Check(got_pairs == want_pairs, "keep_all join count, " + sh.mult);
  {
    const std::vector<uint32_t> l = FetchAll(mv.left, want_pairs);
    const std::vector<uint32_t> r = FetchAll(mv.right, want_pairs);
    uint64_t wrong = 0;
    for (uint64_t o = 0; o < want_pairs; ++o) {
      const uint64_t i = o / sh.multiplicity, j = o % sh.multiplicity;
      const uint64_t first = HitRowOf(i, sh.nkeys);
      wrong += l[o] != uint32_t(i) || r[o] != uint32_t(first + j * sh.nkeys);
    }
    ok &= ctx.Check(wrong == 0, "keep_all join pairs in left then group order, " + sh.mult);
  }
  const double bytes = double(mq) * (4 + 32 + 32 + 12 + 12 + 16) + double(want_pairs) * 12;
  return {ms, ok, bytes};
}

// Multiplicity 1: the many-to-one compaction on the same table and left keys
// (all hits), the backend's keep_all inner join when every group has one row
// (max_group_rows 1, JoinPathOf in cuda/lowering/lower_join.cpp), against count+scatter.
void ManyToOne(BenchContext& ctx, MultiValue& mv, const Shape& sh, const ScatterResult& scatter) {
  cudaStream_t s = ctx.stream;
  const uint64_t mq = mv.mq;
  CHECK_CUDA(cudaMemsetAsync(mv.left, kPoison, mq * 4, s));
  CHECK_CUDA(cudaMemsetAsync(mv.right, kPoison, mq * 4, s));
  const double mms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(mv.qst, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(gd::JoinKeys(sh.table, mv.queries, mq, sh.cap, nullptr, 0, mv.left, mv.right, mq,
                            mv.count, nullptr, nullptr, mv.qst, mv.jscratch, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  bool ok = ctx.Check(Fetch(mv.count) == mq, "many-to-one join count, " + sh.mult);
  {
    const std::vector<uint32_t> l = FetchAll(mv.left, mq);
    const std::vector<uint32_t> r = FetchAll(mv.right, mq);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < mq; ++i)
      wrong += l[i] != uint32_t(i) || r[i] != uint32_t(HitRowOf(i, sh.nkeys));
    ok &= ctx.Check(wrong == 0, "many-to-one join pairs (first matches), " + sh.mult);
  }
  const double many_rate = double(mq) / (mms * 1e-3);
  const std::string fail = ok ? "" : " FAIL";
  ctx.rows.push_back({"join many-to-one (pairs), x1 (reference)" + fail, double(mq), mms,
                      double(mq) * 52, "", 0, 0});
  // What the backend runs for a keep_all inner join whose groups all have one
  // row (JoinPathOf): the same kernels, so the same rate.
  Row b{"join keep_all x1 inner, backend's path (x many-to-one)" + fail,
        double(mq),
        mms,
        double(mq) * 52,
        ">= 0.9 x many-to-one",
        0.9,
        3};
  b.reference_rate = many_rate;
  ctx.rows.push_back(b);
  char name[160];
  std::snprintf(name, sizeof(name), "join keep_all x1 inner, count+scan+scatter (%.2f x m-to-1)%s",
                (double(mq) / (scatter.ms * 1e-3)) / many_rate, scatter.ok ? "" : " FAIL");
  ctx.rows.push_back({name, double(mq), scatter.ms, scatter.bytes, "", 0, 0});
}

// Semi and anti joins at multiplicity 4 with half the left keys missing,
// against a lookup of the same keys: both take the compaction (semi: found
// rows with their first match; anti: missing rows).
void SemiAnti(BenchContext& ctx, MultiValue& mv, const Shape& sh) {
  cudaStream_t s = ctx.stream;
  const uint64_t mq = mv.mq;
  CHECK_CUDA(LaunchMakeQueries(mv.queries, mq, sh.nkeys, true, s));
  const double lkms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(mv.qst, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(gd::LookupKeys(sh.table, mv.queries, mq, sh.cap, mv.lookup_values, mv.lookup_found,
                              nullptr, mv.qst, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  const bool lok = ctx.Check(Fetch(mv.qst).found == (mq + 1) / 2, "x4 lookup found count");
  ctx.rows.push_back(
      {"lookup+found+stats, keep_all x4, 50% miss (reference)" + std::string(lok ? "" : " FAIL"),
       double(mq), lkms, double(mq) * 41, "", 0, 0});
  const double lookup_rate = double(mq) / (lkms * 1e-3);
  for (const gd::MaskedRows masked : {gd::MaskedRows::kFound, gd::MaskedRows::kMissing}) {
    const bool anti = masked == gd::MaskedRows::kMissing;
    const std::string kind = anti ? "anti" : "semi";
    CHECK_CUDA(cudaMemsetAsync(mv.left, kPoison, mq * 4, s));
    CHECK_CUDA(cudaMemsetAsync(mv.right, kPoison, mq * 4, s));
    const double sms = ctx.MedianMs([&] {
      CHECK_CUDA(cudaMemsetAsync(mv.qst, 0, sizeof(gd::DeviceQueryStats), s));
      CHECK_CUDA(gd::JoinKeys(sh.table, mv.queries, mq, sh.cap, nullptr, 0, mv.left, mv.right, mq,
                              mv.count, nullptr, nullptr, mv.qst, mv.jscratch, s, masked));
    });
    CHECK_CUDA(cudaStreamSynchronize(s));
    const uint64_t want = anti ? mq / 2 : (mq + 1) / 2;
    bool ok = ctx.Check(Fetch(mv.count) == want, kind + " count");
    {
      const std::vector<uint32_t> l = FetchAll(mv.left, want);
      const std::vector<uint32_t> r = FetchAll(mv.right, want);
      uint64_t wrong = 0;
      for (uint64_t k = 0; k < want; ++k) {
        const uint64_t i = 2 * k + (anti ? 1 : 0);
        const uint32_t right = anti ? gj::kEmptyKey : uint32_t(HitRowOf(i, sh.nkeys));
        wrong += l[k] != uint32_t(i) || r[k] != right;
      }
      ok &= ctx.Check(wrong == 0, kind + " pairs in left order");
    }
    Row r{kind + " join, keep_all x4, 50% miss (x lookup)" + (ok ? "" : " FAIL"),
          double(mq),
          sms,
          double(mq) * 40 + double(want) * 12,
          ">= 0.8 x lookup",
          0.8,
          3};
    r.reference_rate = lookup_rate;
    ctx.rows.push_back(r);
  }
}

}  // namespace

void RunMultiValue(BenchContext& ctx) {
  MultiValue mv(ctx.shift);
  for (const uint64_t multiplicity : {uint64_t{4}, uint64_t{1}}) {
    const uint32_t cap = multiplicity == 4 ? mv.x4_cap : mv.big_cap;
    const Shape sh{multiplicity, mv.mrows / multiplicity, cap, gd::DeviceTable{mv.slots, cap},
                   "x" + std::to_string(multiplicity)};
    CHECK_CUDA(LaunchMakeMultiKeys(mv.keys, mv.mrows, sh.nkeys, ctx.stream));
    Builds(ctx, mv, sh);
    const ScatterResult scatter = CountScatterJoin(ctx, mv, sh);
    if (multiplicity == 1) {
      ManyToOne(ctx, mv, sh, scatter);
      continue;
    }
    Row r{"join keep_all x4 inner, count+scan+scatter (pairs)" +
              std::string(scatter.ok ? "" : " FAIL"),
          double(mv.mq * multiplicity),
          scatter.ms,
          scatter.bytes,
          ">= 15 Gpairs/s",
          15e9,
          1};
    ctx.rows.push_back(r);
    SemiAnti(ctx, mv, sh);
  }
}

}  // namespace gpujoin::bench
