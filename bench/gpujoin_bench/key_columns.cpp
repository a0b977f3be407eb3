// Key-schema indexes (string and composite keys): 2^27 slots of 16 bytes
// (fingerprint, build row), 2^26 build rows (load 0.5) with generated values,
// key columns resident on the device. Three schemas: 16-byte and 32-byte
// random strings, and a (uint32, uint32) pair.
//  - build: the row hash of the key columns, the grouping pass, the Robin Hood
//    insert of each key's lowest row, the pass over the other rows and the
//    row values (what a build node runs once its columns are on the device);
//  - lookup with found flags and statistics, all hits, queries in another
//    order than the build: the row hash of the query columns and the probe,
//    which compares the key columns on an equal fingerprint.
// Every lookup row and the build statistics are checked.
//
// Byte model per key: build: the key bytes (+ 8 B of offsets for strings)
// read twice (hash, compare), fingerprint 8 B written and read twice, the
// grouping table (a 16-byte word read and written), a 32-byte sector of the
// table, row values 4 B; lookup: the query bytes (+ offsets), fingerprint 8 B
// written and read, a 32-byte table sector, the stored key's bytes (+ offsets)
// and value 4 B, value 4 B and found 1 B out.
#include <string>
#include <vector>

#include "cuda/hash/hash_device.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/index/lookup.hpp"
#include "families.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

// One schema's device columns for `n` rows: views, their host copy, and the
// per-row fingerprints and validity a hash pass writes.
struct KeyRows {
  KeyRows(DeviceAllocations& mem, const std::vector<gd::HashView>& host, uint64_t n)
      : host_views(host) {
    views = mem.Array<gd::HashView>(host.size());
    CHECK_CUDA(
        cudaMemcpy(views, host.data(), host.size() * sizeof(gd::HashView), cudaMemcpyHostToDevice));
    fingerprints = mem.Array<uint64_t>(n);
    hash_validity = mem.Array<uint8_t>((n + 7) / 8);
    valid = mem.Array<uint8_t>(n);
    rows = gd::DeviceKeyRows{views, uint32_t(host.size()), fingerprints, valid, n};
  }
  // Hashes the rows into fingerprints (what FingerprintKeys enqueues).
  void Hash(cudaStream_t s) const {
    CHECK_CUDA(
        gd::LaunchHashRows<uint64_t>(host_views, views, rows.rows, fingerprints, hash_validity, s));
    CHECK_CUDA(
        gd::FinishFingerprints(fingerprints, hash_validity, nullptr, rows.rows, 64, valid, s));
  }
  std::vector<gd::HashView> host_views;
  gd::HashView* views;
  uint64_t* fingerprints;
  uint8_t* hash_validity;
  uint8_t* valid;
  gd::DeviceKeyRows rows;
};

// The columns of `n` keys of a schema (string `len` bytes, or 0: the pair).
std::vector<gd::HashView> MakeColumns(DeviceAllocations& mem, uint32_t len, uint64_t n,
                                      uint64_t build_n, bool queries, cudaStream_t s) {
  if (len > 0) {
    auto* chars = mem.Array<uint8_t>(n * len + 8);
    auto* offsets = mem.Array<int64_t>(n + 1);
    CHECK_CUDA(LaunchMakeStringKeys(chars, offsets, n, len, build_n, queries, s));
    return {gd::StoredKeyView(gj::ColumnType::kString, chars, offsets, nullptr)};
  }
  auto* a = mem.Array<uint32_t>(n);
  auto* b = mem.Array<uint32_t>(n);
  CHECK_CUDA(LaunchMakePairKeys(a, b, n, build_n, queries, s));
  return {
      gd::StoredKeyView(gj::ColumnType::kUint32, reinterpret_cast<uint8_t*>(a), nullptr, nullptr),
      gd::StoredKeyView(gj::ColumnType::kUint32, reinterpret_cast<uint8_t*>(b), nullptr, nullptr)};
}

