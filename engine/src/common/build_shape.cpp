// BuildShapeOf: what a build node gives a backend's build, for its memory estimate.
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {

BuildShape BuildShapeOf(const BuildIndexNode& node) {
  BuildShape shape;
  for (const auto& chunk : node.keys) shape.rows += chunk.size();
  shape.explicit_values = node.values.has_value();
  return shape;
}

BuildShape BuildShapeOf(const BuildBatchIndexNode& node) {
  BuildShape shape;
  shape.batch = true;
  for (const BatchChunk& chunk : node.chunks) {
    // Backends skip empty chunks (and their masks) entirely.
    if (chunk.keys.empty()) continue;
    shape.rows += chunk.keys.size();
    ++shape.batch_chunks;
    shape.batch_validity = shape.batch_validity || !chunk.validity.empty();
  }
  return shape;
}

}  // namespace gpujoin::engine
