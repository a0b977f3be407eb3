#include "common/plan/plan_lookup.hpp"

#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/plan/plan_table.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::plan_detail {
namespace {

// A key word per row: the column's value, or the reserved key (missing) for
// a null or a value K cannot hold.
template <KeyWord K>
std::vector<K> KeyWords(const PlanColumn& c) {
  std::vector<K> keys(c.rows);
  for (uint64_t r = 0; r < c.rows; ++r) {
    __int128 v = -1;
    if (c.valid(r)) {
      switch (c.type) {
        case ColumnType::kInt32: v = c.value<int32_t>(r); break;
        case ColumnType::kInt64: v = c.value<int64_t>(r); break;
        case ColumnType::kUint32: v = c.value<uint32_t>(r); break;
        case ColumnType::kUint64: v = c.value<uint64_t>(r); break;
        default: break;
      }
    }
    keys[r] = (v < 0 || v > static_cast<__int128>(std::numeric_limits<K>::max()))
                  ? kEmptyKeyOf<K>
                  : static_cast<K>(v);
  }
  return keys;
}

// Host outputs of one gathered payload column for `capacity` pairs.
struct Gathered {
  ColumnType type;
  std::vector<std::byte> data;
  std::vector<uint8_t> validity;
  std::vector<uint32_t> offsets;
  std::string bytes;
  uint64_t nulls = 0;
};

template <IndexKey K>
absl::StatusOr<PlanTable> LookupOf(Backend& backend, const PlanLookupStep& step,
                                   const HashIndex& index, const PlanTable& table,
                                   const PlanLimits& limits, PlanStepStatistics* statistics) {
  const uint64_t rows = table.rows;
  std::vector<uint32_t> word_keys32;
  std::vector<uint64_t> word_keys64;
  JoinBatchT<K> batch;
  if constexpr (std::same_as<K, ColumnKey>) {
    for (uint32_t c : step.key_columns) batch.keys.columns.push_back(HashColumnOf(table.columns[c]));
  } else if constexpr (std::same_as<K, uint32_t>) {
    word_keys32 = KeyWords<uint32_t>(table.columns[step.key_columns[0]]);
    batch.keys.push_back(std::span<const uint32_t>(word_keys32));
  } else {
    word_keys64 = KeyWords<uint64_t>(table.columns[step.key_columns[0]]);
    batch.keys.push_back(std::span<const uint64_t>(word_keys64));
  }
  const auto& payload = index.payload();
  uint64_t fixed_row_bytes = 8;  // left and right rows
  for (uint32_t s : step.select) {
    const ColumnType t = payload[s].type;
    fixed_row_bytes += IsVariableWidth(t) ? 4 : (t == ColumnType::kBool ? 1 : ColumnWidth(t));
  }
  const uint64_t table_row_bytes = rows == 0 ? 0 : (table.bytes() + rows - 1) / rows;

  std::vector<uint8_t> found(rows);
  uint64_t capacity = rows;
  for (int attempt = 0;; ++attempt) {
    GPUJOIN_RETURN_IF_ERROR(CheckTableBytes(capacity * (fixed_row_bytes + table_row_bytes), limits,
                                       "the lookup's rows"));
    std::vector<uint32_t> left(capacity), right(capacity);
    std::vector<Gathered> gathered(step.select.size());
    std::vector<GatherOutput> outputs;
    for (size_t i = 0; i < step.select.size(); ++i) {
      Gathered& g = gathered[i];
      g.type = payload[step.select[i]].type;
      g.validity.assign(BitmapBytes(capacity), 0);
      GatherOutput o;
      o.column = step.select[i];
      o.validity = g.validity;
      if (IsVariableWidth(g.type)) {
        g.offsets.assign(capacity + 1, 0);
        o.offsets = g.offsets;
        o.string_bytes = &g.bytes;
        o.max_string_bytes = std::min<uint64_t>(limits.max_table_bytes, 0x7fffffff);
      } else {
        g.data.assign(g.type == ColumnType::kBool ? BitmapBytes(capacity)
                                                  : capacity * ColumnWidth(g.type),
                      std::byte{0});
        o.data = g.data;
      }
      o.null_count = &g.nulls;
      outputs.push_back(o);
    }
    JoinResult result;
    JoinBatchT<K> run = batch;
    run.out_left_rows = left;
    run.out_right_rows = right;
    run.result = &result;
    run.found = found;
    run.gather = std::move(outputs);
    JoinNodeT<K> node;
    node.index = &index;
    node.kind = step.kind;
    node.batches.push_back(std::move(run));
    CommandGraph graph;
    graph.Add(std::move(node));
    GPUJOIN_RETURN_IF_ERROR(backend.Run(graph));
    if (result.count > capacity) {
      if (attempt > 0) {
        return absl::InternalError(absl::StrCat("a lookup step's join needed ", result.count,
                                                " rows after a run sized for ", capacity));
      }
      capacity = result.count;
      continue;
    }
    const uint64_t out_rows = result.count;
    if (out_rows > 0xfffffffeull) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a lookup step made ", out_rows, " rows, more than 2^32 - 2"));
    }
    left.resize(out_rows);
    PlanTable out = TakeRows(table, left);
    for (size_t i = 0; i < gathered.size(); ++i) {
      Gathered& g = gathered[i];
      PlanColumn c;
      c.type = g.type;
      c.rows = out_rows;
      if (IsVariableWidth(g.type)) {
        g.offsets.resize(out_rows + 1);
        c.offsets = std::move(g.offsets);
        const auto* p = reinterpret_cast<const std::byte*>(g.bytes.data());
        c.data.assign(p, p + g.bytes.size());
      } else {
        g.data.resize(g.type == ColumnType::kBool ? BitmapBytes(out_rows)
                                                  : out_rows * ColumnWidth(g.type));
        c.data = std::move(g.data);
      }
      if (g.nulls > 0) {
        g.validity.resize(BitmapBytes(out_rows));
        c.validity = std::move(g.validity);
      }
      out.columns.push_back(std::move(c));
    }
    ColumnBuilder found_column(ColumnType::kBool);
    for (uint64_t p = 0; p < out_rows; ++p) {
      bool f = step.kind != JoinKind::kLeftAnti;
      if (step.kind == JoinKind::kLeftOuter) f = found[left[p]] != 0;
      found_column.AppendBool(f);
    }
    out.columns.push_back(found_column.Finish());
    out.rows = out_rows;
    GPUJOIN_RETURN_IF_ERROR(CheckTableBytes(out.bytes(), limits, "the lookup's rows"));
    statistics->query = result.statistics;
    return out;
  }
}

}  // namespace

absl::StatusOr<PlanTable> RunLookupStep(Backend& backend, const PlanLookupStep& step,
                                        const HashIndex& index, const PlanTable& table,
                                        const PlanLimits& limits, PlanStepStatistics* statistics) {
  switch (index.spec().key_type) {
    case KeyType::kUint32: return LookupOf<uint32_t>(backend, step, index, table, limits, statistics);
    case KeyType::kUint64: return LookupOf<uint64_t>(backend, step, index, table, limits, statistics);
    case KeyType::kColumns:
      return LookupOf<ColumnKey>(backend, step, index, table, limits, statistics);
  }
  return absl::InternalError("unknown key type");
}

}  // namespace gpujoin::engine::plan_detail
