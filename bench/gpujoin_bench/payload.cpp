#include "payload.hpp"

#include <vector>

#include "inputs.hpp"

namespace gpujoin::bench {

PayloadColumns::PayloadColumns(IndexFixture& fx, const gd::BuildSource& src, uint32_t cap,
                               uint64_t n)
    : ctx(fx.ctx) {
  cudaStream_t s = ctx.stream;
  const uint64_t pslots = gd::TableAllocationSlots(cap);
  src64 = mem.Array<uint64_t>(n);
  src32 = mem.Array<float>(n);
  winners = mem.Array<uint32_t>(pslots);
  records = mem.Array<uint8_t>(pslots * 16);
  slot_of = mem.Array<uint32_t>(n);
  out64 = mem.Array<uint64_t>(n);
  out32 = mem.Array<float>(n);
  valid64 = mem.Array<uint8_t>(n / 8 + 1);
  valid32 = mem.Array<uint8_t>(n / 8 + 1);
  nulls = mem.Array<unsigned long long>(4);
  join_scratch = mem.Bytes(gd::JoinScratchBytesWithSlots(n));
  CHECK_CUDA(LaunchMakePayload(src64, src32, n, s));
  CHECK_CUDA(cudaMemsetAsync(nulls, 0, 4 * sizeof(unsigned long long), s));
  CHECK_CUDA(gd::FindPayloadWinners(gd::DeviceTable{fx.slots, cap}, src, cap, winners, s));
  gd::SourceColumn c64{gj::ColumnType::kInt64, src64, nullptr, nullptr};
  gd::SourceColumn c32{gj::ColumnType::kFloat32, src32, nullptr, nullptr};
  CHECK_CUDA(cudaMemsetAsync(records, 0, pslots * 16, s));
  CHECK_CUDA(gd::PermuteColumn(c64, winners, pslots, records, 16, nullptr, nulls, s));
  CHECK_CUDA(gd::PermuteColumn(c32, winners, pslots, records + 8, 16, nullptr, nulls, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
}

void PayloadColumns::GatherBoth(const gd::GatherRows& rows) const {
  const gd::StoredColumn stored64{gj::ColumnType::kInt64, records, 16, 0, nullptr, nullptr};
  const gd::StoredColumn stored32{gj::ColumnType::kFloat32, records, 16, 8, nullptr, nullptr};
  const gd::FixedGather both[2] = {{stored64, out64, valid64, nulls + 2},
                                   {stored32, out32, valid32, nulls + 3}};
  CHECK_CUDA(gd::GatherFixedColumns(both, rows, ctx.stream));
}

void PayloadColumns::PoisonOutputs(uint64_t rows, bool validity) const {
  cudaStream_t s = ctx.stream;
  CHECK_CUDA(cudaMemsetAsync(out64, kPoison, rows * 8, s));
  CHECK_CUDA(cudaMemsetAsync(out32, kPoison, rows * 4, s));
  if (!validity) return;
  CHECK_CUDA(cudaMemsetAsync(valid64, kPoison, rows / 8 + 1, s));
  CHECK_CUDA(cudaMemsetAsync(valid32, kPoison, rows / 8 + 1, s));
}

bool PayloadColumns::GatheredOk(uint64_t rows,
                                const std::function<int64_t(uint64_t)>& row_of) const {
  const std::vector<uint64_t> g64 = FetchAll(out64, rows);
  const std::vector<float> g32 = FetchAll(out32, rows);
  const std::vector<uint8_t> v64 = FetchAll(valid64, gj::BitmapBytes(rows));
  const std::vector<uint8_t> v32 = FetchAll(valid32, gj::BitmapBytes(rows));
  const std::vector<unsigned long long> n = FetchAll(nulls, 4);
  uint64_t wrong = 0, missing = 0;
  for (uint64_t k = 0; k < rows; ++k) {
    const int64_t r = row_of(k);
    const bool a = gj::BitAt(v64, k), b = gj::BitAt(v32, k);
    if (r < 0) {
      ++missing;
      wrong += a || b || g64[k] != 0 || g32[k] != 0.0f;
    } else {
      wrong += !a || !b || g64[k] != Mix64(uint64_t(r)) || g32[k] != PayloadF32(uint64_t(r));
    }
  }
  return wrong == 0 && n[0] == 0 && n[2] == missing && n[3] == missing;
}

}  // namespace gpujoin::bench
