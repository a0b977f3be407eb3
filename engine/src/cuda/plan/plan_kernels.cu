// Kernels of aggregate plans on the device (plan_kernels.hpp).
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "cuda/kernel_utils.cuh"
#include "cuda/plan/plan_kernels.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {
namespace {

constexpr uint8_t kFalse = 0, kTrue = 1, kUnknown = 2;

__device__ __forceinline__ bool ValidAt(const PlanColumnRef& c, uint64_t r) {
  return c.validity == nullptr || ((c.validity[r >> 3] >> (r & 7)) & 1u);
}

__device__ __forceinline__ bool IsIntegerColumn(ColumnType t) {
  return t == ColumnType::kInt32 || t == ColumnType::kInt64 || t == ColumnType::kUint32 ||
         t == ColumnType::kUint64;
}

// Row r of an integer or kBool column as an exact integer.
__device__ __forceinline__ __int128 IntegerAt(const PlanColumnRef& c, uint64_t r) {
  switch (c.type) {
    case ColumnType::kInt32: return static_cast<const int32_t*>(c.data)[r];
    case ColumnType::kInt64: return static_cast<const int64_t*>(c.data)[r];
    case ColumnType::kUint32: return static_cast<const uint32_t*>(c.data)[r];
    case ColumnType::kUint64: return static_cast<const uint64_t*>(c.data)[r];
    case ColumnType::kBool: return static_cast<const uint8_t*>(c.data)[r];
    default: return 0;
  }
}

__device__ __forceinline__ double RealAt(const PlanColumnRef& c, uint64_t r) {
  switch (c.type) {
    case ColumnType::kFloat32: return static_cast<const float*>(c.data)[r];
    case ColumnType::kFloat64: return static_cast<const double*>(c.data)[r];
    default: return static_cast<double>(IntegerAt(c, r));
  }
}

template <class T>
__device__ __forceinline__ bool Holds(uint8_t op, T a, T b) {
  switch (op) {
    case 0: return a == b;     // kEq
    case 1: return !(a == b);  // kNe (a NaN is unequal to everything)
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
  }
}

// A non-null row against a literal, as the host's CompareRow: integers
// exactly, a float on either side as doubles, booleans as 0/1.
__device__ __forceinline__ bool CompareAt(const PlanColumnRef& c, uint64_t r, uint8_t op,
                                          const PlanFilterLiteral& lit) {
  if (lit.kind == 3 || c.type == ColumnType::kBool) {  // PlanLiteral::Kind::kBool
    return Holds<int>(op, static_cast<int>(IntegerAt(c, r)), lit.boolean);
  }
  if (lit.kind == 0 && IsIntegerColumn(c.type)) {  // kInteger against an integer column
    return Holds<__int128>(op, IntegerAt(c, r), lit.integer);
  }
  const double l = lit.kind == 0 ? static_cast<double>(lit.integer) : lit.real;
  return Holds<double>(op, RealAt(c, r), l);
}

template <class K>
__global__ void KeyWordsKernel(PlanColumnRef c, uint64_t rows, K* keys) {
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows;
       r += uint64_t(gridDim.x) * blockDim.x) {
    const __int128 v = ValidAt(c, r) ? IntegerAt(c, r) : -1;
    const __int128 max = static_cast<__int128>(static_cast<K>(~K{0}));
    keys[r] = (v < 0 || v > max) ? static_cast<K>(~K{0}) : static_cast<K>(v);
  }
}

__global__ void LookupOutcomeKernel(const uint8_t* found, const uint32_t* probes, uint64_t rows,
                                    JoinKind kind, uint8_t* live, PlanStepCounters* counters) {
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // in, out, found, missing, probes
  unsigned long long max = 0;
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows;
       r += uint64_t(gridDim.x) * blockDim.x) {
    if (!live[r]) continue;
    const bool f = found[r] != 0;
    const bool keep = kind == JoinKind::kLeftOuter || (kind == JoinKind::kLeftAnti ? !f : f);
    sums[0] += 1;
    sums[1] += keep;
    sums[2] += f;
    sums[3] += !f;
    sums[4] += probes[r];
    max = probes[r] > max ? probes[r] : max;
    if (!keep) live[r] = 0;
  }
  BlockFlushStats<5>(sums, max, &counters->rows_in, &counters->max_probes);
}

