// The uint32 index the build, lookup and join families run on: 2^27 slots (a
// 1 GiB table; 2^23 with --quick), build keys BuildKeyOf(row) and explicit
// values 12345 + 3 * row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "context.hpp"
#include "cuda/device_ops.hpp"

namespace gpujoin::bench {

/// One table size: its capacity, the rows built into it, and the load as the
/// row names spell it.
struct IndexSize {
  uint32_t capacity;
  uint64_t rows;
  std::string load;
};

/// The device buffers of the uint32 index, freed with the fixture.
struct IndexFixture {
  explicit IndexFixture(BenchContext& ctx);

  /// Load 0.5 and 0.8 of the full table (the targets) and, unless profiling, a
  /// 64 MiB table at load 0.5, below the size where kAuto switches from the
  /// direct path to tiles.
  std::vector<IndexSize> Sizes() const;
  /// Fills keys[0, n) with BuildKeyOf(row) and values[0, n) with 12345 + 3 * row.
  void MakeRows(uint64_t n);
  /// A build of keys[0, n) with generated row ids on the default path.
  gd::BuildSource Source(uint64_t n) const;
  /// Clears the table of `cap` slots and builds `src` into it (enqueued).
  void Build(const gd::BuildSource& src, uint32_t cap);
  /// The value a lookup of query row i returns (MakeQueries of n build rows):
  /// the hit row's explicit value, or kEmptyKey for a miss.
  static uint32_t Expected(uint64_t i, uint64_t n, bool half_miss);

  BenchContext& ctx;
  DeviceAllocations mem;
  uint32_t capacity;
  uint64_t max_n;  // rows at load 0.8
  uint64_t* slots;
  gd::DeviceBuildStats* bstats;
  unsigned int* fell_back;
  uint32_t* keys;
  uint32_t* values;
};

}  // namespace gpujoin::bench
