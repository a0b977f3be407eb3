// Row hashing on device-resident columns, 2^26 rows: int64 (hash64 and hash32)
// and 16-byte strings (hash64). Rows at 64 places (1024 rows each) are checked
// against the host hash.
//
// Byte model: bytes read (int64: 8 B; string: 16 B + a 4-byte offset); "GB/s"
// counts them alone, against the copy's read + written rate.
#include "cuda/hash/hash_device.hpp"
#include "families.hpp"
#include "hashing/hash_host.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

struct Case {
  const char* name;
  gj::ColumnType type;
  bool wide;
  double read;  // bytes per row
};

// The device inputs and outputs of every case.
struct HashBuffers {
  explicit HashBuffers(uint64_t rows) : n(rows) {
    ints = mem.Array<int64_t>(n);
    chars = mem.Array<uint64_t>(2 * n);
    offsets = mem.Array<int32_t>(n + 1);
    out = mem.Array<uint64_t>(n);
    validity = mem.Array<uint8_t>((n + 7) / 8);
    views = mem.Array<gd::HashView>(1);
  }
  DeviceAllocations mem;
  uint64_t n;
  int64_t* ints;
  uint64_t* chars;
  int32_t* offsets;
  uint64_t* out;
  uint8_t* validity;
  gd::HashView* views;
};

// Whether the device hashes and validity of 1024 rows from `first` equal the
// host hash of the same rows.
bool SampleOk(const Case& c, const HashBuffers& b, uint64_t first) {
  const uint64_t m = 1024;
  const std::vector<int64_t> hi = FetchAll(b.ints + first, m);
  const std::vector<uint8_t> hc =
      FetchAll(reinterpret_cast<const uint8_t*>(b.chars + 2 * first), m * 16);
  std::vector<int32_t> ho(m + 1);
  for (uint64_t r = 0; r <= m; ++r) ho[r] = int32_t(16 * r);
  std::vector<uint64_t> got64(m), want64(m);
  std::vector<uint32_t> got32(m), want32(m);
  std::vector<uint8_t> wantv(m / 8);
  if (c.wide)
    got64 = FetchAll(b.out + first, m);
  else
    got32 = FetchAll(reinterpret_cast<const uint32_t*>(b.out) + first, m);
  const std::vector<uint8_t> gotv = FetchAll(b.validity + first / 8, m / 8);
  gj::HashColumn h;
  h.type = c.type;
  h.length = m;
  if (c.type == gj::ColumnType::kBinary) {
    h.data = hc;
    h.offsets = ho;
  } else {
    h.data = {reinterpret_cast<const uint8_t*>(hi.data()), m * 8};
  }
  gj::HashNode node;
  node.columns.push_back(h);
  node.bits = c.wide ? gj::HashBits::k64 : gj::HashBits::k32;
  node.out64 = want64;
  node.out32 = want32;
  node.out_validity = wantv;
  gd::HashRowsHost(node);
  return (c.wide ? got64 == want64 : got32 == want32) && gotv == wantv;
}

void RunCase(BenchContext& ctx, const Case& c, const HashBuffers& b) {
  cudaStream_t s = ctx.stream;
  const uint64_t n = b.n;
  gd::HashView v;
  v.type = c.type;
  if (c.type == gj::ColumnType::kBinary) {
    v.data = reinterpret_cast<const uint8_t*>(b.chars);
    v.offsets = b.offsets;
  } else {
    v.data = reinterpret_cast<const uint8_t*>(b.ints);
  }
  CHECK_CUDA(cudaMemcpyAsync(b.views, &v, sizeof(v), cudaMemcpyHostToDevice, s));
  CHECK_CUDA(cudaMemsetAsync(b.out, kPoison, n * 8, s));
  CHECK_CUDA(cudaMemsetAsync(b.validity, kPoison, (n + 7) / 8, s));
  const double ms = ctx.MedianMs([&] {
    if (c.wide) {
      CHECK_CUDA(gd::LaunchHashRows<uint64_t>({&v, 1}, b.views, n, b.out, b.validity, s));
    } else {
      CHECK_CUDA(gd::LaunchHashRows<uint32_t>({&v, 1}, b.views, n,
                                              reinterpret_cast<uint32_t*>(b.out), b.validity, s));
    }
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  uint64_t wrong = 0;
  for (uint64_t k = 0; k < 64; ++k) wrong += !SampleOk(c, b, (n - 1024) / 63 * k & ~uint64_t{7});
  const bool ok = ctx.Check(wrong == 0, std::string(c.name) + " equals the host hash");
  const bool target = c.wide;
  ctx.rows.push_back({std::string(c.name) + ", bytes read" + (ok ? "" : " FAIL"), double(n), ms,
                      double(n) * c.read, target ? ">= 50% copy" : "", target ? 0.5 : 0,
                      target ? 2 : 0});
}

}  // namespace

void RunHash(BenchContext& ctx) {
  const HashBuffers b((uint64_t{1} << 26) >> ctx.shift);
  CHECK_CUDA(LaunchMakeHashInputs(b.ints, b.chars, b.offsets, b.n, ctx.stream));
  const Case cases[] = {{"hash64 int64", gj::ColumnType::kInt64, true, 8},
                        {"hash32 int64", gj::ColumnType::kInt64, false, 8},
                        {"hash64 string (16 bytes)", gj::ColumnType::kBinary, true, 20}};
  for (const Case& c : cases) RunCase(ctx, c, b);
}

}  // namespace gpujoin::bench
