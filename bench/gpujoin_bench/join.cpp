// uint32 inner joins (lookup + stable compaction, pairs in left order) of the
// lookup family's queries into the default build with explicit values at load
// 0.5 of a 1 GiB table, all hits and half misses; then the same joins gathering
// two payload columns per pair. The join's target is relative to a lookup of
// the same keys, timed here as its reference (the lookup family reports and
// checks that lookup). Every pair and every gathered value is checked.
//
// Byte model: join: its lookup without the found byte (40 B) + values re-read
// 4 B and pairs written 8 B per match (the per-32-row masks and offsets, < 1 B
// a row, left out). Payload join: the plain join's bytes + the slots written by
// the lookup 4 B a row, and per pair the slot written and read 8 B plus the
// record's sector, the values and bits 44.25 B.
#include "families.hpp"
#include "index_fixture.hpp"
#include "inputs.hpp"
#include "payload.hpp"

namespace gpujoin::bench {
namespace {

// One join of n left rows into the table of `cap` slots.
struct JoinCase {
  gd::DeviceTable table;
  uint32_t cap;
  uint64_t n;
  bool half_miss;
  std::string what;
  uint32_t* queries;
  uint32_t* out_left;
  uint32_t* out_right;
  unsigned long long* count;
  gd::DeviceQueryStats* qstats;

