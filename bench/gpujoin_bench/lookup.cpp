// uint32 lookups with found flags and statistics into the default build with
// explicit values, loads 0.5 and 0.8 of a 1 GiB table, all hits and half
// misses; at load 0.5 the same lookups gathering two payload columns. The
// outputs are poisoned before and checked in full after: every row's value and
// found flag, every gathered value and validity bit.
//
// Byte model: lookup: key read 4 B + one 32-byte table sector + value written
// 4 B + found 1 B (41 B). Payload lookup: the plain lookup's 41 B + the slot
// written and read 8 B, one 32-byte sector of the record, the values written
// 12 B and their validity bits (93.25 B).
#include <optional>

#include "families.hpp"
#include "index_fixture.hpp"
#include "inputs.hpp"
#include "payload.hpp"

namespace gpujoin::bench {
namespace {

// One probe of n query rows into the table of `cap` slots.
struct Probe {
  gd::DeviceTable table;
  uint32_t cap;
  uint64_t n;
  std::string lf;
  bool half_miss;
  uint32_t* queries;
  uint32_t* out_values;
  uint8_t* found;
  gd::DeviceQueryStats* qstats;

  uint64_t ExpectFound() const { return half_miss ? (n + 1) / 2 : n; }
  std::string What() const {
    return std::string(half_miss ? "50% miss" : "all hits") + ", load " + lf;
  }
};

// The plain lookup row; returns its rate (rows/s), the payload row's reference.
double PlainLookup(BenchContext& ctx, const Probe& p) {
  cudaStream_t s = ctx.stream;
  const uint64_t n = p.n;
  CHECK_CUDA(cudaMemsetAsync(p.out_values, kPoison, n * 4, s));
  CHECK_CUDA(cudaMemsetAsync(p.found, kPoison, n, s));
  const double ms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(p.qstats, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(
        gd::LookupKeys(p.table, p.queries, n, p.cap, p.out_values, p.found, nullptr, p.qstats, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  const std::string what = p.What();
  bool ok = ctx.Check(Fetch(p.qstats).found == p.ExpectFound(), "lookup found count, " + what);
  {
    const std::vector<uint32_t> got = FetchAll(p.out_values, n);
    const std::vector<uint8_t> got_found = FetchAll(p.found, n);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t expected = IndexFixture::Expected(i, n, p.half_miss);
      wrong += got[i] != expected || got_found[i] != uint8_t(expected != gj::kEmptyKey);
    }
    ok &= ctx.Check(wrong == 0, "lookup values and found flags of every row, " + what);
  }
  std::string target;
  double tv = 0;
  if (!p.half_miss) {
    tv = p.lf == "0.5" ? 32.2e9 : 27.0e9;
    target = p.lf == "0.5" ? ">= 32.2 Gkeys/s" : ">= 27.0 Gkeys/s";
  } else if (p.lf == "0.8") {
    tv = 20e9;
    target = ">= 20 Gkeys/s";
  }
  ctx.rows.push_back({"lookup+found+stats, " + what + (ok ? "" : " FAIL"), double(n), ms,
                      double(n) * 41, target, tv, tv > 0 ? 1 : 0});
  return double(n) / (ms * 1e-3);
}

// The same lookup gathering both columns: the probe writes each row's slot, one
// gather kernel reads it and both columns from its record (what a LookupNode
// with `gather` runs, without the transfers).
void PayloadLookup(BenchContext& ctx, const Probe& p, const PayloadColumns& pay,
                   double lookup_rate) {
  cudaStream_t s = ctx.stream;
  const uint64_t n = p.n;
  const gd::GatherRows rows{pay.slot_of, n, nullptr};
  pay.PoisonOutputs(n, true);
  const double pms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(p.qstats, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(cudaMemsetAsync(pay.nulls + 2, 0, 2 * sizeof(unsigned long long), s));
    CHECK_CUDA(gd::LookupKeysSlots(p.table, p.queries, n, p.cap, p.out_values, p.found, nullptr,
                                   pay.slot_of, p.qstats, s));
    pay.GatherBoth(rows);
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  const std::string what = p.What();
  bool ok =
      ctx.Check(Fetch(p.qstats).found == p.ExpectFound(), "payload lookup found count, " + what);
  ok &= ctx.Check(pay.GatheredOk(n,
                                 [&](uint64_t i) -> int64_t {
                                   if (p.half_miss && (i & 1)) return -1;
                                   return int64_t(HitRowOf(i, n));
                                 }),
                  "payload lookup: both gathered columns of every row, " + what);
  const double ratio = (double(n) / (pms * 1e-3)) / lookup_rate;
  char name[160];
  std::snprintf(name, sizeof(name), "lookup+found+stats+gather i64,f32 (%.2f x plain), %s%s", ratio,
                what.c_str(), ok ? "" : " FAIL");
  Row row{name,
          double(n),
          pms,
          double(n) * 93.25,
          p.half_miss ? "" : ">= 0.6 x lookup",
          p.half_miss ? 0.0 : 0.6,
          p.half_miss ? 0 : 3};
  row.reference_rate = lookup_rate;
  ctx.rows.push_back(row);
}

}  // namespace

void RunLookup(BenchContext& ctx) {
  IndexFixture fx(ctx);
  uint32_t* queries = fx.mem.Array<uint32_t>(fx.max_n);
  uint32_t* out_values = fx.mem.Array<uint32_t>(fx.max_n);
  uint8_t* found = fx.mem.Array<uint8_t>(fx.max_n);
  auto* qstats = fx.mem.Array<gd::DeviceQueryStats>(1);
  for (const IndexSize& size : fx.Sizes()) {
    if (size.capacity != fx.capacity) continue;  // the 64 MiB table: builds only
    const uint64_t n = size.rows;
    fx.MakeRows(n);
    gd::BuildSource src = fx.Source(n);
    src.path = gd::BuildPath::kAuto;
    src.values = fx.values;
    fx.Build(src, size.capacity);
    std::optional<PayloadColumns> pay;
    if (size.load == "0.5" && !ctx.options.profile) pay.emplace(fx, src, size.capacity, n);
    for (const bool half_miss : {false, true}) {
      CHECK_CUDA(LaunchMakeQueries(queries, n, n, half_miss, ctx.stream));
      // Row i hits build row HitRowOf(i, n), or misses (odd rows with half_miss).
      const Probe p{gd::DeviceTable{fx.slots, size.capacity},
                    size.capacity,
                    n,
                    size.load,
                    half_miss,
                    queries,
                    out_values,
                    found,
                    qstats};
      const double lookup_rate = PlainLookup(ctx, p);
      if (pay) PayloadLookup(ctx, p, *pay, lookup_rate);
    }
  }
}

}  // namespace gpujoin::bench
