// uint32 builds: generated row ids (first_value + row, no finalisation) and
// explicit values (12345 + 3 * row, finalised), for each live path (the
// default, what the backend runs for the size, then each path forced), at
// loads 0.5 and 0.8 of a 1 GiB table and 0.5 of a 64 MiB one; then hot keys.
// The table is poisoned before each variant and checked in full afterwards:
// every slot written, one word per key, each retained key's value that of its
// lowest row.
//
// Byte model: key 4 B (+ value 4 B) read + one 32-byte sector + the table
// written (8 B/slot); the tile path's sort passes are not counted.
#include <optional>
#include <unordered_map>

#include "families.hpp"
#include "index_fixture.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

struct Variant {
  std::string name;
  gd::BuildPath path;
};

// The table after a build of n rows of keys KeyOf(row) (hot: MakeHotKeys'):
// every slot empty or holding a build key, `unique` of them, and the value of
// each retained key that of its lowest row (explicit: 12345 + 3 * row, else row).
bool TableOk(const IndexFixture& fx, uint32_t cap, uint64_t n, bool explicit_values, bool hot,
             uint64_t unique) {
  const std::vector<uint64_t> t = FetchAll(fx.slots, gd::TableAllocationSlots(cap));
  const std::vector<uint32_t> hkeys = FetchAll(fx.keys, n);
  std::unordered_map<uint32_t, uint32_t> first_row;  // hot keys: their first row
  if (hot)
    for (uint64_t r = n; r-- > 0;)
      if ((r & 3) == 3) first_row[hkeys[r]] = uint32_t(r);
  // Distinct keys KeyOf(row) are found by inverting nothing: the table's value
  // says which row it claims, and that row's key must match.
  uint64_t occupied = 0;
  for (size_t i = 0; i < cap; ++i) {
    const uint64_t w = t[i];
    if (w == gd::kEmptySlot) continue;
    ++occupied;
    const uint32_t key = uint32_t(w >> 32), value = uint32_t(w);
    const uint32_t row = explicit_values ? (value - 12345u) / 3u : value;
    if (row >= n || hkeys[row] != key) return false;
    if (explicit_values && value != 12345u + 3u * row) return false;
    if (hot) {
      const auto it = first_row.find(key);
      if (it != first_row.end() && it->second != row) return false;
    }
  }
  return occupied == unique;
}

// Poisons the table, the statistics and the fallback flag, then times the
// build of `src` per phase and records the phases as `name`.
PhaseTimes TimeBuild(IndexFixture& fx, gd::BuildSource& src, uint32_t cap,
                     const std::string& name) {
  cudaStream_t s = fx.ctx.stream;
  CHECK_CUDA(cudaMemsetAsync(fx.slots, kPoison, gd::TableAllocationBytes(cap), s));
  CHECK_CUDA(cudaMemsetAsync(fx.bstats, kPoison, sizeof(gd::DeviceBuildStats), s));
  CHECK_CUDA(cudaMemsetAsync(fx.fell_back, kPoison, sizeof(unsigned int), s));
  PhaseTimes pt = fx.ctx.MedianBuildMs(src, [&] { fx.Build(src, cap); });
  pt.name = name;
  fx.ctx.phases.push_back(pt);
  return pt;
}