void RunSchema(BenchContext& ctx, uint32_t len) {
  const uint32_t cap = (1u << 27) >> ctx.shift;
  const uint64_t n = cap / 2;
  cudaStream_t s = ctx.stream;
  DeviceAllocations mem;
  const std::string what = len > 0 ? std::to_string(len) + "-byte strings" : "(uint32, uint32)";
  const double key_bytes = len > 0 ? len + 8.0 : 8.0;
  auto* slots = mem.Array<gd::Slot64>(gd::TableAllocationSlots(cap));
  const gd::DeviceTableT<gj::ColumnKey> table{slots, cap};
  auto* row_values = mem.Array<uint32_t>(n);
  auto* bstats = mem.Array<gd::DeviceBuildStats>(1);
  auto* qstats = mem.Array<gd::DeviceQueryStats>(1);
  const uint64_t scratch_bytes = gd::KeyBuildScratchBytes(n);
  void* scratch = mem.Bytes(scratch_bytes);
  const KeyRows build(mem, MakeColumns(mem, len, n, n, false, s), n);

  const double bms = ctx.MedianMs([&] {
    build.Hash(s);
    CHECK_CUDA(gd::BuildKeyTable(table, build.rows, cap, scratch, scratch_bytes, bstats, s));
    CHECK_CUDA(gd::WriteRowValues(n, nullptr, 0, nullptr, nullptr, 0, row_values, s));
  });
  const gd::DeviceBuildStats st = Fetch(bstats);
  const bool built = ctx.Check(st.unique_keys == n && st.duplicate_rows == 0 &&
                                   st.overflow_rows == 0 && st.invalid_rows == 0,
                               "key-schema build statistics, " + what);
  const bool strings16 = len == 16;
  ctx.rows.push_back({"build " + what + ", load 0.5" + (built ? "" : " FAIL"), double(n), bms,
                      double(n) * (2 * key_bytes + 24 + 32 + 32 + 4),
                      strings16 ? ">= 5 Gkeys/s" : "", strings16 ? 5e9 : 0, strings16 ? 1 : 0});

  const KeyRows queries(mem, MakeColumns(mem, len, n, n, true, s), n);
  auto* values = mem.Array<uint32_t>(n);
  auto* found = mem.Array<uint8_t>(n);
  CHECK_CUDA(cudaMemsetAsync(values, kPoison, n * 4, s));
  CHECK_CUDA(cudaMemsetAsync(found, kPoison, n, s));
  const gd::StoredKeyRows stored{build.views, uint32_t(build.host_views.size()), row_values};
  const double ms = ctx.MedianMs([&] {
    CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), s));
    queries.Hash(s);
    CHECK_CUDA(gd::LookupKeyRows(table, stored, queries.rows, cap, values, found, nullptr, nullptr,
                                 qstats, s));
  });
  CHECK_CUDA(cudaStreamSynchronize(s));
  bool ok = ctx.Check(Fetch(qstats).found == n, "key-schema lookup found count, " + what);
  {
    const std::vector<uint32_t> got = FetchAll(values, n);
    const std::vector<uint8_t> got_found = FetchAll(found, n);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n; ++i) {
      wrong += got[i] != uint32_t(HitRowOf(i, n)) || got_found[i] != 1;
    }
    ok &= ctx.Check(wrong == 0, "key-schema lookup values and found flags, " + what);
  }
  const double target = len == 16 ? 10e9 : len == 32 ? 7e9 : 14e9;
  ctx.rows.push_back({"lookup " + what + "+found+stats, all hits, load 0.5" + (ok ? "" : " FAIL"),
                      double(n), ms, double(n) * (2 * key_bytes + 16 + 32 + 4 + 5),
                      ">= " + std::to_string(int(target / 1e9)) + " Gkeys/s", target, 1});
}

}  // namespace

void RunKeyColumns(BenchContext& ctx) {
  for (const uint32_t len : {16u, 32u, 0u}) RunSchema(ctx, len);
}

}  // namespace gpujoin::bench
