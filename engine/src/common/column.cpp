// Typed column helpers shared by every backend: payload shapes and sizes.
#include "gpujoin/engine/column.hpp"

#include <array>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine {

PayloadShape PayloadShapeOf(const ColumnView& column) {
  PayloadShape shape;
  shape.type = column.type;
  shape.nullable = !column.validity.empty();
  if (IsVariableWidth(column.type) && column.offsets.size() == column.rows + 1) {
    shape.string_bytes = column.offsets[column.rows] - column.offsets[0];
  }
  return shape;
}

uint64_t PayloadStorageBytes(uint64_t slots, const PayloadShape& shape) {
  uint64_t bytes = 0;
  switch (shape.type) {
    case ColumnType::kBool:
      bytes = BitmapBytes(slots);
      break;
    case ColumnType::kBinary:
    case ColumnType::kString:
      bytes = (slots + 1) * sizeof(uint64_t) + shape.string_bytes;
      break;
    default:
      bytes = slots * ColumnWidth(shape.type);
      break;
  }
  if (shape.nullable) bytes += BitmapBytes(slots);
  return bytes;
}

}  // namespace gpujoin::engine