__global__ void FilterKernel(const PlanColumnRef* columns, const PlanFilterOp* ops,
                             uint32_t op_count, const PlanFilterLiteral* literals, uint64_t rows,
                             uint8_t* live, PlanStepCounters* counters) {
  unsigned long long sums[2] = {0, 0};
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows;
       r += uint64_t(gridDim.x) * blockDim.x) {
    if (!live[r]) continue;
    uint8_t stack[kPlanFilterStack];
    int top = 0;
    for (uint32_t i = 0; i < op_count; ++i) {
      const PlanFilterOp op = ops[i];
      switch (op.code) {
        case PlanFilterOp::kCompare: {
          const PlanColumnRef& c = columns[op.column];
          stack[top++] = !ValidAt(c, r) ? kUnknown
                         : CompareAt(c, r, op.compare, literals[op.first_literal]) ? kTrue
                                                                                    : kFalse;
          break;
        }
        case PlanFilterOp::kIn:
        case PlanFilterOp::kNotIn: {
          const PlanColumnRef& c = columns[op.column];
          if (!ValidAt(c, r)) {
            stack[top++] = kUnknown;
            break;
          }
          bool hit = false;
          for (uint32_t k = 0; k < op.literals && !hit; ++k) {
            hit = CompareAt(c, r, 0, literals[op.first_literal + k]);
          }
          stack[top++] = (hit != (op.code == PlanFilterOp::kNotIn)) ? kTrue : kFalse;
          break;
        }
        case PlanFilterOp::kIsNull:
        case PlanFilterOp::kIsNotNull: {
          const bool null = !ValidAt(columns[op.column], r);
          stack[top++] = null == (op.code == PlanFilterOp::kIsNull) ? kTrue : kFalse;
          break;
        }
        case PlanFilterOp::kAnd: {
          const uint8_t b = stack[--top], a = stack[top - 1];
          stack[top - 1] = (a == kFalse || b == kFalse)       ? kFalse
                           : (a == kUnknown || b == kUnknown) ? kUnknown
                                                              : kTrue;
          break;
        }
        case PlanFilterOp::kOr: {
          const uint8_t b = stack[--top], a = stack[top - 1];
          stack[top - 1] = (a == kTrue || b == kTrue)         ? kTrue
                           : (a == kUnknown || b == kUnknown) ? kUnknown
                                                              : kFalse;
          break;
        }
        case PlanFilterOp::kNot: {
          const uint8_t a = stack[top - 1];
          stack[top - 1] = a == kUnknown ? kUnknown : (a == kTrue ? kFalse : kTrue);
          break;
        }
      }
    }
    const bool keep = top == 1 && stack[0] == kTrue;
    sums[0] += 1;
    sums[1] += keep;
    if (!keep) live[r] = 0;
  }
  BlockFlushStats<2>(sums, 0, &counters->rows_in, nullptr);
}

__global__ void GroupKeysKernel(PlanGroupColumns g, const uint8_t* live, uint64_t rows,
                                unsigned long long* keys, uint32_t* first_rows, uint64_t capacity,
                                unsigned long long max_groups, uint32_t* slot_of_row,
                                unsigned int* full, unsigned long long* inserted) {
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows;
       r += uint64_t(gridDim.x) * blockDim.x) {
    if (!live[r]) continue;
    // Past the limit the batch fails: stop rather than fill the table.
    if (*reinterpret_cast<volatile unsigned int*>(full) != 0) return;
    unsigned long long key = 0;
    unsigned shift = 0;
    for (uint32_t j = 0; j < g.count; ++j) {
      const PlanColumnRef& c = g.columns[j];
      const unsigned long long v =
          ValidAt(c, r) ? static_cast<unsigned long long>(static_cast<uint64_t>(IntegerAt(c, r)))
                        : 0;
      const unsigned long long mask = g.bits[j] == 64 ? ~0ull : ((1ull << g.bits[j]) - 1);
      // A label's code past its bits is a null, like a null value.
      if (!ValidAt(c, r) || (g.bits[j] < 32 && v > mask)) {
        key |= 1ull << (g.value_bits + j);
      } else {
        key |= (v & mask) << shift;
      }
      shift += g.bits[j];
    }
    uint64_t slot = SlotHash(static_cast<uint64_t>(key)) & (capacity - 1);
    bool placed = false;
    for (uint64_t probe = 0; probe < capacity; ++probe) {
      // Few groups means many rows per slot: read before any atomic.
      unsigned long long prev = *reinterpret_cast<volatile unsigned long long*>(&keys[slot]);
      if (prev == kPlanNoGroup) {
        prev = atomicCAS(&keys[slot], kPlanNoGroup, key);
        if (prev == kPlanNoGroup && atomicAdd(inserted, 1ull) + 1 > max_groups) {
          atomicExch(full, 1u);
        }
      }
      if (prev == kPlanNoGroup || prev == key) {
        if (static_cast<uint32_t>(r) < *reinterpret_cast<volatile uint32_t*>(&first_rows[slot])) {
          atomicMin(&first_rows[slot], static_cast<uint32_t>(r));
        }
        slot_of_row[r] = static_cast<uint32_t>(slot);
        placed = true;
        break;
      }
      slot = (slot + 1) & (capacity - 1);
    }
    if (!placed) atomicExch(full, 1u);
  }
}

__global__ void CollectGroupsKernel(const unsigned long long* keys, const uint32_t* first_rows,
                                    uint64_t capacity, unsigned long long* out_keys,
                                    uint32_t* out_first_rows, uint32_t* out_slots,
                                    unsigned int* count) {
  for (uint64_t s = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; s < capacity;
       s += uint64_t(gridDim.x) * blockDim.x) {
    if (keys[s] == kPlanNoGroup) continue;
    const unsigned int at = atomicAdd(count, 1u);
    out_keys[at] = keys[s];
    out_first_rows[at] = first_rows[s];
    out_slots[at] = static_cast<uint32_t>(s);
  }
}

