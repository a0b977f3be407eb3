// BuildShapeOf: what a build node gives a backend's build, for its memory estimate.
#include "gpujoin/engine/backend.hpp"

#include <type_traits>

namespace gpujoin::engine {

template <IndexKey K>
BuildShape BuildShapeOf(const BuildIndexNodeT<K>& node) {
  BuildShape shape;
  shape.key_type = KeyTypeOfKey<K>();
  shape.rows = KeyRows(node.keys);
  if constexpr (std::is_same_v<K, ColumnKey>) shape.key_column_bytes = KeyColumnBytes(node.keys);
  shape.explicit_values = node.values.has_value();
  for (const ColumnView& column : node.payload) shape.payload.push_back(PayloadShapeOf(column));
  return shape;
}

template <IndexKey K>
BuildShape BuildShapeOf(const BuildBatchIndexNodeT<K>& node) {
  BuildShape shape;
  shape.key_type = KeyTypeOfKey<K>();
  shape.batch = true;
  for (const BatchChunkT<K>& chunk : node.chunks) {
    // Backends skip empty chunks (and their masks) entirely.
    const uint64_t rows = KeyRows(chunk.keys);
    if (rows == 0) continue;
    shape.rows += rows;
    if constexpr (std::is_same_v<K, ColumnKey>) shape.key_column_bytes += KeyColumnBytes(chunk.keys);
    ++shape.batch_chunks;
    shape.batch_validity = shape.batch_validity || !chunk.validity.empty();
  }
  for (const ColumnView& column : node.payload) shape.payload.push_back(PayloadShapeOf(column));
  return shape;
}

template BuildShape BuildShapeOf(const BuildIndexNodeT<uint32_t>&);
template BuildShape BuildShapeOf(const BuildIndexNodeT<uint64_t>&);
template BuildShape BuildShapeOf(const BuildBatchIndexNodeT<uint32_t>&);
template BuildShape BuildShapeOf(const BuildBatchIndexNodeT<uint64_t>&);
template BuildShape BuildShapeOf(const BuildIndexNodeT<ColumnKey>&);
template BuildShape BuildShapeOf(const BuildBatchIndexNodeT<ColumnKey>&);

}  // namespace gpujoin::engine
