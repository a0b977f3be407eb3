// The record layout of the CUDA backend's fixed-width payload (record_layout.hpp).
#include "cuda/payload/record_layout.hpp"

#include <bit>

namespace gpujoin::engine::detail {
namespace {

std::vector<ColumnType> TypesOf(std::span<const PayloadShape> shapes) {
  std::vector<ColumnType> types;
  types.reserve(shapes.size());
  for (const PayloadShape& s : shapes) types.push_back(s.type);
  return types;
}

}  // namespace

PayloadRecordLayout RecordLayoutOf(std::span<const ColumnType> types) {
  PayloadRecordLayout layout;
  layout.offsets.assign(types.size(), kNotInRecord);
  layout.padded_column = types.size();
  uint32_t at = 0;
  for (const size_t width : {size_t{8}, size_t{4}}) {
    for (size_t c = 0; c < types.size(); ++c) {
      if (ColumnWidth(types[c]) != width) continue;
      layout.offsets[c] = at;
      at += uint32_t(width);
    }
  }
  for (size_t c = 0; c < types.size(); ++c) {
    if (ColumnWidth(types[c]) != 0) layout.padded_column = c;
  }
  layout.value_bytes = at;
  layout.stride = at <= 64 ? (at == 0 ? 0 : std::bit_ceil(at)) : (at + 63) / 64 * 64;
  return layout;
}

uint64_t CudaPayloadStorageBytes(uint64_t slots, std::span<const PayloadShape> shapes) {
  uint64_t bytes = 0;
  for (const PayloadShape& shape : shapes) bytes += PayloadStorageBytes(slots, shape);
  return bytes + RecordLayoutOf(TypesOf(shapes)).PaddingBytes(slots);
}

}  // namespace gpujoin::engine::detail