  uint64_t ExpectFound() const { return half_miss ? (n + 1) / 2 : n; }
  // Whether the first `matches` pairs are the matches in left order.
  bool PairsOk(uint64_t matches) const {
    const std::vector<uint32_t> l = FetchAll(out_left, matches);
    const std::vector<uint32_t> r = FetchAll(out_right, matches);
    uint64_t wrong = 0;
    for (uint64_t k = 0; k < matches; ++k) {
      const uint64_t i = half_miss ? 2 * k : k;  // stable: pairs in left order
      wrong += l[k] != i || r[k] != IndexFixture::Expected(i, n, half_miss);
    }
    return wrong == 0;
  }
};

// The plain join row; returns the join's rate (rows/s), the payload row's reference.
double PlainJoin(BenchContext& ctx, const JoinCase& j, void* scratch, double lookup_rate) {
  cudaStream_t s = ctx.stream;
  const uint64_t n = j.n;
  CHECK_CUDA(cudaMemsetAsync(j.out_left, kPoison, n * 4, s));
  CHECK_CUDA(cudaMemsetAsync(j.out_right, kPoison, n * 4, s));
  CHECK_CUDA(cudaMemsetAsync(j.count, kPoison, sizeof(unsigned long long), s));
  const double jms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(j.qstats, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(gd::JoinKeys(j.table, j.queries, n, j.cap, nullptr, 0, j.out_left, j.out_right, n,
                            j.count, nullptr, nullptr, j.qstats, scratch, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  const unsigned long long matches = Fetch(j.count);
  bool ok = ctx.Check(matches == j.ExpectFound(), "join count, " + j.what);
  ok &= ctx.Check(j.PairsOk(matches), "join pairs in left order, " + j.what);
  Row row{"join (pairs), " + j.what + (ok ? "" : " FAIL"),
          double(n),
          jms,
          double(n) * 40 + double(matches) * 12,
          ">= 0.6 x lookup",
          0.6,
          3};
  row.reference_rate = lookup_rate;
  ctx.rows.push_back(row);
  return double(n) / (jms * 1e-3);
}

// The same join gathering both columns per pair: the scatter writes each pair's
// slot, the gather reads the first min(count, capacity) of them.
void PayloadJoin(BenchContext& ctx, const JoinCase& j, const PayloadColumns& pay,
                 double join_rate) {
  cudaStream_t s = ctx.stream;
  const uint64_t n = j.n;
  const gd::GatherRows rows{pay.slot_of, n, j.count};
  CHECK_CUDA(cudaMemsetAsync(j.out_left, kPoison, n * 4, s));
  CHECK_CUDA(cudaMemsetAsync(j.out_right, kPoison, n * 4, s));
  pay.PoisonOutputs(n, false);
  const double pjms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(j.qstats, 0, sizeof(gd::DeviceQueryStats), s));
    CHECK_CUDA(cudaMemsetAsync(pay.nulls + 2, 0, 2 * sizeof(unsigned long long), s));
    CHECK_CUDA(gd::JoinKeysWithSlots(j.table, j.queries, n, j.cap, nullptr, 0, j.out_left,
                                     j.out_right, pay.slot_of, n, j.count, nullptr, nullptr,
                                     j.qstats, pay.join_scratch, s));
    pay.GatherBoth(rows);
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  const unsigned long long pmatches = Fetch(j.count);
  bool ok = ctx.Check(pmatches == j.ExpectFound(), "payload join count, " + j.what);
  ok &= ctx.Check(j.PairsOk(pmatches), "payload join pairs in left order, " + j.what);
  ok &= ctx.Check(pay.GatheredOk(pmatches,
                                 [&](uint64_t k) -> int64_t {
                                   const uint64_t i = j.half_miss ? 2 * k : k;
                                   return int64_t(HitRowOf(i, n));
                                 }),
                  "payload join: both gathered columns of every pair, " + j.what);
  const double ratio = (double(n) / (pjms * 1e-3)) / join_rate;
  char name[160];
  std::snprintf(name, sizeof(name), "join+gather i64,f32 (%.2f x plain join), %s%s", ratio,
                j.what.c_str(), ok ? "" : " FAIL");
  Row row{name,
          double(n),
          pjms,
          double(n) * 44 + double(pmatches) * (12 + 8 + 44.25),
          j.half_miss ? "" : ">= 0.6 x join",
          j.half_miss ? 0.0 : 0.6,
          j.half_miss ? 0 : 3};
  row.reference_rate = join_rate;
  ctx.rows.push_back(row);
}

}  // namespace

void RunJoin(BenchContext& ctx) {
  IndexFixture fx(ctx);
  cudaStream_t s = ctx.stream;
  const IndexSize size = fx.Sizes().front();  // load 0.5 of the full table
  const uint64_t n = size.rows;
  const uint32_t cap = size.capacity;
  uint32_t* queries = fx.mem.Array<uint32_t>(fx.max_n);
  uint32_t* out_values = fx.mem.Array<uint32_t>(fx.max_n);
  uint8_t* found = fx.mem.Array<uint8_t>(fx.max_n);
  uint32_t* out_left = fx.mem.Array<uint32_t>(fx.max_n);
  uint32_t* out_right = fx.mem.Array<uint32_t>(fx.max_n);
  auto* count = fx.mem.Array<unsigned long long>(1);
  auto* qstats = fx.mem.Array<gd::DeviceQueryStats>(1);
  void* join_scratch = fx.mem.Bytes(gd::JoinScratchBytes(fx.max_n));
  fx.MakeRows(n);
  gd::BuildSource src = fx.Source(n);
  src.path = gd::BuildPath::kAuto;
  src.values = fx.values;
  fx.Build(src, cap);
  const PayloadColumns pay(fx, src, cap, n);
  const gd::DeviceTable table{fx.slots, cap};
  for (const bool half_miss : {false, true}) {
    CHECK_CUDA(LaunchMakeQueries(queries, n, n, half_miss, s));
    const double lookup_ms = ctx.MedianMs([&] {
      CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), s));
      CHECK_CUDA(gd::LookupKeys(table, queries, n, cap, out_values, found, nullptr, qstats, s));
    });
    const JoinCase j{table,
                     cap,
                     n,
                     half_miss,
                     std::string(half_miss ? "50% miss" : "all hits") + ", load " + size.load,
                     queries,
                     out_left,
                     out_right,
                     count,
                     qstats};
    const double join_rate = PlainJoin(ctx, j, join_scratch, double(n) / (lookup_ms * 1e-3));
    PayloadJoin(ctx, j, pay, join_rate);
  }
}

}  // namespace gpujoin::bench
