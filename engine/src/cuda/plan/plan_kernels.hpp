// Internal (CUDA builds only): the device-level API of aggregate plans on the
// device (gpujoin/engine/plan_device.hpp): key words of a plan column, a
// lookup step's outcome, the filter program, group keys and their codes.
// Every function takes device pointers, enqueues work on `stream` and returns
// without synchronising. Rows are live (1) or dropped (0) in a byte per row;
// every step reads and narrows it, and counts the rows it saw and kept.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

/// A column on the device: fixed-width values (kBool: one byte per row, 0/1)
/// and an optional Arrow validity bitmap (null: no nulls).
struct PlanColumnRef {
  ColumnType type = ColumnType::kInt32;
  const void* data = nullptr;
  const uint8_t* validity = nullptr;
};

/// What one step counts: rows reaching it and rows it keeps; lookups also
/// found, missing, total and largest probes over the rows reaching them.
struct PlanStepCounters {
  unsigned long long rows_in = 0;
  unsigned long long rows_out = 0;
  unsigned long long found = 0;
  unsigned long long missing = 0;
  unsigned long long total_probes = 0;
  unsigned long long max_probes = 0;
};

/// keys[r] = column row r as a key word K, or K's reserved key where it is
/// null or out of K's range (a missing key).
template <class K>
cudaError_t PlanKeyWords(PlanColumnRef column, uint64_t rows, K* keys, cudaStream_t stream);

/// A lookup step of `kind` over its found flags and probes: counts the live
/// rows and their outcome into `counters`, then drops the rows the kind drops.
cudaError_t PlanLookupOutcome(const uint8_t* found, const uint32_t* probes, uint64_t rows,
                              JoinKind kind, uint8_t* live, PlanStepCounters* counters,
                              cudaStream_t stream);

/// One instruction of a filter program, in postfix order over a stack of
/// three-valued results (0 false, 1 true, 2 unknown).
struct PlanFilterOp {
  enum Code : uint8_t { kCompare, kIn, kNotIn, kIsNull, kIsNotNull, kAnd, kOr, kNot };
  Code code = kCompare;
  uint8_t compare = 0;  ///< CompareOp
  uint32_t column = 0;
  uint32_t first_literal = 0;
  uint32_t literals = 0;
};

/// A literal of a filter program (PlanLiteral without the string).
struct PlanFilterLiteral {
  __int128 integer = 0;
  double real = 0;
  uint8_t kind = 0;  ///< PlanLiteral::Kind
  uint8_t boolean = 0;
};

/// The deepest stack a filter program may need.
inline constexpr int kPlanFilterStack = 32;

/// Evaluates the program (`ops` of `op_count`, literals) for every live row
/// over `columns` and keeps the rows where it is true; counts into `counters`.
cudaError_t PlanFilter(const PlanColumnRef* columns, const PlanFilterOp* ops, uint32_t op_count,
                       const PlanFilterLiteral* literals, uint64_t rows, uint8_t* live,
                       PlanStepCounters* counters, cudaStream_t stream);

/// The most group-by columns a plan's group key packs.
inline constexpr int kPlanMaxGroupColumns = 32;

/// Group-by columns and how they pack (GroupKeyLayout).
struct PlanGroupColumns {
  PlanColumnRef columns[kPlanMaxGroupColumns];
  uint8_t bits[kPlanMaxGroupColumns] = {};
  uint32_t count = 0;
  uint32_t value_bits = 0;
};

/// The empty slot of the group table.
inline constexpr unsigned long long kPlanNoGroup = ~0ull;

/// Inserts every live row's packed key into the open-addressing table
/// (`keys`, `first_rows` of `capacity` slots, a power of two, initialised to
/// kPlanNoGroup and 0xffffffff), keeping each key's first row; slot_of_row[r]
/// is its slot. Counts the keys inserted in *inserted (zeroed first); sets
/// *full, and stops early, when they pass `max_groups` or a key finds no slot.
cudaError_t PlanGroupKeys(const PlanGroupColumns& group, const uint8_t* live, uint64_t rows,
                          unsigned long long* keys, uint32_t* first_rows, uint64_t capacity,
                          uint64_t max_groups, uint32_t* slot_of_row, unsigned int* full,
                          unsigned long long* inserted, cudaStream_t stream);

/// The used slots of the table: out_keys, out_first_rows and out_slots get
/// one entry each (in no order), *count how many.
cudaError_t PlanCollectGroups(const unsigned long long* keys, const uint32_t* first_rows,
                              uint64_t capacity, unsigned long long* out_keys,
                              uint32_t* out_first_rows, uint32_t* out_slots, unsigned int* count,
                              cudaStream_t stream);

/// codes[r] = slot_codes[slot_of_row[r]] for live rows, after slot_codes[slots[i]]
/// = entry_codes[i] for the n collected entries; 0xffffffff (no group) for
/// dropped rows.
cudaError_t PlanRowCodes(const uint32_t* slots, const uint32_t* entry_codes, uint32_t n,
                         uint32_t* slot_codes, const uint32_t* slot_of_row, const uint8_t* live,
                         uint64_t rows, uint32_t* codes, cudaStream_t stream);

/// mask[r] = 1 where the validity bitmap's bit r is set, else 0.
cudaError_t PlanMaskOf(const uint8_t* validity, uint64_t rows, uint32_t* mask,
                       cudaStream_t stream);

}  // namespace gpujoin::engine::detail
