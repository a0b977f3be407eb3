// 64-bit keys: the same 2^27 slots, 16 bytes each (a 2 GiB table). Builds with
// generated ids (value = row) at loads 0.5 and 0.8 on the default path; lookups
// with found flags and statistics, all hits at 0.5 and half misses at 0.8.
// The table and every lookup row are checked.
//
// Byte model: build key 8 B + a 32-byte sector + 16 B/slot written; lookup key
// 8 B + a sector + value 4 B + found 1 B.
#include "cuda/device_ops.hpp"
#include "families.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

struct U64Buffers {
  explicit U64Buffers(uint32_t cap) {
    const uint64_t max_n = uint64_t(0.8 * cap);
    slots = mem.Array<gd::Slot64>(gd::TableAllocationSlots(cap));
    keys = mem.Array<uint64_t>(max_n);
    queries = mem.Array<uint64_t>(max_n);
    values = mem.Array<uint32_t>(max_n);
    found = mem.Array<uint8_t>(max_n);
    bstats = mem.Array<gd::DeviceBuildStats>(1);
    qstats = mem.Array<gd::DeviceQueryStats>(1);
  }
  DeviceAllocations mem;
  gd::Slot64* slots;
  uint64_t* keys;
  uint64_t* queries;
  uint32_t* values;
  uint8_t* found;
  gd::DeviceBuildStats* bstats;
  gd::DeviceQueryStats* qstats;
};

void Build(BenchContext& ctx, const U64Buffers& b, const gd::DeviceTable64& table, uint64_t n,
           const std::string& lf) {
  const uint32_t cap = table.capacity;
  gd::BuildSource64 src;
  src.keys = b.keys;
  src.rows = n;
  const double bms = ctx.MedianMs(
      [&] { CHECK_CUDA(gd::ClearAndBuildTable(table, src, cap, b.bstats, ctx.stream)); });
  const gd::DeviceBuildStats st = Fetch(b.bstats);
  bool ok = ctx.Check(st.unique_keys == n && st.duplicate_rows == 0 && st.overflow_rows == 0 &&
                          st.invalid_rows == 0,
                      "64-bit build statistics, load " + lf);
  {
    // Every occupied slot holds the key of the row its value names.
    const std::vector<gd::Slot64> t = FetchAll(b.slots, gd::TableAllocationSlots(cap));
    uint64_t occupied = 0, wrong = 0;
    for (const gd::Slot64& w : t) {
      if (w.key == gj::kEmptyKey64) continue;
      ++occupied;
      wrong += w.tag >= n || Key64Of(w.tag) != w.key;
    }
    ok &= ctx.Check(occupied == n && wrong == 0, "64-bit table, load " + lf);
  }
  const bool gen = lf == "0.5";
  ctx.rows.push_back({"build u64 generated ids, load " + lf + (ok ? "" : " FAIL"), double(n), bms,
                      double(n) * 40 + double(cap) * 16, gen ? ">= 11 Gkeys/s" : "", gen ? 11e9 : 0,
                      gen ? 1 : 0});
}

void Lookup(BenchContext& ctx, const U64Buffers& b, const gd::DeviceTable64& table, uint64_t n,
            const std::string& lf, bool half_miss) {
  cudaStream_t s = ctx.stream;
  const uint32_t cap = table.capacity;
  CHECK_CUDA(LaunchMakeQueries64(b.queries, n, n, half_miss, s));
  CHECK_CUDA(cudaMemsetAsync(b.values, kPoison, n * 4, s));
  CHECK_CUDA(cudaMemsetAsync(b.found, kPoison, n, s));
  const double ms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(b.qstats, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(gd::LookupKeys(table, b.queries, n, cap, b.values, b.found, nullptr, b.qstats, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  const std::string what = std::string(half_miss ? "50% miss" : "all hits") + ", load " + lf;
  const uint64_t expect_found = half_miss ? (n + 1) / 2 : n;
  bool ok = ctx.Check(Fetch(b.qstats).found == expect_found, "64-bit lookup found count, " + what);
  {
    const std::vector<uint32_t> got = FetchAll(b.values, n);
    const std::vector<uint8_t> got_found = FetchAll(b.found, n);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const bool miss = half_miss && (i & 1);
      const uint32_t expect = miss ? gj::kEmptyKey : uint32_t(HitRowOf(i, n));
      wrong += got[i] != expect || got_found[i] != uint8_t(!miss);
    }
    ok &= ctx.Check(wrong == 0, "64-bit lookup values and found flags of every row, " + what);
  }
  const double tv = half_miss ? 20e9 : 25e9;
  ctx.rows.push_back({"lookup u64+found+stats, " + what + (ok ? "" : " FAIL"), double(n), ms,
                      double(n) * 45, half_miss ? ">= 20 Gkeys/s" : ">= 25 Gkeys/s", tv, 1});
}

}  // namespace

void RunU64(BenchContext& ctx) {
  const uint32_t cap = (1u << 27) >> ctx.shift;
  const U64Buffers b(cap);
  const gd::DeviceTable64 table{b.slots, cap};
  for (const double load : {0.5, 0.8}) {
    const uint64_t n = uint64_t(load * cap);
    const std::string lf = load == 0.5 ? "0.5" : "0.8";
    CHECK_CUDA(LaunchMakeKeys64(b.keys, n, ctx.stream));
    Build(ctx, b, table, n, lf);
    Lookup(ctx, b, table, n, lf, /*half_miss=*/load == 0.8);
  }
}

}  // namespace gpujoin::bench
