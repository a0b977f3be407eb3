#include "index_fixture.hpp"

#include "inputs.hpp"

namespace gpujoin::bench {

IndexFixture::IndexFixture(BenchContext& c)
    : ctx(c), capacity((1u << 27) >> c.shift), max_n(uint64_t(0.8 * capacity)) {
  slots = mem.Array<uint64_t>(gd::TableAllocationSlots(capacity));
  bstats = mem.Array<gd::DeviceBuildStats>(1);
  fell_back = mem.Array<unsigned int>(1);
  keys = mem.Array<uint32_t>(max_n);
  values = mem.Array<uint32_t>(max_n);
}

std::vector<IndexSize> IndexFixture::Sizes() const {
  std::vector<IndexSize> sizes = {{capacity, capacity / 2, "0.5"}, {capacity, max_n, "0.8"}};
  if (!ctx.options.profile) sizes.push_back({capacity / 16, capacity / 32, "0.5, 64 MiB table"});
  return sizes;
}

void IndexFixture::MakeRows(uint64_t n) {
  CHECK_CUDA(LaunchMakeKeys(keys, n, 0, ctx.stream));
  CHECK_CUDA(LaunchIota(values, n, 12345, ctx.stream));
}

gd::BuildSource IndexFixture::Source(uint64_t n) const {
  gd::BuildSource src;
  src.keys = keys;
  src.rows = n;
  src.fell_back = fell_back;
  return src;
}

void IndexFixture::Build(const gd::BuildSource& src, uint32_t cap) {
  CHECK_CUDA(gd::ClearAndBuildTable(gd::DeviceTable{slots, cap}, src, cap, bstats, ctx.stream));
}

uint32_t IndexFixture::Expected(uint64_t i, uint64_t n, bool half_miss) {
  return (half_miss && (i & 1)) ? gj::kEmptyKey : 12345u + uint32_t(HitRowOf(i, n)) * 3u;
}

}  // namespace gpujoin::bench
