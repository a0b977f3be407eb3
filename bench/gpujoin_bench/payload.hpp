// Payload columns for the lookup and join families: an int64 column (Mix64(row))
// and a float32 column (PayloadF32(row)) stored in slot order beside the uint32
// index, in one 16-byte record per slot (the int64 at 0, the float32 at 8), as
// a build stores them; and the gather of both (what a node gathering them runs,
// without the transfers).
#pragma once

#include <cstdint>
#include <functional>

#include "context.hpp"
#include "cuda/payload/payload_ops.hpp"
#include "index_fixture.hpp"

namespace gpujoin::bench {

struct PayloadColumns {
  /// Stores both columns of `n` build rows beside the table of `cap` slots just
  /// built from `src` (synchronises the stream).
  PayloadColumns(IndexFixture& fx, const gd::BuildSource& src, uint32_t cap, uint64_t n);

  /// Gathers both columns of `rows` into out64/out32 and their validity (one
  /// gather kernel), counting nulls into nulls[2] and nulls[3].
  void GatherBoth(const gd::GatherRows& rows) const;
  /// Fills the gathered outputs with kPoison (the first `rows` rows).
  void PoisonOutputs(uint64_t rows, bool validity) const;
  /// Whether the first `rows` gathered rows hold build row row_of(k) (or, for
  /// row_of(k) < 0, null) and the null counts agree.
  bool GatheredOk(uint64_t rows, const std::function<int64_t(uint64_t)>& row_of) const;

  BenchContext& ctx;
  DeviceAllocations mem;
  uint64_t* src64;
  float* src32;
  uint32_t* winners;
  uint8_t* records;   // per slot: the int64 at 0, the float32 at 8 (16 bytes)
  uint32_t* slot_of;  // per query row, then per pair
  uint64_t* out64;
  float* out32;
  uint8_t* valid64;
  uint8_t* valid32;
  unsigned long long* nulls;  // [store, store, gather64, gather32]
  void* join_scratch;         // JoinScratchBytesWithSlots(n)
};

}  // namespace gpujoin::bench
