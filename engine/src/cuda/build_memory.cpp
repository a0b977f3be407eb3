#include "cuda/build_memory.hpp"

namespace gpujoin::engine::detail {
namespace {

// A stream-ordered allocation of `bytes` as the pool may charge it.
uint64_t PoolBytes(uint64_t bytes) {
  return (bytes + kPoolGranularityBytes - 1) / kPoolGranularityBytes * kPoolGranularityBytes;
}

}  // namespace

uint64_t BuildNodeTransientBytes(const HashIndexSpec& spec, const BuildShape& shape, BuildPath path,
                                 uint64_t transient_max_bytes) {
  const uint64_t rows = shape.rows;
  if (rows == 0) return 0;
  uint64_t uploads = PoolBytes(rows * KeyBytes(shape.key_type));  // keys
  if (shape.batch) {
    if (shape.batch_validity) uploads += PoolBytes(rows * sizeof(uint32_t));
    uploads += PoolBytes(uint64_t{shape.batch_chunks} * sizeof(uint64_t));  // chunk starts
    uploads += PoolBytes(uint64_t{shape.batch_chunks} * sizeof(uint32_t));  // chunk bases
  } else if (shape.explicit_values) {
    uploads += PoolBytes(rows * sizeof(uint32_t));
  }
  const uint64_t buffer = BuildTransientBytes(spec.capacity, rows, path, shape.key_type);
  // A buffer over the cap is never allocated: the build inserts directly.
  const bool allocated = buffer != 0 && (transient_max_bytes == 0 || buffer <= transient_max_bytes);
  return uploads + (allocated ? PoolBytes(buffer) : 0);
}

}  // namespace gpujoin::engine::detail
