// BuildShapeOf: what a build node gives a backend's build, for its memory estimate.
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {

template <KeyWord K>
BuildShape BuildShapeOf(const BuildIndexNodeT<K>& node) {
  BuildShape shape;
  shape.key_type = KeyTypeOf<K>();
  for (const auto& chunk : node.keys) shape.rows += chunk.size();
  shape.explicit_values = node.values.has_value();
  for (const ColumnView& column : node.payload) shape.payload.push_back(PayloadShapeOf(column));
  return shape;
}

template <KeyWord K>
BuildShape BuildShapeOf(const BuildBatchIndexNodeT<K>& node) {
  BuildShape shape;
  shape.key_type = KeyTypeOf<K>();
  shape.batch = true;
  for (const BatchChunkT<K>& chunk : node.chunks) {
    // Backends skip empty chunks (and their masks) entirely.
    if (chunk.keys.empty()) continue;
    shape.rows += chunk.keys.size();
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

}  // namespace gpujoin::engine