__global__ void ScatterCodesKernel(const uint32_t* slots, const uint32_t* entry_codes, uint32_t n,
                                   uint32_t* slot_codes) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    slot_codes[slots[i]] = entry_codes[i];
  }
}

__global__ void RowCodesKernel(const uint32_t* slot_codes, const uint32_t* slot_of_row,
                               const uint8_t* live, uint64_t rows, uint32_t* codes) {
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows;
       r += uint64_t(gridDim.x) * blockDim.x) {
    codes[r] = live[r] ? slot_codes[slot_of_row[r]] : 0xffffffffu;
  }
}

__global__ void MaskKernel(const uint8_t* validity, uint64_t rows, uint32_t* mask) {
  for (uint64_t r = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; r < rows;
       r += uint64_t(gridDim.x) * blockDim.x) {
    mask[r] = (validity[r >> 3] >> (r & 7)) & 1u;
  }
}

template <class Kernel>
unsigned Grid(Kernel kernel, uint64_t items, std::atomic<int>& cache) {
  return GridFor(items, CachedResident(kernel, cache));
}

}  // namespace

template <class K>
cudaError_t PlanKeyWords(PlanColumnRef column, uint64_t rows, K* keys, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  KeyWordsKernel<K><<<Grid(KeyWordsKernel<K>, rows, resident), kBlockThreads, 0, stream>>>(
      column, rows, keys);
  return cudaGetLastError();
}
template cudaError_t PlanKeyWords<uint32_t>(PlanColumnRef, uint64_t, uint32_t*, cudaStream_t);
template cudaError_t PlanKeyWords<uint64_t>(PlanColumnRef, uint64_t, uint64_t*, cudaStream_t);

cudaError_t PlanLookupOutcome(const uint8_t* found, const uint32_t* probes, uint64_t rows,
                              JoinKind kind, uint8_t* live, PlanStepCounters* counters,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  LookupOutcomeKernel<<<Grid(LookupOutcomeKernel, rows, resident), kBlockThreads, 0, stream>>>(
      found, probes, rows, kind, live, counters);
  return cudaGetLastError();
}

cudaError_t PlanFilter(const PlanColumnRef* columns, const PlanFilterOp* ops, uint32_t op_count,
                       const PlanFilterLiteral* literals, uint64_t rows, uint8_t* live,
                       PlanStepCounters* counters, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  FilterKernel<<<Grid(FilterKernel, rows, resident), kBlockThreads, 0, stream>>>(
      columns, ops, op_count, literals, rows, live, counters);
  return cudaGetLastError();
}

cudaError_t PlanGroupKeys(const PlanGroupColumns& group, const uint8_t* live, uint64_t rows,
                          unsigned long long* keys, uint32_t* first_rows, uint64_t capacity,
                          uint64_t max_groups, uint32_t* slot_of_row, unsigned int* full,
                          unsigned long long* inserted, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  GroupKeysKernel<<<Grid(GroupKeysKernel, rows, resident), kBlockThreads, 0, stream>>>(
      group, live, rows, keys, first_rows, capacity, max_groups, slot_of_row, full, inserted);
  return cudaGetLastError();
}

cudaError_t PlanCollectGroups(const unsigned long long* keys, const uint32_t* first_rows,
                              uint64_t capacity, unsigned long long* out_keys,
                              uint32_t* out_first_rows, uint32_t* out_slots, unsigned int* count,
                              cudaStream_t stream) {
  static std::atomic<int> resident{0};
  CollectGroupsKernel<<<Grid(CollectGroupsKernel, capacity, resident), kBlockThreads, 0,
                        stream>>>(keys, first_rows, capacity, out_keys, out_first_rows, out_slots,
                                  count);
  return cudaGetLastError();
}

cudaError_t PlanRowCodes(const uint32_t* slots, const uint32_t* entry_codes, uint32_t n,
                         uint32_t* slot_codes, const uint32_t* slot_of_row, const uint8_t* live,
                         uint64_t rows, uint32_t* codes, cudaStream_t stream) {
  static std::atomic<int> scatter_resident{0}, rows_resident{0};
  if (n > 0) {
    ScatterCodesKernel<<<Grid(ScatterCodesKernel, n, scatter_resident), kBlockThreads, 0,
                         stream>>>(slots, entry_codes, n, slot_codes);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (rows == 0) return cudaSuccess;
  RowCodesKernel<<<Grid(RowCodesKernel, rows, rows_resident), kBlockThreads, 0, stream>>>(
      slot_codes, slot_of_row, live, rows, codes);
  return cudaGetLastError();
}

cudaError_t PlanMaskOf(const uint8_t* validity, uint64_t rows, uint32_t* mask,
                       cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  MaskKernel<<<Grid(MaskKernel, rows, resident), kBlockThreads, 0, stream>>>(validity, rows, mask);
  return cudaGetLastError();
}

}  // namespace gpujoin::engine::detail