// Distinct keys, one variant and value kind: the row and its checks.
void DistinctBuild(IndexFixture& fx, const IndexSize& size, const Variant& v, bool explicit_values,
                   std::optional<gd::DeviceBuildStats>& reference) {
  BenchContext& ctx = fx.ctx;
  const uint64_t n = size.rows;
  const uint32_t cap = size.capacity;
  const std::string& lf = size.load;
  gd::BuildSource src = fx.Source(n);
  src.path = v.path;
  src.values = explicit_values ? fx.values : nullptr;
  src.first_value = 0;
  const std::string how = v.name + (explicit_values ? ", explicit values" : ", generated row ids");
  const PhaseTimes pt = TimeBuild(fx, src, cap, how + ", load " + lf);
  CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  const gd::DeviceBuildStats st = Fetch(fx.bstats);
  const bool tiles = gd::ChooseBuildPath(cap, n, v.path) == gd::BuildPath::kTiles;
  bool ok = ctx.Check(st.unique_keys == n && st.duplicate_rows == 0 && st.overflow_rows == 0 &&
                          st.invalid_rows == 0 && st.max_probes >= 1,
                      "build statistics (" + how + "), load " + lf);
  if (!reference) reference = st;
  ok &= ctx.Check(
      st.total_probes == reference->total_probes && st.max_probes == reference->max_probes,
      "build probes equal on every path (" + how + "), load " + lf);
  ok &= ctx.Check(!tiles || Fetch(fx.fell_back) == 0, "no fallback (" + how + "), load " + lf);
  ok &=
      ctx.Check(TableOk(fx, cap, n, explicit_values, false, n), "table (" + how + "), load " + lf);
  std::string target;
  double tv = 0;
  if (v.path == gd::BuildPath::kAuto && lf == "0.5") {
    tv = explicit_values ? 11.1e9 : 12.3e9;
    target = explicit_values ? ">= 11.1 Gkeys/s" : ">= 12.3 Gkeys/s";
  }
  if (v.path == gd::BuildPath::kAuto && lf == "0.8" && !explicit_values) {
    tv = 11e9;
    target = ">= 11 Gkeys/s";
  }
  const double bytes = double(n) * (explicit_values ? 40 : 36) + double(cap) * 8;
  ctx.rows.push_back({"build " + how + ", load " + lf + (ok ? "" : " FAIL"), double(n), pt.total,
                      bytes, target, tv, tv > 0 ? 1 : 0});
}

// Hot keys: a quarter of the rows on 16 keys (tiles of about a million rows,
// reduced to one word per key on the tile path), explicit values, on the
// default and direct paths (tiles is the default for this size). Leaves
// distinct keys in fx.keys again.
void HotBuilds(IndexFixture& fx, const IndexSize& size, const std::vector<Variant>& variants) {
  BenchContext& ctx = fx.ctx;
  const uint64_t n = size.rows;
  const uint32_t cap = size.capacity;
  CHECK_CUDA(LaunchMakeHotKeys(fx.keys, n, ctx.stream));
  const uint64_t hot_unique = n - n / 4 + 16;
  for (const Variant& v : variants) {
    if (v.path == gd::BuildPath::kTiles) continue;
    gd::BuildSource src = fx.Source(n);
    src.path = v.path;
    src.values = fx.values;
    const std::string how = v.name + ", hot keys, explicit values";
    const PhaseTimes pt = TimeBuild(fx, src, cap, how + ", load " + size.load);
    const gd::DeviceBuildStats st = Fetch(fx.bstats);
    bool ok = ctx.Check(st.unique_keys == hot_unique && st.duplicate_rows == n - hot_unique &&
                            st.overflow_rows == 0,
                        "build statistics (" + how + ")");
    ok &= ctx.Check(v.path != gd::BuildPath::kAuto || Fetch(fx.fell_back) == 0,
                    "no fallback (" + how + ")");
    ok &= ctx.Check(TableOk(fx, cap, n, true, true, hot_unique), "table (" + how + ")");
    ctx.rows.push_back(
        {"build " + how + ", 1/4 of rows on 16 keys, load " + size.load + (ok ? "" : " FAIL"),
         double(n), pt.total, double(n) * 40 + double(cap) * 8, "", 0, 0});
  }
  CHECK_CUDA(LaunchMakeKeys(fx.keys, n, 0, ctx.stream));
}

}  // namespace

void RunBuild(BenchContext& ctx) {
  IndexFixture fx(ctx);
  std::vector<Variant> variants = {{"default", gd::BuildPath::kAuto},
                                   {"direct", gd::BuildPath::kDirect},
                                   {"tiles", gd::BuildPath::kTiles}};
  if (ctx.options.profile) variants.erase(variants.begin());
  for (const IndexSize& size : fx.Sizes()) {
    fx.MakeRows(size.rows);
    std::optional<gd::DeviceBuildStats> reference;  // every path's statistics must agree
    for (const Variant& v : variants)
      for (const bool explicit_values : {false, true})
        DistinctBuild(fx, size, v, explicit_values, reference);
    if (size.capacity == fx.capacity && size.load == "0.5" && !ctx.options.profile)
      HotBuilds(fx, size, variants);
  }
}

}  // namespace gpujoin::bench
